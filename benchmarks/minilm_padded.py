"""The numpy MiniLM as first merged (padded batches of 32, one product per Q, K and V, float64
GELU temporaries): the baseline the packed forward pass of ``atc.retrieval.minilm`` is timed
against in bench_retrieval.py. Kept only for that comparison; it computes the same vectors."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from atc.retrieval.minilm import MiniLM

_HEADS = 12


def _erf(x: np.ndarray) -> np.ndarray:
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + 1e-12) * weight + bias)


class PaddedMiniLM(MiniLM):
    """Same weights and tokenizer, the merged forward pass."""

    batch_size = 32

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        seqs = self._token_ids(texts)
        order = sorted(range(len(texts)), key=lambda i: len(seqs[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            width = max(len(seqs[i]) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.float32)
            for r, i in enumerate(rows):
                seq = seqs[i]
                ids[r, : len(seq)] = seq
                mask[r, : len(seq)] = 1.0
            out[rows] = self._padded(ids, mask)
        return out

    def _padded(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w = self._w
        batch, width = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:width]
             + w["embeddings.token_type_embeddings.weight"][0]).astype(np.float32)
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = self.dim // _HEADS
        key_bias = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)
        for n in range(len(self._layers)):
            p = f"encoder.layer.{n}."

            def linear(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
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
            h = linear(x, "intermediate.dense")
            x = _layer_norm(linear(np.asarray(0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))), "output.dense") + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)
