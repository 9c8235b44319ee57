"""Session mode for the hostile-program suites: each program runs as a snippet of a sandbox session.

``InSession(backend).run(program, tools, limits)`` opens a session on ``backend``, runs a benign
snippet that keeps a global, then the program as the next snippet, and returns that snippet's
result, so that every check a suite makes of a run it makes of a snippet too. Afterwards, while
the session is still open, a benign snippet looks for its global: an interpreter that survived
the program kept its state (``after``); then the session is closed. ``look_afresh`` runs a
probe in a NEW session, which must see nothing of the one before: no file in its writable
places, no foreign process, no global of it.
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.api import Backend, ExecutionResult, Limits, Toolset
from sandbox.session.open import open_session

__all__ = ["InSession", "BENIGN", "KEPT"]

KEPT = "benign-state-3c9e"
BENIGN = f"kept = {KEPT!r}\nprint('ready')"

#: What a fresh session sees: its writable places, the processes it can see, the globals it has.
PROBE = """
import json, os
places = {}
for d in ("/tmp", os.getcwd(), "/dev/shm"):
    try:
        places[d] = sorted(os.listdir(d))
    except OSError as e:
        places[d] = type(e).__name__
me = os.getpid()
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me)
print(json.dumps({"places": places, "pids": pids, "kept": "kept" in globals()}))
"""


class InSession:
    """A backend whose ``run`` is a snippet of a fresh session (see the module docstring)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.name = inner.name
        self.after: ExecutionResult | None = None
        self.alive_after: bool = False

    def run(self, program: str, tools: Toolset, limits: Limits) -> ExecutionResult:
        with open_session(tools, limits, sandbox=self.inner) as s:
            before = s.run(BENIGN)
            assert before.ok and before.answer == "ready\n", before.to_dict()
            result = s.run(program)
            self.after = s.run("print(kept)") if s.alive else None
            self.alive_after = s.alive
        assert not s.alive
        return result

    def check_after(self) -> None:
        """The snippet after the program: the interpreter kept the benign global, or -- when the
        program left work running in it (a forged ``done``, processes that hog the CPU) -- the
        snippet could not run in time and the session ended. Nothing else."""
        after = self.after
        if after is None:
            return
        if after.ok:
            assert after.answer == f"{KEPT}\n", after.to_dict()
        else:
            assert after.error is not None and after.error.type == "Timeout", after.to_dict()
            assert not self.alive_after

    def look_afresh(self, tools: Toolset, limits: Limits) -> dict[str, Any]:
        """What a new session on the same backend sees (after this one was closed)."""
        with open_session(tools, limits, sandbox=self.inner) as s:
            seen = s.run(PROBE)
        assert seen.ok, seen.to_dict()
        found: dict[str, Any] = json.loads(seen.answer)
        found["own_pid_namespace"] = self.name == "docker" or "pidns" in seen.isolation
        return found

    def close(self) -> None:
        pass

    def __enter__(self) -> InSession:
        return self

    def __exit__(self, *exc: object) -> None:
        pass
