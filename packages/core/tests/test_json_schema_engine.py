"""The core's one JSON Schema 2020-12 engine: every keyword, ``$ref`` and combinators,
bounded against hostile documents and values from remote servers.

A hang detector (a subprocess or a thread with a generous limit) guards the checks that a
backtracking or quadratic implementation would never finish; its limit is sanity, not a
benchmark: the outcomes asserted are the point.
"""

from __future__ import annotations

import http.server
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, TypeVar

import pytest

from fevex.schemas import JsonSchema, JsonSchemaError, compile_json_schema

T = TypeVar("T")

HANG_GUARD_S = 60.0
# Python's re takes about 2**40 steps to find that this does not match ^(a+)+$.
BACKTRACKING = "a" * 40 + "!"


def problems(schema: Any, value: Any, name: str = "value") -> list[str]:
    return compile_json_schema(schema).problems(value, name)


def finishes_within(seconds: float, work: Callable[[], T]) -> T:
    """``work()``, run in a thread; a failure (not a hang of the test run) if it takes
    longer than ``seconds``."""
    outcome: list[T] = []
    thread = threading.Thread(target=lambda: outcome.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    (result,) = outcome
    return result


DEFS = {
    "Pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]},
    "Cat": {
        "type": "object",
        "properties": {"kind": {"const": "cat"}, "lives": {"type": "integer", "maximum": 9}},
        "required": ["kind"],
    },
    "Dog": {"type": "object", "properties": {"kind": {"const": "dog"}}, "required": ["kind"]},
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
        ({"enum": [1, "a", [1, {"a": True}]]}, [1.0, "a", [1.0, {"a": True}]], [True, [1, {}]]),
        ({"const": {"a": [1], "b": None}}, [{"b": None, "a": [1.0]}], [{"a": [True], "b": None}]),
        ({"exclusiveMinimum": 0, "exclusiveMaximum": 1}, [0.5], [0, 1]),
        ({"multipleOf": 0.1}, [0.3, 1, 2.2], [0.35]),
        ({"pattern": "^[a-z]+$"}, ["abc", 1], ["ab1", ""]),
        ({"pattern": "b"}, ["abc"], ["xyz"]),  # searched, not anchored
        ({"pattern": "^\\p{L}+$"}, ["Ünïcode"], ["a1"]),  # not Python's re syntax
        ({"uniqueItems": True}, [[1, True], [[1], [True]], [{"a": 1}, {"a": 2}]], [[1, 1.0]]),
        ({"uniqueItems": True}, [[2**53 + 1, 2.0**53]], [[{"a": 1, "b": 2}, {"b": 2, "a": 1}]]),
        ({"prefixItems": [{"type": "string"}], "items": False}, [["a"]], [[1], ["a", "b"]]),
        ({"contains": {"type": "null"}, "maxContains": 1}, [[1, None]], [[1], [None, None]]),
        (
            {"patternProperties": {"^x-": {"type": "integer"}}},
            [{"x-a": 1, "b": "s"}],
            [{"x-a": "s"}],
        ),
        (
            {
                "properties": {"a": {}},
                "patternProperties": {"^x-": {}},
                "additionalProperties": False,
            },
            [{"a": 1, "x-b": 2}],
            [{"c": 1}],
        ),
        ({"propertyNames": {"maxLength": 2}}, [{"ab": 1}], [{"abc": 1}]),
        ({"dependentRequired": {"card": ["cvv"]}}, [{}, {"card": 1, "cvv": 2}], [{"card": 1}]),
        ({"if": {"minimum": 10}, "then": {"multipleOf": 5}}, [3, 15], [12]),
        (
            {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False},
            [{"a": 1}],
            [{"a": 1, "b": 2}],
        ),
        ({"allOf": [{"minimum": 0}, {"maximum": 1}]}, [0.5], [2]),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ["a", None], [1]),
        ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, [1.5], [1, "x"]),
        ({"not": {"type": "null"}}, [0], [None]),
        ({"$ref": "#/$defs/Pet"}, [{"kind": "cat", "lives": 9}], [{"kind": "cow"}]),
        ({"$ref": "#/$defs/Tree"}, [{"children": [{"children": []}]}], [{"children": [1]}]),
        (True, [None, 1, {}], []),
        (False, [], [None, 1]),
    ],
)
def test_every_keyword_is_enforced(schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    root = {"allOf": [schema], "$defs": DEFS}
    compiled = compile_json_schema(root)
    for value in valid:
        assert compiled.problems(value) == [], value
    for value in invalid:
        assert compiled.problems(value), value


def test_problems_name_the_json_path_never_the_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "body": {"properties": {"card": {"pattern": "^[0-9]{4}$"}}, "required": ["cvv"]},
            "rows": {"items": {"enum": ["ok"]}},
        },
    }
    value = {"body": {"card": "4111-secret"}, "rows": ["ok", "secret-row"]}
    assert problems(schema, value, "input") == [
        "input.body.card: does not match the pattern",
        "input.body.cvv: required",
        "input.rows[1]: not one of the allowed values",
    ]


