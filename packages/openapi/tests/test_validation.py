"""The core's JSON Schema engine, as this plugin uses it on tool input and responses,
enforces every accepted constraint keyword, and never echoes a value."""

from __future__ import annotations

from typing import Any

import pytest
from openapi_agent_runs import finishes_within

from fevex.schemas import compile_json_schema


def schema_problems(root: Any, value: Any, name: str = "value") -> list[str]:
    return compile_json_schema(root).problems(value, name)


ROOT_DEFS = {
    "Pet": {
        "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
        "discriminator": {"propertyName": "kind"},
    },
    "Cat": {
        "type": "object",
        "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer", "maximum": 9}},
        "required": ["kind"],
    },
    "Dog": {
        "type": "object",
        "properties": {"kind": {"const": "dog"}, "good": {"type": "boolean"}},
        "required": ["kind"],
    },
    "Tree": {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}}},
        "additionalProperties": False,
    },
}


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "integer"}, [1, 1.0, -3], [1.5, True, "1", None]),
        ({"type": ["string", "null"]}, ["a", None], [0, False]),
        ({"enum": [1, "a"]}, [1, 1.0, "a"], [True, "b"]),
        ({"const": False}, [False], [0, None]),
        ({"minimum": 1, "maximum": 3}, [1, 3, "x"], [0, 3.5]),
        ({"exclusiveMinimum": 0, "exclusiveMaximum": 1}, [0.5], [0, 1]),
        ({"multipleOf": 0.1}, [0.3, 1, 2.2], [0.35]),
        ({"multipleOf": 3}, [9, 0], [10]),
        ({"minLength": 2, "maxLength": 3}, ["ab", "€€€"], ["a", "abcd"]),
        ({"pattern": "^[a-z]+$"}, ["abc"], ["ab1", ""]),
        (
            {"items": {"type": "string"}, "minItems": 1, "maxItems": 2},
            [["a"]],
            [[], [1], ["a"] * 3],
        ),
        (
            # Equality as JSON means it: true is not 1, 1 is 1.0, key order is irrelevant.
            {"uniqueItems": True},
            [
                [1, 2],
                [1, True],
                [0, False, None, "", [], {}],
                ["1", 1],
                [[1], [True]],
                [2**53 + 1, 2.0**53],
                [{"a": [1, {"b": True}]}, {"a": [1, {"b": 1}]}],
                [{"a": 1}, {"a": 1, "b": 1}],
            ],
            [
                [1, 1.0],
                [0, -0.0],
                [2**53, 2.0**53],
                [{"a": 1}, {"a": 1}],
                [{"a": 1, "b": 2}, {"b": 2, "a": 1}],
                [[], []],
                [{"a": [1, {"b": True}]}, {"a": [1.0, {"b": True}]}],
            ],
        ),
        ({"enum": [[1, {"a": True}]]}, [[1.0, {"a": True}]], [[1, {"a": 1}], [True, {"a": True}]]),
        ({"const": {"a": [1], "b": None}}, [{"b": None, "a": [1.0]}], [{"a": [True], "b": None}]),
        (
            {
                "properties": {"a": {"type": "string"}},
                "required": ["a"],
                "additionalProperties": False,
            },
            [{"a": "x"}],
            [{}, {"a": 1}, {"a": "x", "b": 1}],
        ),
        ({"additionalProperties": {"type": "integer"}}, [{"a": 1}], [{"a": "1"}]),
        ({"minProperties": 1, "maxProperties": 1}, [{"a": 1}], [{}, {"a": 1, "b": 2}]),
        ({"allOf": [{"minimum": 0}, {"maximum": 1}]}, [0.5], [2]),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ["a", None], [1]),
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, [1.5], [1]),
        ({"not": {"type": "null"}}, [0], [None]),
        (
            {"$ref": "#/$defs/Pet"},
            [{"kind": "cat", "lives": 9}],
            [{"kind": "cow"}, {"kind": "cat", "lives": 10}],
        ),
        (
            {"$ref": "#/$defs/Tree"},
            [{"children": [{"children": []}]}],
            [{"children": [{"leaf": 1}]}],
        ),
        (True, [None, 1, {}], []),
        (False, [], [None, 1]),
    ],
)
def test_keywords(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    root = {"allOf": [schema], "$defs": ROOT_DEFS}
    for value in valid:
        assert schema_problems(root, value) == [], value
    for value in invalid:
        assert schema_problems(root, value), value


def test_problems_name_the_place_never_the_value() -> None:
    root = {
        "type": "object",
        "properties": {"body": {"properties": {"card": {"pattern": "^[0-9]{4}$"}}}},
    }
    problems = schema_problems(root, {"body": {"card": "4111-secret"}}, "input")
    assert problems == ["input.body.card: does not match the pattern"]


def test_a_reference_loop_is_cut_short() -> None:
    root = {
        "$ref": "#/$defs/A",
        "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}]}},
    }
    assert schema_problems(root, 1) == [
        "value: too deep or too complex to check against its schema"
    ]


def test_names_of_undeclared_properties_are_not_quoted() -> None:
    # A name that came with the value may be anything, a credential included.
    root = {
        "type": "object",
        "properties": {"body": {"properties": {"id": {}}, "additionalProperties": False}},
        "additionalProperties": {"type": "integer"},
    }
    value = {"sk_live_secret_1": "x", "body": {"id": 1, "sk_live_secret_2": 2}}
    assert schema_problems(root, value, "input") == [
        "input.<property 0>: expected integer",
        "input.body.<property 1>: not allowed",
    ]


def test_unique_items_of_any_depth_are_refused_not_crashed_on() -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert schema_problems({"uniqueItems": True}, [deep, deep]) == [
        "value: nested deeper than 64 levels"
    ]


def test_unique_items_are_checked_in_linear_time() -> None:
    # The repeat is last: a pairwise check compares nearly every pair before finding it.
    values = [*range(200_000), 199_999.0]
    problems = finishes_within(30, lambda: schema_problems({"uniqueItems": True}, values))
    assert problems == ["value: items are not unique"]


def test_a_backtracking_pattern_is_checked_in_linear_time() -> None:
    # Python's re would take 2**40 steps here.
    text = "a" * 40 + "!"
    problems = finishes_within(30, lambda: schema_problems({"pattern": "^(a+)+$"}, text))
    assert problems == ["value: does not match the pattern"]
    assert schema_problems({"pattern": "b"}, "abc") == []  # searched, not anchored
