"""How many warm runners a backend keeps ready: sized to the observed demand, bounded by the machine.

Both backends keep, per set of spawn-time limits, a pool of runners started ahead of demand. A
fixed size (the old policy: two, refilled one at a time) drains in a burst and every further run
pays a cold start. ``Demand`` instead follows what the runs ask for:

- it never keeps fewer than ``PoolBounds.minimum`` (the backend's ``pool_size``) ready;
- a run that finds no runner ready and none on its way (a miss) doubles the target;
- with ``follow_rate`` (local runners, used once each), a steady rate of runs keeps enough
  ready to cover one start (``ceil(start time / time between runs) + 1``);
- ``busy(n)`` (Docker, whose containers come back after a run) keeps one more than the runs
  that ran at once: a caller running one program after another needs two containers, one
  running and one being reset. Every container started costs the engine far more than a
  reset, so the pool grows beyond that only when it shows it must: ``late()``, a run that
  found every container of a full pool still busy or resetting and had to wait for one (a
  reset that takes longer than a run, as on a loaded machine), keeps one more;
- it never goes beyond ``PoolBounds.maximum``: ``ATC_POOL_MAX`` when set, else what the machine
  allows (``machine_max``: a few per core, and no more than free memory holds);
- after ``idle_seconds`` without a run the target falls back to the minimum and the backend
  stops the surplus.

The environment is read here, where backends are made (``sandbox`` cannot import ``atc``).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["PoolBounds", "Demand", "machine_max", "POOL_MAX_ENV", "POOL_IDLE_ENV"]

POOL_MAX_ENV = "ATC_POOL_MAX"
POOL_IDLE_ENV = "ATC_POOL_IDLE_SECONDS"
#: Upper bound of the default maximum, whatever the machine.
_DEFAULT_CAP = 16


def machine_max(per_runner_mb: int, *, cpus: int | None = None, meminfo: str = "/proc/meminfo") -> int:
    """The most warm runners this machine should hold: four per core, at most ``_DEFAULT_CAP``, and
    no more than half of the available memory holds at ``per_runner_mb`` each."""
    cores = cpus or os.cpu_count() or 1
    bound = min(_DEFAULT_CAP, 4 * cores)
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available_mb = int(line.split()[1]) // 1024
                    bound = min(bound, max(1, available_mb // 2 // max(1, per_runner_mb)))
                    break
    except (OSError, ValueError):
        pass
    return max(1, bound)


@dataclass(frozen=True)
class PoolBounds:
    """``minimum`` runners always ready (per set of limits), ``maximum`` at most, back to the
    minimum after ``idle_seconds`` without a run."""

    minimum: int
    maximum: int
    idle_seconds: float = 10.0

    @classmethod
    def from_env(cls, minimum: int, *, per_runner_mb: int, maximum: int | None = None,
                 env: Mapping[str, str] | None = None) -> PoolBounds:
        """Bounds for a backend with ``pool_size=minimum``: ``maximum`` if given, else
        ``ATC_POOL_MAX``, else ``machine_max``. A pool of 0 stays 0 (every run cold)."""
        env = os.environ if env is None else env
        minimum = max(0, minimum)
        if maximum is None:
            raw = env.get(POOL_MAX_ENV, "").strip()
            try:
                maximum = int(raw) if raw else machine_max(per_runner_mb)
            except ValueError:
                raise ValueError(f"{POOL_MAX_ENV} must be a whole number, got {raw!r}") from None
        idle = 10.0
        raw_idle = env.get(POOL_IDLE_ENV, "").strip()
        if raw_idle:
            try:
                idle = float(raw_idle)
            except ValueError:
                raise ValueError(f"{POOL_IDLE_ENV} must be a number of seconds, got {raw_idle!r}") from None
        if minimum == 0:
            return cls(0, 0, idle)
        return cls(minimum, max(minimum, maximum), idle)


@dataclass
class Demand:
    """The observed demand for one set of limits and the pool size it calls for."""

    bounds: PoolBounds
    target: int = field(default=-1)
    last_take: float = field(default=0.0)
    gap: float = field(default=math.inf)  # smoothed seconds between runs
    start_seconds: float = field(default=0.05)  # smoothed time to start one runner
    peak: int = field(default=0)  # the largest size asked for so far (tests and benchmarks read it)
    follow_rate: bool = field(default=True)

    def __post_init__(self) -> None:
        if self.target < 0:
            self.target = self.bounds.minimum

    def taken(self, *, missed: bool, now: float | None = None, waited: float = 0.0) -> None:
        """A run asked for a runner at ``now`` and got one ``waited`` seconds later (``missed``:
        none was ready or on its way). The time between runs is counted without the waits, so
        that a pool that makes runs wait does not read as a slower demand."""
        now = time.monotonic() if now is None else now
        if self.last_take:
            gap = max(1e-4, now - self.last_take)
            self.gap = gap if math.isinf(self.gap) else 0.7 * self.gap + 0.3 * gap
        self.last_take = now + waited
        if missed:
            self.target = min(self.bounds.maximum, max(self.target + 1, 2 * self.target))
        self.peak = max(self.peak, self.wanted(now))

    def busy(self, running: int, now: float | None = None) -> None:
        """``running`` runs hold a runner at once now: keep one more than that."""
        self.target = min(self.bounds.maximum, max(self.target, running + 1))
        self.peak = max(self.peak, self.wanted(now))

    def late(self, now: float | None = None) -> None:
        """A run had to wait for a container's reset although no container was starting: keep
        one more."""
        self.target = min(self.bounds.maximum, self.target + 1)
        self.peak = max(self.peak, self.wanted(now))

    def started(self, seconds: float) -> None:
        """A runner took ``seconds`` to start."""
        self.start_seconds = 0.7 * self.start_seconds + 0.3 * seconds

    def wanted(self, now: float | None = None) -> int:
        """How many runners to keep ready (ready plus starting) now."""
        now = time.monotonic() if now is None else now
        if not self.bounds.maximum:
            return 0
        if self.last_take and now - self.last_take > self.bounds.idle_seconds:
            self.target = self.bounds.minimum
            self.gap = math.inf
            return self.bounds.minimum
        by_rate = 0 if math.isinf(self.gap) or not self.follow_rate else math.ceil(self.start_seconds / self.gap) + 1
        return max(self.bounds.minimum, min(self.bounds.maximum, max(self.target, by_rate)))