def test_names_the_schema_does_not_declare_are_named_by_position() -> None:
    # A name that came with the value may be anything, a credential included.
    schema = {
        "type": "object",
        "properties": {"body": {"properties": {"id": {}}, "additionalProperties": False}},
        "additionalProperties": {"type": "integer"},
    }
    value = {"sk_live_secret_1": "x", "body": {"id": 1, "sk_live_secret_2": 2}}
    found = problems(schema, value, "input")
    assert found == ["input.<property 0>: expected integer", "input.body.<property 1>: not allowed"]
    assert "sk_live" not in "".join(found)


def test_json_schema_refuses_a_document_it_cannot_honour_when_made() -> None:
    refused = {
        "#/pattern": {"pattern": "(a)\\1"},
        "#/patternProperties/(?=x)": {"patternProperties": {"(?=x)": {}}},
        "#/$defs/Q/pattern": {"$defs": {"Q": {"pattern": "(?<=a)b"}}},
        # A schema reached only through a reference is checked as well.
        "#/$ref/pattern": {"$ref": "#/elsewhere", "elsewhere": {"pattern": "(?<=a)b"}},
        "#/$ref": {"$ref": "#/$defs/Missing"},
        "#/properties": {"properties": ["not", "schemas"]},
        "#/type": {"type": "strng"},
    }
    for location, document in refused.items():
        with pytest.raises(JsonSchemaError) as caught:
            JsonSchema(document)
        assert caught.value.location == location
        assert isinstance(caught.value, ValueError)


