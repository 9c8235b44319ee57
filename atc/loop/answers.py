"""Typed answers: the value a program hands to ``final_answer(value)``, checked against a schema.

A pipeline wants a value, not printed text: a row, a record, a list of ids, that the next step
can use. ``atc.solve(..., answer=SCHEMA)`` (and ``atc.run``, ``solve_many``, ``--answer-schema
FILE``) asks for one. ``AnswerSpec.of(SCHEMA)`` reads what the caller gave:

- a pydantic model class: its JSON Schema, and the value comes back as an instance of it;
- a dataclass, a ``TypedDict``, or any annotation (``list[int]``, ``dict[str, float]``,
  ``list[Row]``): the schema of ``protocols.pyschema``, the value converted to that type;
- a JSON Schema (a dict, checked as one), or a path to a JSON file holding one: the value
  comes back as the JSON data it is.

In the sandbox the program calls ``final_answer(value)`` (``sandbox/inside/runner.py``: JSON data only,
bounded like every frame); on the host ``check`` validates it against the schema (the first
problem, by ``jsonschema``'s best match, with where it is: ``$.rows[2].price``) and builds the
typed value. A mismatch, or a program that never called ``final_answer``, is an ``AnswerError``
(``error_of``): a failed attempt like any other, which ``chain``'s repair loop fixes, shown the
error and the schema again. ``instructions`` is what the model is told about it beforehand.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atc.errors import UsageError
from protocols.pyschema import converter_of, is_pydantic_model, schema_of
from protocols.render import response_shape
from sandbox.api import ErrorInfo, ExecutionResult
from sandbox.gateway.functions.results import jsonable

__all__ = ["AnswerSpec", "ANSWER_ERROR", "error_of", "judge_result", "json_value"]

#: ``error.type`` of a value that is missing or does not match the schema.
ANSWER_ERROR = "AnswerError"
#: Characters of the schema repeated in an error message for the model.
_SCHEMA_IN_ERROR = 1500


def _where(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if str(part).isidentifier() else f"[{part!r}]")
    return out


@dataclass(frozen=True)
class AnswerSpec:
    """What a typed answer must be (see the module docstring). ``target`` is the Python type the
    value is built as (None: the JSON value itself); ``label`` names it in messages."""

    schema: dict[str, Any]
    target: Any = field(default=None, compare=False)
    label: str = "the answer schema"

    @classmethod
    def of(cls, answer: Any) -> AnswerSpec:
        """The spec of what a caller gave as ``answer=`` (a ``UsageError`` for what is none)."""
        if isinstance(answer, AnswerSpec):
            return answer
        if isinstance(answer, str | Path):
            return cls.from_file(Path(answer))
        if isinstance(answer, dict):
            _check_schema(answer, "answer=")
            return cls(schema=answer)
        schema = schema_of(answer)
        if not schema:
            raise UsageError(f"answer={answer!r} says nothing about the value",
                             hint="give a pydantic model, a dataclass, a type such as list[int], or a JSON Schema")
        return cls(schema=schema, target=answer, label=getattr(answer, "__name__", None) or str(answer))

    @classmethod
    def from_file(cls, path: Path) -> AnswerSpec:
        """A JSON Schema read from ``path`` (``--answer-schema FILE``)."""
        try:
            schema = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"--answer-schema {path}: {exc.strerror or exc}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"--answer-schema {path}: not JSON ({exc})") from None
        if not isinstance(schema, dict):
            raise UsageError(f"--answer-schema {path}: a JSON Schema is an object, not {type(schema).__name__}")
        _check_schema(schema, f"--answer-schema {path}")
        return cls(schema=schema, label=f"the schema of {Path(path).name}")

    def check(self, value: Any) -> tuple[Any, str | None]:
        """``(typed value, None)``, or ``(None, what is wrong)`` for a value that does not match."""
        # jsonschema: about 100 ms to import; only a schema check needs it
        from jsonschema import validators
        from jsonschema.exceptions import best_match

        validator = validators.validator_for(self.schema)(self.schema)
        error = best_match(validator.iter_errors(value))
        if error is not None:
            return None, f"at {_where(error.absolute_path)}: {error.message[:500]}"
        if self.target is None:
            return value, None
        try:
            if is_pydantic_model(self.target):
                return self.target.model_validate(value), None
            convert = converter_of(self.target)
            return (convert(value) if convert is not None else value), None
        except Exception as exc:  # a model's own validators, a conversion the schema let through
            return None, " ".join(str(exc).split())[:500]

    def shape(self) -> str:
        return response_shape(self.schema)

    def instructions(self) -> str:
        """The schema as the prompts show it (``atc/prompts/answer*.md``)."""
        return json.dumps(self.schema, ensure_ascii=False, indent=1)[:6000]


def _check_schema(schema: dict[str, Any], where: str) -> None:
    # jsonschema: about 100 ms to import; only a schema check needs it
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        raise UsageError(f"{where}: not a valid JSON Schema: {exc.message}") from None


def error_of(spec: AnswerSpec, result: ExecutionResult) -> tuple[Any, dict[str, Any] | None]:
    """The typed value of a run that succeeded, or the ``AnswerError`` (``ErrorInfo`` dict) of one
    whose value is missing or does not match."""
    if not result.answered:
        message = "the program did not hand its result to final_answer(value)"
        return None, _error(message, None, result)
    value, problem = spec.check(result.value)
    if problem is None:
        return value, None
    schema = json.dumps(spec.schema, ensure_ascii=False)
    shown = schema if len(schema) <= _SCHEMA_IN_ERROR else schema[:_SCHEMA_IN_ERROR] + "..."
    message = f"the value given to final_answer does not match {spec.label}: {problem}. The schema: {shown}"
    return None, _error(message, result.value_line, result)


def _error(message: str, line: int | None, result: ExecutionResult) -> dict[str, Any]:
    return {"type": ANSWER_ERROR, "message": message, "line": line, "tool": None, "traceback": "", "col": None,
            "code": None, "attribution": None}


def judge_result(result: ExecutionResult, spec: AnswerSpec | None) -> tuple[ExecutionResult, Any]:
    """``result`` with an ``AnswerError`` when it ran but its value fails ``spec``, and the typed
    value (None without a spec, or when it failed)."""
    if spec is None or not result.ok:
        return result, None
    value, error = error_of(spec, result)
    if error is None:
        return result, value
    result.ok = False
    result.error = ErrorInfo(type=ANSWER_ERROR, message=error["message"], line=error["line"])
    return result, None


def json_value(value: Any) -> Any:
    """A typed value as JSON data (``Solution.to_dict``'s ``"value"``)."""
    return jsonable(value, 1 << 24)
