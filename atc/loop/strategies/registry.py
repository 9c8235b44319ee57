"""Strategies by name: the built-ins and those of installed packages, registered the same way.

A name maps to a factory: ``factory(**options) -> Strategy``. Options are keywords
(``max_reflections``, ``max_steps``, and whatever a strategy of its own takes); a factory ignores
the ones it does not use, so that one set of options can be handed to any strategy.

The built-ins register stand-ins that import their module on first use (``atc solve`` with the
default ``chain`` never imports the tree search). A package adds a strategy by declaring an entry
point in the group ``atc.loop.strategies`` -- ``name = package.module:Factory`` -- in its
``pyproject.toml``::

    [project.entry-points."atc.loop.strategies"]
    mine = "my_package.strategy:MyStrategy"

Entry points are read on the first lookup of a name that is not registered, or by
``registered()``; a registration in code (``register``) wins over an entry point of the same name.

Settings are resolved here, once: ``choose(name, preset=..., changes=..., max_steps=...)`` turns a
name (``dfsdt``, or ``dfsdt@3`` for the method rerun up to 3 times until it answers:
``atc.loop.strategies.repeat``), a preset (``default``, or ``paper``: every built-in on the setting of
the Chain-of-Tools paper and the baselines' published code) and explicit changes into a ``Choice``:
the base name, the runs, the typed settings of a built-in (``atc.loop.strategies.settings``) and the
options of a plug-in. A ``Choice`` is a plain value (it travels to other processes), ``make()``s
the strategy, and its ``to_dict()`` is what ``summary.json`` names for the strategy.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from atc.errors import ConfigError, UsageError
from atc.loop.strategies.base import Strategy
from atc.loop.strategies.repeat import UNTIL, Repeat
from atc.loop.strategies.settings import (
    ChainSettings,
    CodeActSettings,
    DfsdtSettings,
    ReactSettings,
    StrategySettings,
    override,
    profile_of,
)

__all__ = ["register", "registered", "factory", "make", "resolve", "refresh", "choose", "split_name", "Choice",
           "DEFAULT", "BUILTIN", "ENTRY_POINT_GROUP", "PRESETS", "PRESET_STRATEGIES", "SETTINGS"]

DEFAULT = "chain"
ENTRY_POINT_GROUP = "atc.loop.strategies"
#: Built-in strategies: name -> the module that registers it.
BUILTIN = {
    "chain": "atc.loop.strategies.chain",
    "chain-plain": "atc.loop.strategies.chain",
    "react": "atc.loop.strategies.react",
    "react-text": "atc.loop.strategies.react",
    "codeact": "atc.loop.strategies.codeact",
    "dfsdt": "atc.loop.strategies.dfsdt",
}

Factory = Callable[..., Strategy]
_FACTORIES: dict[str, Factory] = {}
_FROM_PLUGINS: set[str] = set()
_SCANNED: list[bool] = []


def register(name: str, make: Factory) -> None:
    """Make a strategy available under ``name`` (a later registration replaces an earlier one)."""
    if not isinstance(name, str) or not name.strip():
        raise UsageError("a strategy needs a non-empty name")
    _FACTORIES[name] = make
    _FROM_PLUGINS.discard(name)


def _scan_entry_points() -> None:
    """Register a loader for every ``atc.loop.strategies`` entry point of the installed packages
    (once per process; a name registered in code keeps its registration)."""
    if _SCANNED:
        return
    _SCANNED.append(True)
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name in _FACTORIES:
            continue
        _FACTORIES[point.name] = _plugin(point)
        _FROM_PLUGINS.add(point.name)


def refresh() -> None:
    """Read the entry points again (a package installed, or put on ``sys.path``, since the first
    lookup); plug-ins that are gone are forgotten, registrations in code are kept."""
    for name in list(_FROM_PLUGINS):
        _FACTORIES.pop(name, None)
    _FROM_PLUGINS.clear()
    _SCANNED.clear()
    _scan_entry_points()


def _plugin(point: Any) -> Factory:
    def make(**options: Any) -> Strategy:
        try:
            loaded = point.load()
        except Exception as exc:
            where = f" (package {point.dist.name})" if getattr(point, "dist", None) is not None else ""
            raise ConfigError(f"strategy {point.name!r}{where} could not be loaded from {point.value}: "
                              f"{type(exc).__name__}: {exc}",
                              hint="check that the package is installed in this environment") from exc
        if not callable(loaded):
            raise ConfigError(f"strategy {point.name!r}: entry point {point.value} is not a factory",
                              hint="point the entry point at a class or function that returns a Strategy")
        return _checked(point.name, loaded(**options))

    return make


def _checked(name: str, strategy: Any) -> Strategy:
    if not isinstance(strategy, Strategy):
        raise ConfigError(f"strategy {name!r} made a {type(strategy).__name__}, which is not a Strategy",
                          hint="a strategy has a name and a run(episode) method returning an Outcome")
    return strategy


def registered() -> list[str]:
    """Every name a strategy can be picked by: built-ins, registrations, installed plug-ins."""
    _scan_entry_points()
    return sorted(_FACTORIES)


def factory(name: str) -> Factory:
    """The factory of ``name``; an unknown name is a ``UsageError`` listing the known ones."""
    make = _FACTORIES.get(name)
    if make is None:
        _scan_entry_points()
        make = _FACTORIES.get(name)
    if make is None:
        raise UsageError(f"unknown strategy {name!r}", hint=f"use one of: {', '.join(registered())}")
    return make


def make(name: str, **options: Any) -> Strategy:
    """A strategy by name (``NAME@k``: rerun up to k times), made with ``options`` (each factory
    ignores the ones it does not use)."""
    base, runs = split_name(name)
    strategy = _checked(base, factory(base)(**options))
    if runs == 1:
        return strategy
    return Repeat(strategy, runs)


def resolve(strategy: str | Strategy | Choice | None, *, max_reflections: int | None = None,
            max_steps: int | None = None, preset: str | None = None, **options: Any) -> Strategy:
    """What ``solve(strategy=...)`` takes: a registered name, ``NAME@k`` (None: ``chain``), a
    ``Choice`` (its own settings: the bounds given here are not applied again) or a ``Strategy``."""
    if isinstance(strategy, Choice):
        return strategy.make()
    if strategy is None or isinstance(strategy, str):
        return choose(strategy or DEFAULT, preset=preset, max_reflections=max_reflections, max_steps=max_steps,
                      options=options).make()
    return _checked(getattr(strategy, "name", type(strategy).__name__), strategy)


# -- settings: presets, NAME@k, the Choice ------------------------------------------------------

#: The settings class of each built-in, and the fields its name sets on top of the class defaults.
SETTINGS: dict[str, tuple[type[StrategySettings], dict[str, Any]]] = {
    "chain": (ChainSettings, {}),
    "chain-plain": (ChainSettings, {}),
    "react": (ReactSettings, {}),
    "react-text": (ReactSettings, {"format": "text"}),
    "codeact": (CodeActSettings, {}),
    "dfsdt": (DfsdtSettings, {}),
}

#: Presets: the profile each built-in takes (``atc.loop.strategies.settings``). ``default`` is every
#: class's defaults: atc's own for chain and react, the published ones for dfsdt and codeact.
PRESETS: dict[str, dict[str, str]] = {
    "default": {},
    "paper": {"chain": "paper", "chain-plain": "paper", "react": "toolbench", "react-text": "toolbench",
              "dfsdt": "toolbench", "codeact": "codeact"},
}

#: The strategies a preset compares when none are named: ``paper`` is Table 1's rows that atc
#: can run (ReAct, ReAct@3, CodeAct, ToolLLM's DFSDT, ToolLLM@3, ATC), the first one the
#: baseline of the win rates, as ToolEval compares with ReAct.
PRESET_STRATEGIES: dict[str, list[str]] = {
    "paper": ["react", "react@3", "codeact", "dfsdt", "dfsdt@3", "chain"],
}

_AT_K = re.compile(r"^(?P<base>.+?)@(?P<k>[^@]*)$")


def split_name(name: str) -> tuple[str, int]:
    """``("dfsdt", 3)`` for ``dfsdt@3``; ``(name, 1)`` without ``@``."""
    text = name.strip()
    m = _AT_K.match(text)
    if m is None:
        return text, 1
    k = m.group("k").strip()
    if not k.isdigit() or int(k) < 1:
        raise UsageError(f"strategy {text!r}: after @ comes the number of runs (react@3), at least 1")
    return m.group("base").strip(), int(k)


@dataclass(frozen=True)
class Choice:
    """A strategy as chosen: ``name`` as given (``dfsdt@3``), its ``base`` registered name, the
    ``runs`` (k of ``@k``), the typed ``settings`` of a built-in (None for a plug-in, which gets
    ``options``), and the ``preset`` they came from."""

    name: str
    base: str
    runs: int = 1
    settings: StrategySettings | None = None
    options: dict[str, Any] = field(default_factory=dict)
    preset: str | None = None
    until: str = "answer"

    def make(self) -> Strategy:
        made = factory(self.base)
        inner = _checked(self.base, made(settings=self.settings) if self.settings is not None else made(**self.options))
        if self.runs == 1:
            return inner
        return Repeat(inner, self.runs, self.until)

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.base, "runs": self.runs, "until": self.until if self.runs > 1 else None,
                "preset": self.preset, "settings": self.settings.to_dict() if self.settings is not None else None,
                "options": {k: v for k, v in self.options.items() if isinstance(v, str | int | float | bool)}}


def choose(name: str, *, preset: str | None = None, changes: dict[str, Any] | None = None,
           max_reflections: int | None = None, max_steps: int | None = None,
           options: dict[str, Any] | None = None, until: str = "answer") -> Choice:
    """Resolve a strategy's settings once (module docstring). The order: the name's defaults, the
    preset's profile, ``changes`` (fields, or ``profile``), then the bounds of the flags
    (``max_steps``: the strategy's own bound, ``max_reflections``: chain's repairs). ``until`` is
    the rule that ends ``NAME@k``'s reruns (``atc.loop.strategies.repeat.UNTIL``). An unknown name,
    preset, profile or field, or a bad value, is a ``UsageError`` now."""
    base, runs = split_name(name)
    factory(base)  # an unknown name is said now, with the known ones
    if until not in UNTIL:
        raise UsageError(f"until {until!r}: use one of {', '.join(UNTIL)}")
    if preset is not None and preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}", hint=f"presets: {', '.join(PRESETS)}")
    if max_reflections is not None and max_reflections < 0:
        raise UsageError("--max-reflections must be 0 or more")
    if max_steps is not None and max_steps < 1:
        raise UsageError("--max-steps must be at least 1")
    spec = SETTINGS.get(base)
    if spec is None:
        given = {k: v for k, v in {"max_reflections": max_reflections, "max_steps": max_steps}.items() if v is not None}
        if changes:
            raise UsageError(f"strategy {base!r} is a plug-in: atc has no settings of its own for it",
                             hint="give a plug-in its options from Python (atc.loop.strategies.make(name, **options))")
        return Choice(name.strip(), base, runs, None, {**(options or {}), **given}, preset, until)
    cls, defaults = spec
    settings = cls(**defaults)
    profile = PRESETS.get(preset or "default", {}).get(base)
    if profile is not None:
        settings = profile_of(cls, profile, settings)
    if changes:
        settings = override(settings, changes)
    if max_steps is not None:
        settings = dataclasses.replace(settings, **{cls.step_field: max_steps})  # type: ignore[type-var]
    elif max_reflections is not None and isinstance(settings, ChainSettings):
        settings = dataclasses.replace(settings, max_attempts=max_reflections + 1)
    settings.check()
    return Choice(name.strip(), base, runs, settings, {}, preset, until)


def _lazy(name: str, module: str) -> Factory:
    def make_builtin(**options: Any) -> Strategy:
        import_module(module)
        real = _FACTORIES.get(name)
        if real is None or real is make_builtin:  # the module did not register the name: our bug
            raise RuntimeError(f"{module} does not register the strategy {name!r}")
        return real(**options)

    return make_builtin


for _name, _module in BUILTIN.items():
    register(_name, _lazy(_name, _module))