class _RecordingHandler(http.server.BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    hits: ClassVar[list[str]] = []
    handler = type("Handler", (_RecordingHandler,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/schema.json", hits
    finally:
        server.shutdown()
        server.server_close()


def test_a_reference_to_another_document_is_refused_and_never_fetched(
    schema_server: tuple[str, list[str]],
) -> None:
    url, hits = schema_server
    with pytest.raises(JsonSchemaError, match="not fetched") as caught:
        compile_json_schema({"properties": {"q": {"$ref": url}}})
    assert caught.value.location == "#/properties/q/$ref"
    assert hits == []


def test_a_backtracking_pattern_is_matched_in_linear_time() -> None:
    # Both a value and a property name; jsonschema itself would run Python's re on both.
    found = finishes_within(
        HANG_GUARD_S,
        lambda: (
            problems({"pattern": "^(a+)+$"}, BACKTRACKING),
            problems({"patternProperties": {"^(a+)+$": False}}, {BACKTRACKING: 1}),
            problems(
                {"patternProperties": {"^(a+)+$": {}}, "additionalProperties": False},
                {BACKTRACKING: 1},
            ),
        ),
    )
    assert found == (
        ["value: does not match the pattern"],
        [],
        ["value.<property 0>: not allowed"],
    )
    assert problems({"pattern": "^(a+)+$"}, "aaaa") == []
    # unevaluatedProperties finds which properties patternProperties evaluated with the
    # same engine (jsonschema's own rule for it runs Python's re).
    unevaluated = {"patternProperties": {"^(a+)+$": {}}, "unevaluatedProperties": False}
    assert finishes_within(HANG_GUARD_S, lambda: problems(unevaluated, {BACKTRACKING: 1})) == [
        "value: has properties its schema does not allow (unevaluatedProperties)"
    ]
    assert problems(unevaluated, {"aaaa": 1}) == []


def test_unique_items_are_checked_in_linear_time() -> None:
    # Items alike but for their last element, and unsortable (objects): a pairwise check
    # walks a whole item for each of its 18 million comparisons.
    rows = [{"cells": [0] * 10 + [index]} for index in range(6_000)]
    assert finishes_within(HANG_GUARD_S, lambda: problems({"uniqueItems": True}, rows)) == []
    repeated = [*rows, {"cells": [0] * 10 + [5_999.0]}]
    assert finishes_within(HANG_GUARD_S, lambda: problems({"uniqueItems": True}, repeated)) == [
        "value: items are not unique"
    ]


def test_a_reference_loop_and_deep_values_are_problems_not_crashes() -> None:
    loop = {
        "$ref": "#/$defs/A",
        "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}]}},
    }
    assert finishes_within(HANG_GUARD_S, lambda: problems(loop, 1)) == [
        "value: too deep or too complex to check against its schema"
    ]
    deep: list[Any] = []
    for _ in range(5_000):
        deep = [deep]
    assert problems({"uniqueItems": True}, [deep, deep]) == ["value: nested deeper than 64 levels"]
    assert problems({"items": {"type": "number"}}, [1, float("inf")]) == [
        "value[1]: not a finite number"
    ]


def _run_in_subprocess(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


def test_a_remote_backtracking_pattern_cannot_stall_a_run() -> None:
    # A whole run in a subprocess: were the pattern run by Python's re, the subprocess
    # would hang and the timeout would fail the test.
    outcome = _run_in_subprocess(
        """
        import asyncio
        from fevex import FevexRunError, create_fevex, define_agent
        from fevex.testing import FakeModel
        from fevex.tools import RemoteTool, define_connection

        class Provider:
            async def list_tools(self, context):
                schema = {"type": "object", "properties": {"q": {"pattern": "^(a+)+$"}}}
                return [RemoteTool("search", "Search.", schema)]

            async def call_tool(self, name, input, context):
                raise AssertionError("not called")

        hostile = {"q": "a" * 5_000 + "!"}
        model = FakeModel({"tool_calls": [{"id": "c1", "name": "docs__search", "input": hostile}]})
        app = create_fevex(
            models={"default": model},
            agents=[define_agent(name="worker", instructions="Work.", tools=["docs__search"])],
            connections=[define_connection(name="docs", provider=Provider())],
        )
        try:
            asyncio.run(app.run_agent("worker", "go"))
        except FevexRunError as error:
            print(error.code, error.message)
        """
    )
    assert outcome.returncode == 0, outcome.stderr
    assert outcome.stdout.startswith("TOOL_INPUT_INVALID ")
    assert "value.q: does not match the pattern" in outcome.stdout
    assert "aaaa" not in outcome.stdout


def test_import_fevex_does_not_import_jsonschema() -> None:
    outcome = _run_in_subprocess(
        """
        import sys
        import fevex
        import fevex.schemas
        assert "jsonschema" not in sys.modules and "referencing" not in sys.modules
        fevex.schemas.JsonSchema({"type": "string"})
        assert "jsonschema" in sys.modules
        """
    )
    assert outcome.returncode == 0, outcome.stderr


def _names(found: Sequence[str]) -> list[str]:
    return [problem.split(":", 1)[0] for problem in found]


def test_combinations_report_the_place_of_the_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pet": {"$ref": "#/$defs/Pet"},
            "tags": {
                "items": {
                    "anyOf": [
                        {"type": "string"},
                        {"type": "null"},
                    ]
                }
            },
        },
        "$defs": DEFS,
    }
    found = problems(schema, {"pet": {"kind": "cow"}, "tags": ["a", 1]}, "input")
    assert _names(found) == ["input.pet", "input.tags[1]"]
    assert found[1].endswith("matches none of the allowed shapes (anyOf)")
