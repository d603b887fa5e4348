"""Request bodies and query strings: read within a size limit, parsed as strict JSON, and
checked field by field before anything reaches the app.

Every operation of the table (:mod:`fevex.http.operations`) names the fields it takes; any
other field is refused (``INVALID_REQUEST``), so that a body can never smuggle an ``actor``
or a ``context`` in. JSON that Python would
accept but a store could not keep (``NaN``, ``Infinity``) is refused too, and so is text,
in a field, a query parameter or a cursor, that no store can keep or look up (a NUL
character, a lone surrogate) or longer than any id: it is refused here with the same code
whatever the store, where a store would otherwise find nothing or fail (``STORE_ERROR``).
The JSON a run takes (``input``, ``payload``) is checked by the app, with its own codes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from starlette.datastructures import QueryParams
from starlette.requests import Request

from fevex._ground.storable_text import is_storable
from fevex.errors import FevexError

__all__ = [
    "MAX_ID_LENGTH",
    "Field",
    "any_json",
    "check_query",
    "choice",
    "cursor",
    "identifier",
    "invalid",
    "non_empty_text",
    "optional",
    "positive_seconds",
    "query_integer",
    "query_cursor",
    "query_text",
    "read_json_body",
    "text",
    "whole_number",
]

# Checks one field's value and returns it as the handler uses it, or raises invalid().
Field = Callable[[str, Any], Any]
# The longest a run may be given, in seconds: a day; what arrives as JSON is bounded.
MAX_SECONDS = 86_400.0
# No id fevex makes is longer; a longer one names nothing, and is never sent to the store.
MAX_ID_LENGTH = 256
UNSTORABLE = "a NUL character or a lone surrogate"


def invalid(message: str) -> FevexError:
    return FevexError("INVALID_REQUEST", message)


def too_large(limit: int) -> FevexError:
    return FevexError("REQUEST_TOO_LARGE", f"The request body is larger than {limit} bytes.")


def _refuse_constant(name: str) -> Any:
    raise invalid(f"The body holds {name}, which is not JSON.")


async def read_json_body(
    request: Request,
    limit: int,
    fields: Mapping[str, Field],
    required: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """The body's JSON object, with each field checked; an empty body is ``{}``.

    At most ``limit`` bytes are read: a ``Content-Length`` above it is refused before the
    body is read, and a body that streams past it is refused once it does."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise too_large(limit)
    if not received.strip():
        data: Any = {}
    else:
        try:
            data = json.loads(bytes(received), parse_constant=_refuse_constant)
        except (ValueError, RecursionError):
            raise invalid("The body is not JSON.") from None
    if not isinstance(data, dict):
        raise invalid("The body must be a JSON object.")
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise invalid(f"Unknown fields {unknown}; this endpoint takes {sorted(fields)}.")
    missing = sorted(required - set(data))
    if missing:
        raise invalid(f"Missing fields {missing}.")
    return {name: fields[name](name, value) for name, value in data.items()}


def any_json(name: str, value: Any) -> Any:
    return value


def optional(field: Field) -> Field:
    def check(name: str, value: Any) -> Any:
        return None if value is None else field(name, value)

    return check


def non_empty_text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise invalid(f"{name} must be a non-empty string.")
    return text(name, value)


def text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise invalid(f"{name} must be a string.")
    if not is_storable(value):
        raise invalid(f"{name} holds {UNSTORABLE}.")
    return value


def identifier(name: str, value: Any) -> str:
    """An id the client names (a session, an approval): non-empty text of at most
    ``MAX_ID_LENGTH`` characters."""
    found = non_empty_text(name, value)
    if len(found) > MAX_ID_LENGTH:
        raise invalid(f"{name} is longer than {MAX_ID_LENGTH} characters.")
    return found


def cursor(value: str) -> str:
    """A cursor as sent (``?after=``, ``Last-Event-ID``): one that no store could hold
    names nothing (``INVALID_CURSOR``, as for an unknown id), and never reaches one."""
    if len(value) > MAX_ID_LENGTH or not is_storable(value):
        raise FevexError(
            "INVALID_CURSOR",
            f"The cursor is longer than {MAX_ID_LENGTH} characters or holds {UNSTORABLE}: it "
            "names nothing; pass the id of the last item of the previous page.",
        )
    return value


def choice(*allowed: str) -> Field:
    def check(name: str, value: Any) -> str:
        if value not in allowed:
            raise invalid(f"{name} must be one of {list(allowed)}.")
        return str(value)

    return check


def positive_seconds(name: str, value: Any) -> float:
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or not 0 < value <= MAX_SECONDS
    ):
        raise invalid(f"{name} must be a number of seconds above 0 and at most {MAX_SECONDS:g}.")
    return float(value)


def whole_number(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
        raise invalid(f"{name} must be a whole number, 0 or more.")
    return value


def query_text(params: QueryParams, name: str) -> str | None:
    """A query parameter given at most once; ``None`` when absent."""
    value = _query_value(params, name)
    if value is None:
        return None
    if len(value) > MAX_ID_LENGTH:
        raise invalid(f"The query parameter {name} is longer than {MAX_ID_LENGTH} characters.")
    if not is_storable(value):
        raise invalid(f"The query parameter {name} holds {UNSTORABLE}.")
    return value


def query_cursor(params: QueryParams, name: str) -> str | None:
    """A cursor given as a query parameter (see :func:`cursor`); ``None`` when absent."""
    value = _query_value(params, name)
    return None if value is None else cursor(value)


def _query_value(params: QueryParams, name: str) -> str | None:
    values = params.getlist(name)
    if len(values) > 1:
        raise invalid(f"The query parameter {name} is given more than once.")
    if not values:
        return None
    if not values[0]:
        raise invalid(f"The query parameter {name} is empty.")
    return values[0]


def query_integer(params: QueryParams, name: str, low: int, high: int) -> int | None:
    value = query_text(params, name)
    if value is None:
        return None
    if (
        not (value.isascii() and value.isdigit() and len(value) <= 19)
        or not low <= int(value) <= high
    ):
        raise invalid(f"The query parameter {name} must be a whole number from {low} to {high}.")
    return int(value)


def check_query(params: QueryParams, allowed: frozenset[str]) -> None:
    unknown = sorted(set(params.keys()) - allowed)
    if unknown:
        raise invalid(f"Unknown query parameters {unknown}; this endpoint takes {sorted(allowed)}.")
