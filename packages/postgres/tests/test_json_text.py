"""The store's JSON encoder: orjson writes what reads back equal, the standard encoder
everything else, so that what is stored and what is refused are the standard encoder's
(and the SQLite store's) to the value."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import decimal
import enum
import json
import math
import re
import uuid
from typing import Any

import pytest

from fevex.errors import FevexRunError
from fevex_postgres import connections
from fevex_postgres.connections import json_text


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Text(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


PLAIN: list[Any] = [
    {"events": [{"id": "evt_1", "sequence": 1, "data": {"ok": True, "note": None}}]},
    [1, -2, 3.25, -0.0, 1e300, 5e-324, 2**63 - 1, "é ✓ \u2028 \x7f", "", [], {}],
    {"nested": [[[{"a": [None, False]}]]]},
    "NUL \x00 inside",
    None,
]
# What orjson writes differently or not at all: the standard encoder decides.
ELSEWHERE: list[Any] = [
    float("nan"),
    {"deep": [1.0, float("inf")]},
    [-math.inf],
    Colour.RED,
    uuid.UUID(int=7),
    (1, 2),
    {"tuple": ("a", "b")},
    2**64,
    {1: "one", 2.5: "two and a half", False: "no", None: "nothing"},
    "lone \ud800 surrogate",
    Text("text subclass"),
    {Text("key"): 1},
    Point(1),
    datetime.datetime(2026, 12, 6, tzinfo=datetime.UTC),
    decimal.Decimal("1.5"),
    {"when": object()},
    b"bytes",
    {1, 2},
]

# An int enum reads back equal to its value, which both encoders write.
EITHER: list[Any] = [{"level": Level.HIGH}, [Level.HIGH]]


def standard(value: Any) -> str | None:
    """The standard encoder's text for ``value``, or None when it refuses it."""
    try:
        return json.JSONEncoder(allow_nan=False).encode(value)
    except (TypeError, ValueError):
        return None


def _stable_repr(value: Any) -> str:
    """The value's repr without object addresses: every suite worker must name a test alike."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


@pytest.mark.parametrize("value", PLAIN + ELSEWHERE + EITHER, ids=_stable_repr)
def test_stores_and_refuses_what_the_standard_encoder_does(value: Any) -> None:
    expected = standard(value)
    if expected is None:
        with pytest.raises(FevexRunError) as refused:
            json_text(value)
        assert refused.value.code == "INVALID_ARGUMENT"
        return
    assert json.loads(json_text(value)) == json.loads(expected)


@pytest.mark.parametrize("value", PLAIN, ids=_stable_repr)
def test_plain_json_never_reaches_the_standard_encoder(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The commits' events, changes and checkpoints: orjson's text, read back equal.
    class Refusing:
        def encode(self, value: Any) -> str:
            raise AssertionError("the standard encoder was used")

    monkeypatch.setattr(connections, "_ENCODER", Refusing())
    assert json.loads(json_text(value)) == value


@pytest.mark.parametrize("value", ELSEWHERE, ids=_stable_repr)
def test_what_does_not_read_back_equal_goes_to_the_standard_encoder(
    value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    used: list[Any] = []

    class Counting(json.JSONEncoder):
        def encode(self, value: Any) -> str:
            used.append(value)
            return super().encode(value)

    monkeypatch.setattr(connections, "_ENCODER", Counting(allow_nan=False))
    with contextlib.suppress(FevexRunError):
        json_text(value)
    assert len(used) == 1
    assert used[0] is value
