"""Strategies by name: the built-ins and those of installed packages, registered the same way.

A name maps to a factory: ``factory(**options) -> Strategy``. Options are keywords
(``max_reflections``, ``max_steps``, and whatever a strategy of its own takes); a factory ignores
the ones it does not use, so that one set of options can be handed to any strategy.

The built-ins register stand-ins that import their module on first use (``atc solve`` with the
default ``chain`` never imports the tree search). A package adds a strategy by declaring an entry
point in the group ``atc.strategies`` -- ``name = package.module:Factory`` -- in its
``pyproject.toml``::

    [project.entry-points."atc.strategies"]
    mine = "my_package.strategy:MyStrategy"

Entry points are read on the first lookup of a name that is not registered, or by
``registered()``; a registration in code (``register``) wins over an entry point of the same name.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from atc.errors import ConfigError, UsageError
from atc.strategies.base import Strategy

__all__ = ["register", "registered", "factory", "make", "resolve", "refresh", "DEFAULT", "BUILTIN",
           "ENTRY_POINT_GROUP"]

DEFAULT = "chain"
ENTRY_POINT_GROUP = "atc.strategies"
#: Built-in strategies: name -> the module that registers it.
BUILTIN = {
    "chain": "atc.strategies.chain",
    "chain-plain": "atc.strategies.chain",
    "react": "atc.strategies.react",
    "codeact": "atc.strategies.codeact",
    "dfsdt": "atc.strategies.dfsdt",
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
    """Register a loader for every ``atc.strategies`` entry point of the installed packages
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
    """A strategy by name, made with ``options`` (each factory ignores the ones it does not use)."""
    return _checked(name, factory(name)(**options))


def resolve(strategy: str | Strategy | None, **options: Any) -> Strategy:
    """What ``solve(strategy=...)`` takes: a registered name (None: ``chain``) or a ``Strategy``."""
    if strategy is None:
        return make(DEFAULT, **options)
    if isinstance(strategy, str):
        return make(strategy.strip(), **options)
    return _checked(getattr(strategy, "name", type(strategy).__name__), strategy)


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
