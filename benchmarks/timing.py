"""Timing helpers shared by the benchmark scripts: one row per measured thing, p50 and p95."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Row:
    name: str
    p50_ms: float
    p95_ms: float
    n: int

    def to_dict(self) -> dict[str, float | int | str]:
        return {"name": self.name, "p50_ms": round(self.p50_ms, 2), "p95_ms": round(self.p95_ms, 2), "n": self.n}


def measure(name: str, n: int, once: Callable[[], None], *, before: Callable[[], object] | None = None) -> Row:
    """Time ``once`` ``n`` times (``before`` runs untimed before each, e.g. to refill a pool)."""
    samples = []
    for _ in range(n):
        if before is not None:
            before()
        started = time.perf_counter()
        once()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return Row(name, statistics.median(samples), samples[min(n - 1, round(0.95 * (n - 1)))], n)


def median_us(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of ``fn()`` in microseconds, over ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)
