"""The first stage of the local model: texts as weighted means of the model's own token embeddings.

all-MiniLM-L6-v2 embeds about 60 tools a second per core (a transformer pass is about 21 MFLOP a
token); a store of thousands of tools would make every import wait minutes. The hybrid therefore
ranks in two stages (hybrid.py): every tool by a static vector computed here, at about a
thousand tools in 0.15 s, then the first ``SHORT_LIST`` tools again with the full model, whose
vectors are computed when a search first needs them (or in the background after an import,
fill.py) and kept.

A static vector needs no forward pass at all. It is built from the model's input embedding
table (``embeddings.word_embeddings.weight``, 30,522 rows of 384 numbers, read in place from the
memory-mapped weights): each row is centred on the table's mean (the direction every token
shares says nothing) and scaled to length 1; a text's vector is the sum of the rows of its
WordPiece tokens, each weighted by ``log(1 + rank)``, where the rank counts from the first word of
the vocabulary ("the"): BERT's vocabulary lists its words by frequency, so by Zipf's law the log
of the rank stands in for the token's inverse document frequency, with no corpus to count. Rows
distilled by the full model ("[CLS] token [SEP]", model2vec-style) were measured too: slower to
make (about 92,000 token passes), and no better as a first stage (benchmarks/RESULTS.md, #25).

Alone these vectors lose 0.1-0.2 nDCG@5 against the full model; as the first stage of the
hybrid, re-ranked by it, they stay within 0.003 of it on every public set.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from atc.errors import ConfigError
from atc.retrieval.minilm import TableRows, read_safetensors
from atc.retrieval.onnx_minilm import weights_key
from atc.retrieval.weights import INSTALL_HINT, model_dir
from atc.retrieval.wordpiece import WordPiece, vocabulary
from protocols.files import atomic_write

__all__ = ["StaticEmbedder", "STATIC_VERSION"]

#: bumped when the way static vectors are made changes: an index of another version is rebuilt
STATIC_VERSION = 1
#: at most this many texts are tokenised in plain Python (wordpiece.py); more go to ``tokenizers``
_PLAIN_TEXTS = 32
#: tokens gathered per step of a large batch (bounds the temporary rows: 16,384 x 384 floats)
_STEP_TOKENS = 16384


class StaticEmbedder:
    """Static vectors of texts (see the module doc); ``embed`` returns unit rows (float32)."""

    dim = 384

    def __init__(self, folder: Path | None = None, *, models: Path | None = None) -> None:
        folder = folder or model_dir()
        if folder is None:
            raise ConfigError("the local embedding model is not installed", hint=INSTALL_HINT)
        self.name = f"all-MiniLM-L6-v2-static-{STATIC_VERSION}"
        self._folder = folder
        self._models = models
        self._table = read_safetensors(folder / "model.safetensors")["embeddings.word_embeddings.weight"]
        self._wordpiece: WordPiece | None = None
        self._fast: Any = None
        self._center: np.ndarray | None = None
        self._weights: np.ndarray | None = None
        self._lock = threading.Lock()
        # a request's rows are read without touching the map (minilm.TableRows says why)
        self._gather = TableRows(folder / "model.safetensors", "embeddings.word_embeddings.weight", self._table)

    # -- the parts ------------------------------------------------------------------------------

    def _vocab(self) -> WordPiece:
        if self._wordpiece is None:
            self._wordpiece = vocabulary(self._folder / "vocab.txt")
        return self._wordpiece

    def weights(self) -> np.ndarray:
        """Each token's weight: ``log(1 + rank)`` from the first word ("the"), ``log 2`` before it
        (special tokens, single characters)."""
        if self._weights is None:
            first = self._vocab().vocab.get("the", 0)
            rank = np.maximum(np.arange(len(self._table), dtype=np.float64) - first + 1, 1.0)
            self._weights = np.log1p(rank).astype(np.float32)
        return self._weights

    def center(self) -> np.ndarray:
        """The mean of the embedding table's rows, computed once per models folder (a 47 MB read:
        a one-query process reads 1.5 KB instead) and kept next to the onnxruntime models."""
        if self._center is not None:
            return self._center
        path = self._center_path()
        if path is not None:
            try:
                data = path.read_bytes()
                if len(data) == 4 * self.dim:
                    self._center = np.frombuffer(data, dtype="<f4").copy()
                    return self._center
            except OSError:
                pass
        center: np.ndarray = np.asarray(self._table, dtype=np.float32).mean(axis=0, dtype=np.float64).astype("<f4")
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(path, center.tobytes())
            except OSError:  # a folder we cannot write: computed again next time, nothing lost
                pass
        self._center = center
        return center

    def _center_path(self) -> Path | None:
        if self._models is None:
            return None
        return Path(self._models) / f"all-MiniLM-L6-v2-{weights_key(self._folder / 'model.safetensors')}-center.f32"

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """The weighted, centred unit rows of the tokens ``ids``."""
        rows: np.ndarray = self._gather(ids) - self.center()
        rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), np.float32(1e-9))
        rows *= self.weights()[ids][:, None]
        return rows

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """WordPiece ids without ``[CLS]``/``[SEP]`` and without a length limit; ``[UNK]`` for a
        text without any."""
        unk = self._vocab().unk
        if len(texts) > _PLAIN_TEXTS:
            with self._lock:
                if self._fast is None:
                    try:
                        # tokenizers (optional, atc[embed]): only a batch of texts to tokenise needs it
                        from tokenizers import Tokenizer
                    except ImportError:
                        self._fast = False
                    else:
                        fast = Tokenizer.from_file(str(self._folder / "tokenizer.json"))
                        fast.no_truncation()
                        fast.no_padding()
                        self._fast = fast
            if self._fast:
                return [e.ids or [unk] for e in self._fast.encode_batch(list(texts), add_special_tokens=False)]
        wordpiece = self._vocab()
        return [wordpiece.ids(t, special=False) or [unk] for t in texts]

    # -- the embedder ---------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        seqs = self.token_ids(texts)
        if len(seqs) == 1:  # one request: its own rows, summed
            out[0] = self.rows(np.asarray(seqs[0], dtype=np.int64)).sum(axis=0)
        else:
            lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
            flat = np.fromiter((t for s in seqs for t in s), dtype=np.int64, count=int(lengths.sum()))
            unique, inverse = np.unique(flat, return_inverse=True)
            table = self.rows(unique)  # each distinct token once
            ends = np.cumsum(lengths)
            start = 0
            while start < len(seqs):  # texts in steps of about _STEP_TOKENS tokens
                first = int(ends[start - 1]) if start else 0
                stop = int(np.searchsorted(ends, first + _STEP_TOKENS, side="right"))
                stop = max(stop, start + 1)
                last = int(ends[stop - 1])
                offsets = np.concatenate([[0], np.cumsum(lengths[start:stop])[:-1]])
                out[start:stop] = np.add.reduceat(table[inverse[first:last]], offsets, axis=0)
                start = stop
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, np.float32(1e-9))
        return out
