"""A BFCL task's API classes as function tools that hold the task's state.

``TaskTools(task)`` makes one instance of each API class the task involves (BFCL's own classes,
from the installed package), loads the task's initial state into it as BFCL's inference does
(``_load_scenario(config, long_context=...)``; MathAPI is stateless), and offers each function
BFCL documents for the class as a tool: the bound method (``protocols.functions``), described by
BFCL's own function doc, so that the model sees what every model on the leaderboard sees. The
instances live for the whole task: each user turn's run changes them and the next one finds them
so. ``shown(turn)`` is what the model is shown at a turn: a ``miss_func`` task's held-out
functions come back at their turn. Every call that reaches a function (after validation) is recorded, in order, by the
toolset's ``Recorder`` tap: those are the calls BFCL's checker replays. Arguments are checked
against BFCL's docs in ``warn`` mode (recorded, then sent): BFCL itself checks none, and its
own ground truth does not always match its docs.
"""

from __future__ import annotations

import copy
import importlib
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from atc.errors import ConfigError
from atc.evaluation.bfcl.data import INSTALL, BfclTask, function_docs, to_json_schema
from protocols.functions import FunctionCollection, function_tool
from protocols.model import snake_case
from sandbox.api import Toolset

__all__ = ["TaskTools", "Recorder", "load_instances"]


class Recorder:
    """A tap that records ``(tool, arguments)`` of every call that reaches a function (whether it
    answered or raised); ``take()`` hands over what came since the last ``take``."""

    def __init__(self) -> None:
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._lock = threading.Lock()

    def exchange(self, call: Any) -> Any:
        with self._lock:
            self._calls.append((call.tool.name, dict(call.args)))
        return call.send()

    def take(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            taken, self._calls = self._calls, []
        return taken


def load_instances(task: BfclTask) -> dict[str, Any]:
    """The task's API class instances with its initial state (as BFCL loads them)."""
    try:
        # bfcl-eval: optional (atc[bfcl]); only BFCL suites need it
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES
    except ImportError:
        raise ConfigError("BFCL's API classes come from the bfcl-eval package, which is not installed",
                          hint=INSTALL) from None
    out: dict[str, Any] = {}
    for name in task.involved_classes:
        path = CLASS_FILE_PATH_MAPPING.get(name)
        if path is None:
            raise ConfigError(f"{task.id}: BFCL names no API class {name!r}")
        try:
            module = importlib.import_module(path)
        except ImportError as exc:
            raise ConfigError(f"BFCL's {name} needs {exc.name or 'a package'}, which is not installed",
                              hint=INSTALL) from None
        instance = getattr(module, name)()
        if name not in STATELESS_CLASSES:
            instance._load_scenario(copy.deepcopy(task.initial_config.get(name, {})), long_context=task.long_context)
        out[name] = instance
    return out


class TaskTools:
    """The tools of one BFCL task (see the module docstring)."""

    def __init__(self, task: BfclTask, folder: Path | None = None) -> None:
        self.task = task
        self.instances = load_instances(task)
        self.recorder = Recorder()
        self.held = {name for names in task.missed.values() for name in names}
        self._classes: list[FunctionCollection] = []
        for class_name, instance in self.instances.items():
            collection = FunctionCollection(name=snake_case(class_name), source=f"bfcl:{class_name}",
                                            source_format="python", description=f"BFCL's {class_name}")
            for doc in function_docs(class_name, folder):
                method = getattr(instance, str(doc.get("name")), None)
                if method is None:
                    continue
                tool, host = function_tool(method, collection.name, name=str(doc["name"]),
                                           description=str(doc.get("description") or ""),
                                           parameters=_parameters(doc.get("parameters")),
                                           response_schema=to_json_schema(doc.get("response")) or None)
                collection.tools.append(tool)
                collection.functions[tool.name] = host
            self._classes.append(collection)

    def released(self, turn: int) -> set[str]:
        """The held-out functions that are back by ``turn`` (``miss_func``)."""
        return {name for at, names in self.task.missed.items() if at <= turn for name in names}

    def shown(self, turn: int) -> list[tuple[str, str]]:
        """``(collection, tool)`` of the tools the model is shown at user turn ``turn`` (0-based):
        all but the held-out ones not back yet. A held-out function stays callable, as in BFCL,
        whose checker executes any call of any method of the classes (and whose ground truth
        sometimes calls one before its turn: ``miss_func_49`` calls ``tail`` two turns early)."""
        hidden = self.held - self.released(turn)
        return [(c.name, t.name) for c in self._classes for t in c.tools if t.name not in hidden]

    def toolset(self, wrap: Any = None) -> Toolset:
        """The task's tools, every turn (``shown`` says which the model sees); ``wrap`` (a
        recording's ``wrap_toolset``) is applied inside the recorder, so that a replayed answer is
        recorded too."""
        collections = list(self._classes)
        # BFCL checks no call against its docs (its checker replays whatever a model sent, and so
        # does its ground truth: close_ticket(ticket_id='ticket_001') for an integer): the gateway
        # records what does not match and sends it, as BFCL would.
        toolset = Toolset(collections=[c for c in collections if c.tools], validation="warn")
        if wrap is not None:
            toolset = wrap(toolset)
        return replace(toolset, taps=(self.recorder, *toolset.taps))

    @property
    def names(self) -> list[str]:
        return [t.name for c in self._classes for t in c.tools]


def _parameters(schema: Any) -> dict[str, Any]:
    converted = to_json_schema(schema) if isinstance(schema, dict) else {}
    converted = dict(converted) if isinstance(converted, dict) else {}
    converted["type"] = "object"
    converted.setdefault("properties", {})
    converted.setdefault("required", [])
    converted.setdefault("additionalProperties", False)  # BFCL's classes take their documented arguments only
    return converted
