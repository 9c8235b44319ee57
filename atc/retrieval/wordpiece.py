"""BERT's uncased WordPiece tokenizer in plain Python, for a process that embeds one short query.

The ``tokenizers`` package is exact and fast on batches, but a fresh process pays for it before
it tokenises anything: the import and parsing the 700 KB ``tokenizer.json`` take 40-250 ms here,
several times what embedding a one-line request costs. This module reads only the vocabulary
(``vocab.txt``, one token a line: about 3 ms) and tokenises the way ``tokenizer.json`` of
all-MiniLM-L6-v2 says (``BertNormalizer`` with lower-casing and accent stripping,
``BertPreTokenizer``, ``WordPiece`` with ``##`` and at most 100 characters a word, the special
tokens matched in the raw text). ``tests/atc/retrieval/test_retrieval_encoders.py`` checks that it gives the
ids of ``tokenizers`` on every text of the public retrieval sets and on generated ones.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

__all__ = ["WordPiece", "vocabulary"]

_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in _SPECIAL) + ")")
_MAX_CHARS = 100


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF
            or 0x2F800 <= cp <= 0x2FA1F)


#: what BertNormalizer drops as "control": every "other" category but tab, newline and return
_CONTROL = {"Cc", "Cf", "Co", "Cn", "Cs"}


def _normalise(text: str) -> str:
    """BertNormalizer: drop NUL, U+FFFD and control characters, whitespace to a space, spaces
    around CJK ideographs, then NFD without combining marks, lower-cased."""
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD:
            continue
        if ch in " \t\n\r":
            out.append(" ")
            continue
        category = unicodedata.category(ch)
        if category in _CONTROL:
            continue
        if category in ("Zs", "Zl", "Zp"):
            out.append(" ")
            continue
        if _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    return "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn").lower()


class WordPiece:
    """Token ids of texts, as ``tokenizers`` computes them for all-MiniLM-L6-v2 (see the module doc)."""

    def __init__(self, vocab: Path | Sequence[str]) -> None:
        tokens = Path(vocab).read_text(encoding="utf-8").split("\n") if isinstance(vocab, Path) else list(vocab)
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.vocab = dict(zip(tokens, range(len(tokens)), strict=True))
        self.unk = self.vocab["[UNK]"]
        self.cls = self.vocab["[CLS]"]
        self.sep = self.vocab["[SEP]"]
        self._words: dict[str, list[int]] = {}

    def _word(self, word: str) -> list[int]:
        found = self._words.get(word)
        if found is not None:
            return found
        if len(word) > _MAX_CHARS:
            return [self.unk]
        ids: list[int] = []
        start = 0
        vocab = self.vocab
        while start < len(word):
            end = len(word)
            piece = None
            while end > start:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                piece = vocab.get(sub)
                if piece is not None:
                    break
                end -= 1
            if piece is None:
                ids = [self.unk]
                break
            ids.append(piece)
            start = end
        if len(self._words) < 50_000:
            self._words[word] = ids
        return ids

    def _plain(self, text: str, out: list[int]) -> None:
        for chunk in _normalise(text).split():
            word: list[str] = []
            for ch in chunk:
                if _is_punctuation(ch):
                    if word:
                        out.extend(self._word("".join(word)))
                        word = []
                    out.extend(self._word(ch))
                else:
                    word.append(ch)
            if word:
                out.extend(self._word("".join(word)))

    def ids(self, text: str, *, max_length: int | None = None, special: bool = True) -> list[int]:
        """The ids of ``text``; ``special``: between ``[CLS]`` and ``[SEP]``; ``max_length``
        counts them, and the text is cut before ``[SEP]`` (as ``tokenizers`` truncates)."""
        out: list[int] = []
        for n, part in enumerate(_SPECIAL_RE.split(text)):
            if n % 2:
                out.append(self.vocab[part])
            elif part:
                self._plain(part, out)
        if max_length is not None:
            out = out[:max(0, max_length - (2 if special else 0))]
        return [self.cls, *out, self.sep] if special else out


@functools.lru_cache(maxsize=4)
def vocabulary(path: Path) -> WordPiece:
    """The tokenizer of ``vocab.txt`` at ``path``, read once per process (5-10 ms: the numpy
    model and the static first stage share it)."""
    return WordPiece(path)
