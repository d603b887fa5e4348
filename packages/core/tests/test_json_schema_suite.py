"""fevex's JSON Schema engine against the official JSON-Schema-Test-Suite (draft 2020-12),
side by side with the ``jsonschema`` package's own ``Draft202012Validator``.

The suite's cases are vendored in ``json_schema_test_suite/`` (see its README). jsonschema is
given the suite's remote documents as the suite asks; fevex fetches no reference, so a schema
that refers to another document is refused when compiled, and so is one holding a NUL
character (no store can keep it). Those are the documented refusals; any other refusal, and
any case jsonschema gets right and fevex gets wrong, fails the test.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from fevex.schemas import JsonSchemaError, compile_json_schema

SUITE = Path(__file__).parent / "json_schema_test_suite"
TESTS = SUITE / "tests" / "draft2020-12"
# A schema's problem when fevex refuses it for a documented reason, and that reason.
DOCUMENTED_REFUSALS = {
    "references to other documents are not fetched": "remote reference",
    "NUL character": "NUL",
}


@dataclass(frozen=True)
class Case:
    file: str
    group: str
    description: str
    schema: Any
    data: Any
    valid: bool

    @property
    def name(self) -> str:
        return f"{self.file} | {self.group} | {self.description}"


def cases(path: Path) -> list[Case]:
    return [
        Case(
            path.name,
            group["description"],
            test["description"],
            group["schema"],
            test["data"],
            test["valid"],
        )
        for group in json.loads(path.read_text(encoding="utf-8"))
        for test in group["tests"]
    ]


def required_cases() -> list[Case]:
    found = [case for path in sorted(TESTS.glob("*.json")) for case in cases(path)]
    assert len(found) > 1_000
    return found


def remotes() -> Registry[Any]:
    """The suite's remote documents, under the ``http://localhost:1234/`` it names them by."""
    folder = SUITE / "remotes"
    return Registry().with_resources(
        (
            f"http://localhost:1234/{path.relative_to(folder).as_posix()}",
            DRAFT202012.create_resource(json.loads(path.read_text(encoding="utf-8"))),
        )
        for path in folder.rglob("*.json")
    )


def fevex_outcome(case: Case) -> bool | str:
    """Whether fevex gets the case right, or the documented reason it refused the schema."""
    try:
        compiled = compile_json_schema(case.schema)
    except JsonSchemaError as error:
        for problem, reason in DOCUMENTED_REFUSALS.items():
            if problem in error.problem:
                return reason
        return False
    return compiled.is_valid(case.data) == case.valid


def jsonschema_outcome(case: Case, registry: Registry[Any]) -> bool:
    try:
        return (
            Draft202012Validator(case.schema, registry=registry).is_valid(case.data) == case.valid
        )
    except Exception:  # an implementation that raises gets the case wrong
        return False


def test_fevex_passes_the_required_suite_at_least_as_often_as_jsonschema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    registry = remotes()
    every = required_cases()
    fevex = [fevex_outcome(case) for case in every]
    reference = [jsonschema_outcome(case, registry) for case in every]
    fevex_passed = sum(outcome is True for outcome in fevex)
    jsonschema_passed = sum(reference)
    refused = {
        reason: sum(outcome == reason for outcome in fevex)
        for reason in DOCUMENTED_REFUSALS.values()
    }
    with capsys.disabled():
        print(
            f"\nJSON-Schema-Test-Suite draft 2020-12, {len(every)} required cases: "
            f"fevex passes {fevex_passed}, jsonschema's Draft202012Validator {jsonschema_passed}; "
            f"fevex refuses {refused['remote reference']} for a remote reference, "
            f"{refused['NUL']} for a NUL character"
        )
    worse = [
        case.name
        for case, ours, theirs in zip(every, fevex, reference, strict=True)
        if theirs and ours is False
    ]
    assert worse == []
    assert fevex_passed >= jsonschema_passed - sum(refused.values())
    # The refusals are what the suite holds: 4 cases of NUL, 44 that refer to its remote
    # documents (all under http://localhost:1234/), and no others.
    assert refused == {"remote reference": 44, "NUL": 4}
    remote = [case for case, ours in zip(every, fevex, strict=True) if ours == "remote reference"]
    assert all("http://localhost:1234/" in json.dumps(case.schema) for case in remote)


def suite_cases(file: str, holds: str) -> list[Case]:
    """The cases of ``file`` whose schema holds ``holds`` somewhere in its JSON text."""
    found = [case for case in cases(TESTS / file) if holds in json.dumps(case.schema)]
    assert found
    return found


def wrong(found: list[Case]) -> list[str]:
    return [case.name for case in found if fevex_outcome(case) is not True]


def test_unevaluated_properties_combine_with_pattern_properties() -> None:
    found = suite_cases("unevaluatedProperties.json", "patternProperties")
    assert len(found) >= 27
    assert wrong(found) == []


def test_references_to_the_bundled_metaschemas_resolve() -> None:
    metaschema = "https://json-schema.org/draft/2020-12/schema"
    found = [*suite_cases("ref.json", metaschema), *suite_cases("defs.json", metaschema)]
    found = [case for case in found if f'"$ref": "{metaschema}"' in json.dumps(case.schema)]
    assert len(found) == 4
    assert wrong(found) == []
    vocabulary = compile_json_schema(
        {"$ref": "https://json-schema.org/draft/2020-12/meta/validation#/$defs/simpleTypes"}
    )
    assert vocabulary.is_valid("integer")
    assert not vocabulary.is_valid("strng")


def test_multiple_of_is_exact_where_a_float_quotient_overflows() -> None:
    found = [*cases(TESTS / "optional" / "float-overflow.json"), *cases(TESTS / "multipleOf.json")]
    assert wrong(found) == []
    assert compile_json_schema({"multipleOf": 0.5}).is_valid(1e308)
    assert not compile_json_schema({"multipleOf": 0.123456789}).is_valid(1e308)
    # Exact on the decimals the JSON wrote, so binary rounding is no excuse either way.
    assert compile_json_schema({"multipleOf": 0.1}).is_valid(0.3)
    assert not compile_json_schema({"multipleOf": 0.1}).is_valid(0.1 + 0.2)
    assert compile_json_schema({"multipleOf": 1e-300}).is_valid(10**400)


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^\\cJ$", "\n", True),
        ("^\\cj$", "\n", True),
        ("^[\\cA-\\cC]+$", "\x01\x03", True),
        # An escaped backslash, then ``c``: no control character.
        ("^\\\\cJ$", "\\cJ", True),
        ("^\\\\cJ$", "\n", False),
    ],
)
def test_ecma_control_escapes_are_translated(pattern: str, text: str, matches: bool) -> None:
    assert compile_json_schema({"pattern": pattern}).is_valid(text) is matches


def test_ecma_control_escapes_of_the_suite() -> None:
    found = suite_cases("optional/ecmascript-regex.json", "\\\\c")
    assert len(found) == 4
    assert wrong(found) == []
