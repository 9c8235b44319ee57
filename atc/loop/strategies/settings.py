"""The built-in strategies' settings as typed values, with the published ones under their names.

Every bound a strategy has is a field here, so that an evaluation can say exactly what ran
(``to_dict()`` goes into ``summary.json``) and a reader of the paper can set what the paper set.
Where atc's own choice and a published one differ, both are kept as named profiles:

- ``chain`` / ``chain-plain``: ``atc`` (4 programs: the first and ``--max-reflections 3`` repairs)
  and ``paper`` (3 programs: the Chain-of-Tools paper's alpha = 3 counts generations, as its
  released code's loop does);
- ``react``: ``atc`` (12 turns, function calling, long responses condensed) and ``toolbench``
  (ToolBench's single chain, its CoT@1: a path of 12 tree levels -- a turn is 2 levels, 3 with a
  thought -- a ``finish`` that may give up, responses cut at 1,024 characters);
- ``dfsdt``: ``toolbench`` (the default: ToolBench's published DFSDT, width 2, 12 tree levels per
  path, 200 model turns per task, a give-up in the first state ends the search, responses cut at
  1,024 characters) and ``atc`` (10 turns per path, 30 nodes, a give-up at the root restarts);
- ``codeact``: 10 turns, as CodeAct's own evaluation loop.

``atc.loop.strategies.registry.choose`` resolves a name, a preset and overrides into one of these once;
the strategies read nothing else.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from atc.errors import UsageError

__all__ = ["ChainSettings", "ReactSettings", "CodeActSettings", "DfsdtSettings", "StrategySettings",
           "profile_of", "override"]

_S = TypeVar("_S", bound="StrategySettings")


class StrategySettings:
    """What every settings class has: named profiles, a check, the JSON, and the bound that
    ``--max-steps`` sets (``step_field``)."""

    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {}
    step_field: ClassVar[str] = ""

    def check(self) -> None:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, int) and not isinstance(value, bool) and value < 1:
                raise UsageError(f"{type(self).__name__}.{f.name} must be at least 1, not {value}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload, no-any-return]


def _choice(owner: str, name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UsageError(f"{owner}.{name} must be one of {', '.join(allowed)}, not {value!r}")


@dataclass(frozen=True)
class ChainSettings(StrategySettings):
    """``chain`` and ``chain-plain``: at most ``max_attempts`` programs (the first one and its
    repairs)."""

    max_attempts: int = 4
    profile: str = "atc"

    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "atc": {"max_attempts": 4},
        "paper": {"max_attempts": 3},
    }
    step_field: ClassVar[str] = "max_attempts"


@dataclass(frozen=True)
class ReactSettings(StrategySettings):
    """``react``: ``format`` ``functions`` (the chat API's function calling) or ``text`` (Thought /
    Action / Action Input / Observation in plain text, for servers without function calling);
    at most ``max_turns`` turns (None: no bound in turns) and ``max_levels`` ToolBench tree levels
    (None: none); ``give_up``: ``finish`` also takes ToolBench's ``give_up_and_restart``, which
    ends the run without an answer; an observation longer than ``max_observation`` characters is
    ``condense``d (its shape and an excerpt) or ``truncate``d (cut, as ToolBench does)."""

    format: str = "functions"
    max_turns: int | None = 12
    max_levels: int | None = None
    give_up: bool = False
    max_observation: int = 2000
    observation: str = "condense"
    profile: str = "atc"

    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "atc": {"max_turns": 12, "max_levels": None, "give_up": False, "max_observation": 2000,
                "observation": "condense"},
        "toolbench": {"max_turns": None, "max_levels": 12, "give_up": True, "max_observation": 1024,
                      "observation": "truncate"},
    }
    step_field: ClassVar[str] = "max_turns"

    def check(self) -> None:
        super().check()
        _choice("react", "format", self.format, ("functions", "text"))
        _choice("react", "observation", self.observation, ("condense", "truncate"))
        if self.max_turns is None and self.max_levels is None:
            raise UsageError("react needs a bound: max_turns or max_levels")


@dataclass(frozen=True)
class CodeActSettings(StrategySettings):
    """``codeact``: at most ``max_turns`` turns; a snippet's output is shown up to
    ``max_output`` characters."""

    max_turns: int = 10
    max_output: int = 2000
    profile: str = "codeact"

    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "codeact": {"max_turns": 10},
        "atc": {"max_turns": 12},
    }
    step_field: ClassVar[str] = "max_turns"


@dataclass(frozen=True)
class DfsdtSettings(StrategySettings):
    """``dfsdt``: ``width`` children per node; a path ends at ``max_depth`` in ``depth_unit``
    (``levels``: ToolBench's tree levels, a turn being 2 of them, 3 when the reply has a thought;
    ``turns``); at most ``max_nodes`` nodes, i.e. model turns, per task; a give-up in the first
    state ``end``s the search (ToolBench) or ``retry``s from the root (atc's own); observations
    as ``ReactSettings``'."""

    width: int = 2
    max_depth: int = 12
    depth_unit: str = "levels"
    max_nodes: int = 200
    root_give_up: str = "end"
    max_observation: int = 1024
    observation: str = "truncate"
    profile: str = "toolbench"

    PROFILES: ClassVar[dict[str, dict[str, Any]]] = {
        "toolbench": {"width": 2, "max_depth": 12, "depth_unit": "levels", "max_nodes": 200, "root_give_up": "end",
                      "max_observation": 1024, "observation": "truncate"},
        "atc": {"width": 2, "max_depth": 10, "depth_unit": "turns", "max_nodes": 30, "root_give_up": "retry",
                "max_observation": 2000, "observation": "condense"},
    }
    step_field: ClassVar[str] = "max_nodes"

    def check(self) -> None:
        super().check()
        _choice("dfsdt", "depth_unit", self.depth_unit, ("levels", "turns"))
        _choice("dfsdt", "root_give_up", self.root_give_up, ("end", "retry"))
        _choice("dfsdt", "observation", self.observation, ("condense", "truncate"))


def profile_of(cls: type[_S], name: str, base: _S | None = None) -> _S:
    """The settings of profile ``name`` (on top of ``base``, else the class defaults)."""
    if name not in cls.PROFILES:
        raise UsageError(f"no {cls.__name__} profile {name!r}", hint=f"profiles: {', '.join(cls.PROFILES)}")
    start = base if base is not None else cls()
    return dataclasses.replace(start, profile=name, **cls.PROFILES[name])  # type: ignore[type-var]


def _coerce(cls: type[Any], key: str, value: Any) -> Any:
    """A value given as text (``--set dfsdt.max_nodes=30``) in the field's type."""
    field = {f.name: f for f in dataclasses.fields(cls)}[key]
    kind = str(field.type)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("none", "null") and "None" in kind:
        return None
    if kind.startswith("int"):
        try:
            return int(text)
        except ValueError as exc:
            raise UsageError(f"{cls.__name__}.{key} takes a whole number, not {value!r}") from exc
    if kind.startswith("bool"):
        if text.lower() in ("true", "yes", "1", "on"):
            return True
        if text.lower() in ("false", "no", "0", "off"):
            return False
        raise UsageError(f"{cls.__name__}.{key} takes true or false, not {value!r}")
    return text


def override(settings: _S, changes: dict[str, Any]) -> _S:
    """``settings`` with ``changes`` (field -> value; ``profile`` picks a named profile first),
    checked: an unknown field or a bad value is a ``UsageError``."""
    cls = type(settings)
    changes = dict(changes)
    if "profile" in changes:
        settings = profile_of(cls, str(changes.pop("profile")), settings)
    names = {f.name for f in dataclasses.fields(cls)} - {"profile"}  # type: ignore[arg-type]
    unknown = sorted(set(changes) - names)
    if unknown:
        raise UsageError(f"{cls.__name__} has no setting {', '.join(unknown)}", hint=f"settings: {', '.join(sorted(names))}")
    typed = {k: _coerce(cls, k, v) for k, v in changes.items()}
    out = dataclasses.replace(settings, **typed)  # type: ignore[type-var]
    out.check()
    return out
