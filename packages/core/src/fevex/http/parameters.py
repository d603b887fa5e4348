"""The kinds of value an operation of the run protocol takes: a name in its path, a query
parameter, a header, a field of its JSON body.

Each kind knows both its check and its JSON schema, so that the operations table
(:mod:`fevex.http.operations`) names a value once and the server's checks
(:mod:`fevex.http.routes`) and the OpenAPI document (:mod:`fevex.http.openapi`) both follow
from it. A schema may depend on what one served app fixes (:class:`Bounds`): its agent,
workflow and team names, its page of events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.datastructures import Headers, QueryParams

from fevex._ground.storable_text import is_storable
from fevex.errors import FevexRunError
from fevex.http.request_body import (
    MAX_ID_LENGTH,
    Field,
    cursor,
    invalid,
    query_cursor,
    query_integer,
    query_text,
)

if TYPE_CHECKING:
    from fevex.app import Fevex

__all__ = [
    "BodyField",
    "Bound",
    "Bounds",
    "HeaderCursor",
    "Parameter",
    "PathName",
    "QueryChoice",
    "QueryCursor",
    "QueryText",
    "QueryWhole",
    "event_page",
]

TEXT: dict[str, Any] = {"type": "string", "minLength": 1}


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one served app fixes in its protocol: the app (its names) and the most events
    one read returns."""

    app: Fevex
    event_page_size: int


# A bound fixed in the table, or one the served app fixes.
Bound = int | Callable[[Bounds], int]


def event_page(bounds: Bounds) -> int:
    return bounds.event_page_size


def _resolve(bound: Bound, bounds: Bounds) -> int:
    return bound if isinstance(bound, int) else bound(bounds)


@dataclass(frozen=True, slots=True)
class PathName:
    """A name or id in the path. One no store could hold (longer than any id, or with a NUL
    or a lone surrogate) names nothing: ``missing``, as for one that is not there, and it
    is never looked up. ``names`` lists the app's names for the document (an enum)."""

    name: str
    description: str
    missing: str
    noun: str
    names: Callable[[Fevex], tuple[str, ...]] | None = None

    def schema(self, bounds: Bounds) -> dict[str, Any]:
        schema = dict(TEXT)
        known = () if self.names is None else self.names(bounds.app)
        if known:
            schema["enum"] = list(known)
        return schema

    def read(self, path_params: dict[str, Any]) -> str:
        value = path_params[self.name]
        assert isinstance(value, str)
        if len(value) > MAX_ID_LENGTH or not is_storable(value):
            raise FevexRunError(self.missing, f"There is no {self.noun} by the name in this path.")
        return value


@dataclass(frozen=True, slots=True)
class QueryText:
    """Text given at most once, no longer than any id; ``None`` when absent."""

    name: str
    description: str = ""
    location = "query"

    def schema(self, bounds: Bounds) -> dict[str, Any]:
        return dict(TEXT)

    def read(self, query: QueryParams, headers: Headers, bounds: Bounds) -> Any:
        return query_text(query, self.name)


@dataclass(frozen=True, slots=True)
class QueryChoice:
    """One of ``values``; ``default`` when absent."""

    name: str
    values: tuple[str, ...]
    default: str | None = None
    description: str = ""
    location = "query"

    def schema(self, bounds: Bounds) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", "enum": list(self.values)}
        if self.default is not None:
            schema["default"] = self.default
        return schema

    def read(self, query: QueryParams, headers: Headers, bounds: Bounds) -> Any:
        value = query_text(query, self.name)
        if value is None:
            return self.default
        if value not in self.values:
            if len(self.values) == 2:
                raise invalid(f"{self.name} must be {' or '.join(self.values)}.")
            raise invalid(f"{self.name} must be one of {list(self.values)}.")
        return value


@dataclass(frozen=True, slots=True)
class QueryWhole:
    """A whole number from ``low`` to ``high``; ``default`` when absent."""

    name: str
    low: int
    high: Bound
    default: Bound
    description: str = ""
    location = "query"

    def schema(self, bounds: Bounds) -> dict[str, Any]:
        return {
            "type": "integer",
            "minimum": self.low,
            "maximum": _resolve(self.high, bounds),
            "default": _resolve(self.default, bounds),
        }

    def read(self, query: QueryParams, headers: Headers, bounds: Bounds) -> Any:
        found = query_integer(query, self.name, self.low, _resolve(self.high, bounds))
        return found or _resolve(self.default, bounds)


@dataclass(frozen=True, slots=True)
class QueryCursor:
    """The id of the last item of the previous page (see
    :func:`~fevex.http.request_body.cursor`)."""

    name: str
    description: str = ""
    location = "query"

    def schema(self, bounds: Bounds) -> dict[str, Any]:
        return dict(TEXT)

    def read(self, query: QueryParams, headers: Headers, bounds: Bounds) -> Any:
        return query_cursor(query, self.name)


@dataclass(frozen=True, slots=True)
class HeaderCursor:
    """A cursor sent as a header (``Last-Event-ID``); an empty one is none."""

    name: str
    description: str = ""
    location = "header"

    def schema(self, bounds: Bounds) -> dict[str, Any]:
        return {"type": "string"}

    def read(self, query: QueryParams, headers: Headers, bounds: Bounds) -> Any:
        value = headers.get(self.name)
        return cursor(value) if value else None


# What the query string or the headers of a request carry.
Parameter = QueryText | QueryChoice | QueryWhole | QueryCursor | HeaderCursor


@dataclass(frozen=True, slots=True)
class BodyField:
    """A field of the JSON body: ``check`` reads its value, ``schema`` documents it."""

    name: str
    check: Field
    schema: dict[str, Any]
    required: bool = False
