"""Strategies: how a model solves a task with tools, side by side on one gateway.

- ``chain`` (default): one program that chains the tools, repaired by attributable reflection;
- ``chain-plain``: the same loop told only the raw traceback (the paper's ablation);
- ``react``: one function call per model turn, ``finish`` with the answer;
- ``codeact``: one code snippet per turn in a sandbox session whose variables persist;
- ``react-text``: ``react`` in plain text (Thought / Action / Action Input / Observation), for
  model servers without function calling;
- ``dfsdt``: ToolLLM's depth-first search over function-calling turns, with give-up-and-restart;
- ``NAME@k`` (``react@3``, ``dfsdt@3``): the method rerun up to k times until a run answers.

Modules: ``base`` (the ``Strategy`` interface, the ``Episode`` a strategy is handed, its
``Outcome``, the failure kinds), ``meter`` (model usage and budgets), ``registry`` (names,
entry-point plug-ins, presets and ``choose``), ``settings`` (each built-in's settings, atc's and
the published ones by name), ``repeat`` (``NAME@k``), ``requests`` (every call the model asked
for), ``functions`` (tools as function schemas, observations), ``textformat`` (the plain-text
ReAct protocol), and one module per strategy family. Pick one with ``atc.solve(..., strategy=NAME)`` / ``--strategy NAME``; add one
with ``register(name, factory)`` or an ``atc.loop.strategies`` entry point (docs/strategies.md).
"""

from __future__ import annotations

from atc.loop.strategies.base import FAILURE_KINDS, Episode, Outcome, Step, Strategy, error_dict
from atc.loop.strategies.meter import Budget, Meter, Usage
from atc.loop.strategies.registry import (
    DEFAULT,
    ENTRY_POINT_GROUP,
    PRESETS,
    Choice,
    choose,
    make,
    register,
    registered,
    resolve,
)
from atc.loop.strategies.settings import ChainSettings, CodeActSettings, DfsdtSettings, ReactSettings

__all__ = ["Strategy", "Episode", "Outcome", "Step", "FAILURE_KINDS", "error_dict", "Budget", "Meter", "Usage",
           "DEFAULT", "ENTRY_POINT_GROUP", "PRESETS", "make", "register", "registered", "resolve", "choose", "Choice",
           "ChainSettings", "ReactSettings", "CodeActSettings", "DfsdtSettings"]
