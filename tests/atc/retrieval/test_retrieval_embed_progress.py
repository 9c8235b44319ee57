"""A long embedding reports its progress and, when interrupted, keeps the vectors it computed.

The embedder is a fake at our own seam (``Embedder``: texts in, unit vectors out) that counts what
it is asked and can be told to fail on its n-th call, as a Ctrl-C or a dying server would."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from atc.retrieval import embedders
from atc.retrieval.embedders import VectorCache, embed_cached, text_hash


class CountingEmbedder:
    name = "counting-test"
    dim = 8

    def __init__(self, fail_on_call: int | None = None) -> None:
        self.calls: list[int] = []
        self.fail_on_call = fail_on_call

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        if self.fail_on_call is not None and len(self.calls) == self.fail_on_call:
            raise KeyboardInterrupt
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, hash(t) % self.dim] = 1.0
        return out


TEXTS = [f"tool number {i} finds things" for i in range(50)]


def test_progress_is_reported_step_by_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders, "EMBED_STEP", 16)
    seen: list[tuple[int, int]] = []
    emb = CountingEmbedder()
    vectors = embed_cached(emb, TEXTS, VectorCache(tmp_path, emb.name), progress=lambda d, t: seen.append((d, t)))
    assert vectors.shape == (50, 8)
    assert emb.calls == [16, 16, 16, 2]
    assert seen == [(0, 50), (16, 50), (32, 50), (48, 50), (50, 50)]  # the start, then each step
    again = CountingEmbedder()
    assert np.array_equal(embed_cached(again, TEXTS, VectorCache(tmp_path, emb.name)), vectors)
    assert again.calls == []  # every vector came from the cache


def test_an_interrupted_embedding_keeps_what_it_computed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedders, "EMBED_STEP", 10)
    monkeypatch.setattr(embedders, "SAVE_EVERY", 0.0)  # save after every step
    emb = CountingEmbedder(fail_on_call=4)
    with pytest.raises(KeyboardInterrupt):
        embed_cached(emb, TEXTS, VectorCache(tmp_path, emb.name))
    kept = VectorCache(tmp_path, emb.name).get([text_hash(t) for t in TEXTS])
    assert [v is not None for v in kept] == [True] * 30 + [False] * 20
    resumed = CountingEmbedder()
    embed_cached(resumed, TEXTS, VectorCache(tmp_path, emb.name))
    assert sum(resumed.calls) == 20  # only what was lost is computed again
