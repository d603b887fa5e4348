"""Tool outputs become JSON the way pydantic dumps values, before events, stores and models."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import FevexRunError, create_fevex, define_agent, define_tool
from fevex.messages import ToolResultPart
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


class Query(BaseModel):
    q: str


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Price(BaseModel):
    amount: float
    at: datetime


@dataclasses.dataclass
class Point:
    x: int
    when: date


STAMP = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
ID = uuid.UUID("12345678-1234-5678-1234-567812345678")


async def run_with_output(value: Any, *, typed: Any = None) -> tuple[Any, Any]:
    """The output the ``tool.completed`` event stored and the one the model read next."""

    def lookup(query: Query) -> Any:
        return value

    if typed is not None:
        lookup.__annotations__["return"] = typed
    tool = define_tool(name="lookup", description="Look up.")(lookup)
    model = FakeModel(
        {"tool_calls": [{"id": "c1", "name": "lookup", "input": {"q": "x"}}]},
        {"output": "done"},
    )
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="a", instructions="Help.", tools=["lookup"])],
        tools=[tool],
        run_store=InMemoryRunStore(),
    )
    result = await app.run_agent("a", "go")
    (completed,) = [e for e in result.events if e.type == "tool.completed"]
    part = model.calls[1].messages[-1].content[0]
    assert isinstance(part, ToolResultPart)
    return completed.payload["output"], part.output


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (STAMP, "2026-12-01T09:30:00Z"),
        (date(2026, 12, 1), "2026-12-01"),
        (time(9, 30, 5), "09:30:05"),
        (Decimal("12.50"), 12.5),
        (Decimal("42"), 42),
        (ID, "12345678-1234-5678-1234-567812345678"),
        (Colour.RED, "red"),
        (Level.HIGH, 3),
        ({3, 1, 2}, [1, 2, 3]),
        (frozenset({"a"}), ["a"]),
        ((1, "two"), [1, "two"]),
        (Price(amount=9.5, at=STAMP), {"amount": 9.5, "at": "2026-12-01T09:30:00Z"}),
        (Point(1, date(2026, 1, 2)), {"x": 1, "when": "2026-01-02"}),
        (
            {"price": Decimal("0.25"), "items": [Decimal("1")], "at": STAMP, "tags": {"x"}},
            {"price": 0.25, "items": [1], "at": "2026-12-01T09:30:00Z", "tags": ["x"]},
        ),
    ],
    ids=[
        "datetime",
        "date",
        "time",
        "decimal-fraction",
        "decimal-integral",
        "uuid",
        "enum",
        "int-enum",
        "set",
        "frozenset",
        "tuple",
        "pydantic-model",
        "dataclass",
        "nested",
    ],
)
async def test_untyped_outputs_become_json(value: Any, expected: Any) -> None:
    stored, seen_by_model = await run_with_output(value)
    if isinstance(expected, list) and isinstance(value, set):
        stored = sorted(stored)
        seen_by_model = sorted(seen_by_model)
    assert stored == expected
    assert seen_by_model == expected
    assert type(stored) is type(expected)


async def test_a_declared_output_type_is_dumped_by_pydantic() -> None:
    stored, _ = await run_with_output({"at": STAMP, "id": ID}, typed=dict[str, Any])
    assert stored == {"at": "2026-12-01T09:30:00Z", "id": str(ID)}


@pytest.mark.parametrize(
    "value",
    [Decimal("NaN"), Decimal("Infinity"), object(), {"k": b"\xff"}],
    ids=["decimal-nan", "decimal-infinity", "object", "invalid-utf8-bytes"],
)
async def test_values_with_no_json_form_are_refused(value: Any) -> None:
    with pytest.raises(FevexRunError) as caught:
        await run_with_output(value)
    assert caught.value.code == "TOOL_OUTPUT_INVALID"
