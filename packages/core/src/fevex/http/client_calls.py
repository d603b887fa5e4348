"""What both clients send and how they read the answers, made from the operations table
(:mod:`fevex.http.operations`), so that :class:`~fevex.http.FevexClient` and
:class:`~fevex.http.AsyncFevexClient` differ only in how they wait.

Observation is a small state machine shared the same way: it remembers the last event
yielded, skips anything at or before it (so a server that sends an event twice never makes
a client yield it twice), and tells the loop when to reconnect and how long to wait first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from fevex.events import RunEvent
from fevex.http.errors import FevexHttpError
from fevex.http.operations import Model, operation_named
from fevex.runtime.records import AgentRun, Session

__all__ = ["Call", "Observation", "RunPage", "call", "error_from_response"]

# How long a client keeps reconnecting without receiving anything, by default.
RECONNECT_FOR = 60.0
FIRST_RETRY_DELAY = 0.1


@dataclass(frozen=True, slots=True)
class RunPage:
    """A page of runs: ``next_after`` is the ``after`` of the next page, ``None`` at the end.
    A page may hold fewer runs than asked for before its end (the server skips runs of
    other namespaces)."""

    runs: tuple[AgentRun, ...]
    next_after: str | None


@dataclass(frozen=True, slots=True)
class Call:
    method: str
    path: str
    parse: Callable[[Any], Any]
    json: dict[str, Any] | None = None
    params: dict[str, str] = field(default_factory=dict)


def _segment(value: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("ids and names are non-empty strings")
    return quote(value, safe="")


def _run(data: Any) -> AgentRun:
    return AgentRun.from_json(data)


def _run_page(data: Any) -> RunPage:
    return RunPage(tuple(AgentRun.from_json(run) for run in data["runs"]), data["next_after"])


def _events(data: Any) -> list[RunEvent]:
    return [RunEvent.from_json(event) for event in data["events"]]


def _session(data: Any) -> Session:
    return Session.from_json(data)


def _view(data: Any) -> dict[str, Any]:
    return dict(data)


def _document(data: Any) -> Any:
    return data


def _stream(data: Any) -> Any:
    raise TypeError("an event stream is read frame by frame (observe_run), not parsed")


# How a client reads each model of an answer.
PARSERS: dict[Model, Callable[[Any], Any]] = {
    "Document": _document,
    "Run": _run,
    "RunPage": _run_page,
    "EventPage": _events,
    "EventStream": _stream,
    "Session": _session,
    "RunView": _view,
}


def call(
    name: str,
    path: Mapping[str, str],
    *,
    query: Mapping[str, Any] | None = None,
    body: Mapping[str, Any] | None = None,
) -> Call:
    """The request of operation ``name``: its method and path from the operations table,
    the path's names filled in, and the query parameters and body fields given (those that
    are ``None`` are left out, as the server takes absent ones)."""
    operation = operation_named(name)
    names = {parameter.name for parameter in operation.path_names}
    if set(path) != names:
        raise ValueError(f"{name} names {sorted(names)} in its path, not {sorted(path)}")
    url = operation.path
    for key, value in path.items():
        url = url.replace(f"{{{key}}}", _segment(value))
    params = {key: str(value) for key, value in (query or {}).items() if value is not None}
    taken = {parameter.name for parameter in operation.parameters}
    if not set(params) <= taken:
        raise ValueError(f"{name} takes the query parameters {sorted(taken)}")
    json_body = None
    if operation.body is not None:
        json_body = {key: value for key, value in (body or {}).items() if value is not None}
        if not set(json_body) <= {field.name for field in operation.body}:
            raise ValueError(f"{name} takes no field of {sorted(json_body)}")
    return Call(operation.method, url, PARSERS[operation.answer.model], json_body, params)


def error_from_response(status: int, body: bytes) -> FevexHttpError:
    """The server's error, from its ``{"error": {"code", "message"}}`` body; a body of
    another shape (a proxy's page) keeps only the status."""
    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = f"HTTP_{status}", f"The server answered {status} without a fevex error."
    return FevexHttpError(status, code, message)


@dataclass(slots=True)
class Observation:
    """Where an observation of one run stands across reconnections."""

    after: str | None
    reconnect_for: float
    last_sequence: int = 0
    failures: int = 0
    retry_seconds: float = 1.0
    ended: bool = False
    quiet_since: float | None = None

    def headers(self) -> dict[str, str]:
        return {} if self.after is None else {"Last-Event-ID": self.after}

    def received(self, event: str, data: str, event_id: str, retry: int | None) -> RunEvent | None:
        """The event to yield for one SSE frame, if any; the ``end`` frame ends it. Only
        progress (an event, the end) counts as the server answering again."""
        if retry is not None and retry > 0:
            self.retry_seconds = retry / 1000
        if event == "end":
            self.ended = True
            return None
        if not event_id or not data:
            return None
        run_event = RunEvent.from_json(json.loads(data))
        self.failures = 0
        self.quiet_since = None
        if run_event.sequence <= self.last_sequence:
            return None
        self.last_sequence = run_event.sequence
        self.after = run_event.id
        return run_event

    def connected(self) -> None:
        """The server answered the stream's request: the time without an answer restarts,
        the backoff does not (a server that answers and drops at once is not hammered)."""
        self.quiet_since = None

    def delay_after_drop(self, now: float) -> float | None:
        """Seconds to wait before reconnecting, or ``None`` once ``reconnect_for`` seconds
        passed without the server answering."""
        if self.quiet_since is None:
            self.quiet_since = now
        if now - self.quiet_since > self.reconnect_for:
            return None
        self.failures += 1
        if self.failures == 1:
            return 0.0
        return float(min(FIRST_RETRY_DELAY * 2 ** (self.failures - 2), self.retry_seconds))
