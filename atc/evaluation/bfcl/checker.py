"""Scoring a BFCL task with BFCL's own checker.

BFCL scores a multi-turn task by replaying the model's calls: every call string of every turn is
executed, by its checker (``multi_turn_checker``), on fresh instances of the API classes loaded
with the task's initial state, next to the ground truth's calls; after each turn the instances'
states must be equal and the ground truth's results must be among the model's. So the calls a
run made are handed over in BFCL's own form: ``call_string`` writes ``name(key=value, ...)``
with each value as a Python literal (the arguments are JSON data that passed the tool's schema:
``repr`` of them is a literal, never code), one step per turn holding that turn's calls in order.

The checker keeps its instances in its module's globals under names built from the model name;
``check`` gives every check a name of its own and removes its instances afterwards, so that
checks run concurrently (a batch) and again (a resumed run) without seeing each other.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from atc.evaluation.bfcl.data import BfclTask

__all__ = ["call_string", "check"]

#: Characters of the checker's details kept in a result line.
_MAX_DETAILS = 4000


def call_string(name: str, args: dict[str, Any]) -> str:
    """``name(key=value, ...)`` as BFCL writes a call (values as Python literals)."""
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in args.items())})"


def _details(result: dict[str, Any]) -> str | None:
    details = result.get("details")
    if details is None:
        return None
    text = json.dumps(details, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_DETAILS else text[:_MAX_DETAILS] + "..."


def check(task: BfclTask, turns: list[list[str]]) -> dict[str, Any]:
    """BFCL's verdict on ``turns`` (each turn's call strings, in order): ``{"valid": bool}``, and
    when not valid its ``error_type``, ``error_message`` and a bounded account of the details."""
    # bfcl-eval: optional (atc[bfcl]); only BFCL suites need it
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    token = f"atc_{uuid.uuid4().hex}"
    decoded = [[calls] if calls else [] for calls in turns]
    try:
        result = multi_turn_checker(decoded, task.ground_truth, task.entry(), task.category, token)
    except Exception as exc:  # the checker's own failure is the task's verdict, said as such
        result = {"valid": False, "error_type": "checker_error", "error_message": f"{type(exc).__name__}: {exc}"}
    finally:
        held = vars(multi_turn_utils)
        for name in [k for k in held if token in k]:
            del held[name]
    if result.get("valid"):
        return {"valid": True}
    return {"valid": False, "error_type": str(result.get("error_type") or ""),
            "error_message": str(result.get("error_message") or ""), "details": _details(result)}
