"""The quick check of arguments never calls valid what jsonschema (as the gateway runs it) refuses.

Hypothesis draws schemas from the quick set (and a few keywords outside it) and values of every
JSON type, and compares the quick check's "valid" with jsonschema's verdict on the same value.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from protocols.model import Tool
from sandbox.api import Limits
from sandbox.gateway.validation import problems, quick_check
from sandbox.hostbounds import HostBounds

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-5, 5), st.just(float("nan")),
                    st.sampled_from([0.0, 1.0, 2.0]), st.text(max_size=4))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.sampled_from("abcd"), inner, max_size=4)),
                      max_leaves=12)
type_names = st.sampled_from(["string", "integer", "number", "boolean", "object", "array", "null"])


def _schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries({"type": st.one_of(type_names, st.lists(type_names, min_size=1, max_size=3))}),
        st.fixed_dictionaries({"enum": st.lists(scalars, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"const": scalars}),
        st.fixed_dictionaries({"type": st.just("object"), "properties": st.dictionaries(st.sampled_from("abcd"), inner,
                                                                                          max_size=3)},
                              optional={"required": st.lists(st.sampled_from("abcd"), max_size=2, unique=True),
                                        "additionalProperties": st.one_of(st.booleans(), inner)}),
        st.fixed_dictionaries({"type": st.just("array"), "items": inner},
                              optional={"minItems": st.integers(0, 3), "maxItems": st.integers(0, 3)}),
        st.fixed_dictionaries({}, optional={"minimum": st.one_of(st.integers(-3, 3), st.floats(-3, 3)),
                                            "maximum": st.integers(-3, 3), "exclusiveMinimum": st.integers(-3, 3),
                                            "exclusiveMaximum": st.floats(-3, 3), "minLength": st.integers(0, 3),
                                            "maxLength": st.integers(0, 3), "minProperties": st.integers(0, 2)}),
        st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"allOf": st.lists(inner, min_size=1, max_size=2)}),
        st.fixed_dictionaries({"oneOf": st.lists(inner, min_size=1, max_size=2)}),  # outside the set
        st.just({"type": "string", "description": "x", "format": "date", "x-extra": 1}),
    )


schemas = st.recursive(st.fixed_dictionaries({"type": type_names}), _schemas, max_leaves=6)


@settings(max_examples=400, deadline=None)
@given(schemas, values)
def test_the_quick_check_says_valid_only_where_jsonschema_agrees(schema: dict[str, Any], value: Any) -> None:
    check = quick_check(schema)
    if check is not None and check(value):
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
        assert not errors, (schema, value, errors[0].message)


def test_common_parameter_schemas_take_the_quick_path() -> None:
    optional_list = {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None}
    schema = {"type": "object", "properties": {"user_id": {"type": "integer", "minimum": 1}, "fields": optional_list,
                                               "sort": {"type": "string", "enum": ["asc", "desc"]}},
              "required": ["user_id"], "additionalProperties": False}
    check = quick_check(schema)
    assert check is not None
    assert check({"user_id": 3, "fields": None, "sort": "asc"})
    assert check({"user_id": 3, "fields": ["a"]})
    assert not check({"user_id": 0})            # below the minimum
    assert not check({"user_id": 3, "sort": "up"})
    assert not check({"user_id": True})         # a boolean is not an integer
    assert not check({"user_id": 2.0})          # jsonschema's business (it takes 2.0)
    assert quick_check({"oneOf": [{"type": "string"}]}) is None
    assert quick_check({"$ref": "#/$defs/X"}) is None
    assert quick_check({"type": "string", "unknownKeyword": 1}) is None


def test_an_invalid_call_still_gets_jsonschema_s_message_with_its_place() -> None:
    """The quick check only proves validity; problems are still found and said as before."""
    tool = Tool(name="find", collection="c", description="", method="GET", path="/find", parameters={
        "type": "object", "properties": {"limit": {"type": "integer", "maximum": 10},
                                         "tags": {"type": "array", "items": {"type": "string"}}}})
    bounds = HostBounds.of(Limits())
    found, note = problems(tool, {"limit": 50, "tags": ["a", 3]}, first_only=False, bounds=bounds)
    assert note is None
    messages = " | ".join(m for m, _ in found)
    assert "argument 'limit'" in messages and "50 is greater than the maximum of 10" in messages
    assert "argument 'tags[1]'" in messages
    assert problems(tool, {"limit": 5, "tags": ["a"]}, first_only=True, bounds=bounds) == ([], None)
