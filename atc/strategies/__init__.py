"""Strategies: how a model solves a task with tools, side by side on one gateway.

- ``chain`` (default): one program that chains the tools, repaired by attributable reflection;
- ``chain-plain``: the same loop told only the raw traceback (the paper's ablation);
- ``react``: one function call per model turn, ``finish`` with the answer;
- ``codeact``: one code snippet per turn in a sandbox session whose variables persist;
- ``dfsdt``: ToolLLM's depth-first search over function-calling turns, with give-up-and-restart.

Modules: ``base`` (the ``Strategy`` interface, the ``Episode`` a strategy is handed, its
``Outcome``, the failure kinds), ``meter`` (model usage and budgets), ``registry`` (names,
entry-point plug-ins), ``functions`` (tools as function schemas, observations), and one module
per strategy family. Pick one with ``atc.solve(..., strategy=NAME)`` / ``--strategy NAME``; add one
with ``register(name, factory)`` or an ``atc.strategies`` entry point (docs/strategies.md).
"""

from __future__ import annotations

from atc.strategies.base import FAILURE_KINDS, Episode, Outcome, Step, Strategy, error_dict
from atc.strategies.meter import Budget, Meter, Usage
from atc.strategies.registry import DEFAULT, ENTRY_POINT_GROUP, make, register, registered, resolve

__all__ = ["Strategy", "Episode", "Outcome", "Step", "FAILURE_KINDS", "error_dict", "Budget", "Meter", "Usage",
           "DEFAULT", "ENTRY_POINT_GROUP", "make", "register", "registered", "resolve"]
