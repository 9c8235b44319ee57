"""Refusals (401/403) while probing: what they mean, what to tell the user, when to stop.

Two situations stop a probe:

- **No credential works** (the API wants one, or another one): ``AUTH_WALL`` tools in a row
  refused, with no success between them (a public health check that answers proves nothing
  about the rest). Probing further would only collect refusals.
- **A credential that worked stops working**, anywhere in the probe: a write may have deleted the
  account the probe was logged in as, a token may have expired. After a refusal, once some
  request of the probe has succeeded, the *canary* -- the first read that succeeded -- is asked
  again, bypassing the cache. Refused too: the credential is gone, the probe stops at once and
  says what happened and which unsafe call came last before it; answered: the refusal was about
  that one tool (403 on a resource the user may not read), and probing goes on. There are two
  canaries, the first read that succeeded and the latest one of another tool: the first is often
  an endpoint that needs no credential at all (a health check), the latest rarely is. They are
  asked again after any unsafe call, or after a few refusals in a row, not after every one.

``hint`` is the advice that fits a refusal: with a credential given for the API, check it (never
"pass --credential" again); with none and a spec that declares schemes, pass one for them; with
none and no scheme in the spec, say where the secret goes (``header:NAME=env:VAR``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from probes.calls import Caller, Observation
from protocols.model import Collection, Tool
from sandbox.api import Toolset
from sandbox.gateway.http.credentials import for_collection

__all__ = ["AuthWatch", "Watched", "hint", "given_credentials", "REFUSED", "AUTH_WALL"]

#: Statuses that refuse the caller rather than the request.
REFUSED = frozenset({401, 403, 407})
#: Tools refused before any success after which the probe stops (the API wants credentials).
AUTH_WALL = 3
#: Refusals in a row, with no unsafe call between them, after which the canary is asked again.
RECHECK_AFTER = 3


def given_credentials(toolset: Toolset, collection: Collection) -> list[str]:
    """The ``--credential`` keys that reach ``collection`` (scheme names and placements)."""
    schemes, placements = for_collection(toolset.credentials, collection, list(toolset.collections))
    return [*schemes, *(p.kind + (f":{p.name}" if p.name else "") for p, _ in placements)]


def hint(toolset: Toolset, tool: Tool) -> str:
    """What to do about a 401/403 from ``tool`` (see the module docstring)."""
    collection = toolset.collection_of(tool.name)
    if collection.mcp_server is not None:
        return "the MCP server refused it: check the environment variables it needs"
    given = given_credentials(toolset, collection)
    if given:
        return (f"the credential given ({', '.join(given)}) was refused: check its value and that it goes where "
                "the API wants it")
    schemes = sorted(collection.security_schemes)
    if schemes:
        return f"the API wants credentials: pass --credential {schemes[0]}=env:VAR (schemes: {', '.join(schemes)})"
    return ("the API wants credentials and the spec declares no security scheme: say where the secret goes, e.g. "
            "--credential header:Authorization=env:VAR (or query:NAME=, cookie:NAME=, bearer=, basic=)")


class _Answers(Protocol):
    """One tool's record in the probe (``probes.state.ToolState``): its answers."""

    @property
    def observations(self) -> list[Observation]: ...

    @property
    def successes(self) -> list[Observation]: ...


class Watched(Protocol):
    """What the watch reads of the probe it watches (``probes.state.ProbeState``, which holds the
    watch): said here as a Protocol so that this module sits below ``probes.state``."""

    @property
    def caller(self) -> Caller: ...

    @property
    def states(self) -> Mapping[str, _Answers]: ...

    def reads(self, tool: Tool) -> bool: ...


@dataclass
class _Canary:
    tool: Tool
    args: dict[str, object]
    status: int | None


class AuthWatch:
    """Watches one probe's answers for a credential that stops working (see the module docstring)."""

    def __init__(self, probe_state: Watched) -> None:
        self.s = probe_state
        self.canary: _Canary | None = None
        self.latest: _Canary | None = None
        self.refusals = 0
        self.streak: list[str] = []
        self.since_check = 0
        self.wrote_since_check = False
        self.last_write: str | None = None
        self.checks = 0

    def answered(self, tool: Tool, obs: Observation) -> None:
        """Every answer of the probe; the first read that succeeded with a fresh answer becomes the canary."""
        if obs.ok and (obs.status is None or 200 <= obs.status < 300):
            self.since_check = 0
            self.streak = []
        if obs.ok and obs.status is not None and 200 <= obs.status < 300:
            if not self.s.reads(tool):
                return
            if self.canary is None:
                self.canary = _Canary(tool, dict(obs.args), obs.status)
            elif tool.name != self.canary.tool.name:
                self.latest = _Canary(tool, dict(obs.args), obs.status)

    def wrote(self, what: str) -> None:
        """An unsafe call was sent (``what`` says which, for the stop message)."""
        self.wrote_since_check = True
        self.last_write = what

    def refused(self, tool: Tool, obs: Observation) -> str | None:
        """A 401/403 answer: the reason to stop the probe, or None to go on."""
        self.refusals += 1
        s = self.s
        reads = s.reads(tool)
        if tool.name not in self.streak and (reads or obs.status == 401):
            self.streak.append(tool.name)  # (a write refused with 403 is about permission, not the credential)
        if len(self.streak) >= AUTH_WALL:
            first = not any(x.successes for x in s.states.values())
            return (f"the API refused the {'first' if first else 'last'} {len(self.streak)} tools"
                    f"{'' if first else ' in a row'} with HTTP {obs.status}: {hint(s.caller.toolset, tool)}")
        if self.canary is None:
            return None
        self.since_check += 1
        if self.checks and not self.wrote_since_check and self.since_check < RECHECK_AFTER:
            return None
        self.checks += 1
        self.since_check = 0
        self.wrote_since_check = False
        for canary in (self.latest, self.canary):
            if canary is None:
                continue
            again = s.caller.call(canary.tool, dict(canary.args), fresh=True, round_=obs.round, charge_to=tool.name)
            state = s.states.get(canary.tool.name)
            if state is not None:
                state.observations.append(again)
            if again.kind == "budget":
                return self._message(tool, obs, canary, None) if obs.status == 401 else None
            if again.status in REFUSED:
                return self._message(tool, obs, canary, again)
        return None

    def _message(self, tool: Tool, obs: Observation, canary: _Canary, again: Observation | None) -> str:
        said = (f"{tool.name} got HTTP {obs.status}, and {canary.tool.name}, which answered HTTP {canary.status} "
                f"before, now answers HTTP {again.status} too"
                if again is not None else f"{tool.name} got HTTP {obs.status} after earlier requests had worked "
                "(the budget left no request to check)")
        after = f"; the last unsafe call sent was {self.last_write}" if self.last_write else ""
        return (f"stopped: the credential that worked is refused now: {said}{after}. "
                f"{hint(self.s.caller.toolset, tool)}")
