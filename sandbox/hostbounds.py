"""What one run may cost the HOST (the atc process serving it), derived from the run's own limits.

A sandbox confines what a program does inside it; everything it sends out is work for the atc
process: frames to receive and decode, arguments to validate, answers to decode and redact, a
call log to keep. A program chooses all of that, so each is bounded here, in proportion to the
limits the run was given, so that running N programs at once (``solve_many``, ``atc batch``)
costs the host N small multiples of their limits and no more. The target, measured by
``tests/sandbox/test_host_memory.py`` and ``benchmarks/bench_hostile.py``: the atc process's peak
resident memory during any run stays within ``4 x --memory`` above what it was before the run
(with ``--memory`` taken as at least ``MIN_BASIS_MB``).

The bounds, with ``M`` = ``max(memory_mb, MIN_BASIS_MB)``:

- ``frame_bytes``: one frame from the runner, ``M/8`` MB between 1 and 16 MB (a program in ``M`` MB
  cannot build much more), at least what the ``done`` frame needs for the output cap;
- ``frame_values``: values in one frame, and in one decoded API response, ``8192 x M`` (one per
  128 bytes of the run's memory, each costing the host up to ``jsonbounds.VALUE_COST``): counted
  before decoding, so a frame of five million empty lists is refused unparsed;
- ``frames`` and ``wire_bytes``: every frame counts, whatever it says: a run may send as many
  frames as its calls, its output stream (one frame per 0.2 s at most) and its end need, with
  room to spare, and 64 MB plus four times its output cap in all;
- ``checked_values``, ``validation_steps``, ``validation_errors``: the gateway checks at most that
  many argument values per call (counted before validating), runs at most that many schema
  keyword checks and keeps at most that many errors; the run's deadline is checked meanwhile;
- ``log_value_bytes`` and ``log_bytes``: the call log keeps an argument set or a response whole
  up to ``log_value_bytes`` (as the host holds it, ``jsonbounds.host_size``), a bounded summary
  beyond; once the run's log holds ``log_bytes``, every further one is summarised to
  ``LOG_TAIL_BYTES``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sandbox.api import Limits

__all__ = ["HostBounds", "MIN_BASIS_MB", "MAX_FRAME_BYTES", "LOG_TAIL_BYTES"]

#: Runs with a smaller ``--memory`` are bounded as if they had this much (a Python program needs
#: more than this to start; the floor keeps the frames of tiny runs usable).
MIN_BASIS_MB = 32
#: Largest frame of any run.
MAX_FRAME_BYTES = 16 << 20
#: What the call log keeps of an argument set or response once the run's log is full.
LOG_TAIL_BYTES = 4 << 10
#: The runner streams output at most this often (``sandbox/inside/runner.py`` ``FLUSH_SECONDS``).
_FLUSH_SECONDS = 0.2


@dataclass(frozen=True)
class HostBounds:
    """The host-side bounds of one run (see the module docstring)."""

    frame_bytes: int
    frame_values: int
    frames: int
    wire_bytes: int
    checked_values: int
    validation_steps: int
    validation_errors: int
    log_value_bytes: int
    log_bytes: int

    @classmethod
    def of(cls, limits: Limits) -> HostBounds:
        basis = max(limits.memory_mb, MIN_BASIS_MB)
        done = 2 * limits.max_output_bytes + 65536
        return cls(
            frame_bytes=max(done, min(MAX_FRAME_BYTES, max(1 << 20, (basis << 20) // 8))),
            frame_values=basis * 8192,
            frames=limits.max_calls + 2 * math.ceil(limits.timeout / _FLUSH_SECONDS) + 64,
            wire_bytes=(64 << 20) + 4 * limits.max_output_bytes,
            checked_values=100_000,
            validation_steps=200_000,
            validation_errors=1_000,
            log_value_bytes=64 << 10,
            log_bytes=max(4 << 20, (basis << 20) // 16),
        )
