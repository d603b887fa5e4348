"""The run protocol, operation by operation: the one description the server's routes and
checks (:mod:`fevex.http.routes`), its OpenAPI document (:mod:`fevex.http.openapi`) and
both clients (:mod:`fevex.http.client_calls`) are made from.

Each :class:`Operation` names its method and path, what its path, query string, headers
and body take (see :mod:`fevex.http.parameters`), the answer it gives, the error statuses
it may answer, and whether its caller must be authenticated. Its ``name`` is the method of
:class:`~fevex.http.endpoints.Endpoints` that serves it and of both clients that call it;
its ``operationId`` is that name in camel case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from fevex.http.parameters import (
    BodyField,
    HeaderCursor,
    Parameter,
    PathName,
    QueryChoice,
    QueryCursor,
    QueryText,
    QueryWhole,
    event_page,
)
from fevex.http.request_body import (
    MAX_ID_LENGTH,
    MAX_SECONDS,
    any_json,
    choice,
    identifier,
    non_empty_text,
    optional,
    positive_seconds,
    text,
    whole_number,
)
from fevex.runtime.records import RunStatus

if TYPE_CHECKING:
    from fevex.app import Fevex

__all__ = ["Answer", "Model", "Operation", "operation_named"]

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
MAX_RUN_PAGE = 1000
DEFAULT_RUN_PAGE = 50

# What an answer's body is: a name the document and the clients both know.
Model = Literal["Document", "Run", "RunPage", "EventPage", "EventStream", "Session", "RunView"]

# What each error status an operation may answer means, with the codes it is for (see
# fevex.http.errors.ERROR_STATUS: one status per code).
ERROR_MEANINGS = {
    "400": "The request is malformed (INVALID_REQUEST, INVALID_ARGUMENT, INVALID_INPUT, "
    "INVALID_CURSOR, ...).",
    "401": "No credentials the server accepts (UNAUTHENTICATED).",
    "403": "The caller may not do this (FORBIDDEN, EVENT_ACTOR_REQUIRED).",
    "404": "Nothing of the caller's has that name (RUN_NOT_FOUND, SESSION_NOT_FOUND, ...).",
    "409": "The run or session is not in a state that allows it (RUN_CONFLICT, "
    "RUN_NOT_PAUSED, RUN_TIMEOUT, ...).",
    "413": "The body is larger than the server accepts (REQUEST_TOO_LARGE).",
    "422": "The app refused the request for the reason the code names.",
    "500": "The server failed (INTERNAL_ERROR); nothing more is said.",
    "503": "The run store failed; try again (STORE_ERROR, ...).",
}
READ_ERRORS = ("400", "401", "403", "404", "422", "500", "503")
WRITE_ERRORS = ("400", "401", "403", "404", "409", "413", "422", "500", "503")


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer of an operation that succeeds: its status and what its body is."""

    status: str
    description: str
    model: Model


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation of the protocol (see the module's description)."""

    name: str
    method: Literal["GET", "POST"]
    path: str
    summary: str
    answer: Answer
    errors: tuple[str, ...]
    description: str = ""
    path_names: tuple[PathName, ...] = ()
    # An operation without query parameters or headers leaves the query string alone.
    parameters: tuple[Parameter, ...] = ()
    # ``None``: the operation reads no body; else the fields its JSON object may hold.
    body: tuple[BodyField, ...] | None = None
    authenticated: bool = True
    # Whether the clients call it (the document is for tools, not for them).
    in_clients: bool = True

    @property
    def operation_id(self) -> str:
        first, *rest = self.name.split("_")
        return first + "".join(word.capitalize() for word in rest)

    @property
    def streams(self) -> bool:
        return self.answer.model == "EventStream"


RUN_ID = PathName("run_id", "A run's id.", "RUN_NOT_FOUND", "run")
SESSION_ID = PathName("session_id", "A session's id.", "SESSION_NOT_FOUND", "session")
TIMEOUT_SCHEMA: dict[str, Any] = {
    "type": ["number", "null"],
    "exclusiveMinimum": 0,
    "maximum": MAX_SECONDS,
    "description": "Seconds the run may take from here on.",
}
TIMEOUT = BodyField("timeout", optional(positive_seconds), TIMEOUT_SCHEMA)
NULLABLE_TEXT: dict[str, Any] = {"type": ["string", "null"]}
TAKEN_OVER = "The run, taken over; it goes on in the server."
STARTED = Answer("201", "The new run's first snapshot.", "Run")
CONTEXT_FROM_CALLER = "The run's context is the caller's, from authentication."


def _start(
    kind: str,
    names: Callable[[Fevex], tuple[str, ...]],
    summary: str,
    *body: BodyField,
) -> Operation:
    return Operation(
        name=f"start_{kind}",
        method="POST",
        path=f"/v1/{kind}s/{{{kind}_name}}/runs",
        summary=summary,
        description=CONTEXT_FROM_CALLER,
        answer=STARTED,
        errors=WRITE_ERRORS,
        path_names=(
            PathName(
                f"{kind}_name", f"The {kind}'s name.", f"{kind.upper()}_NOT_FOUND", kind, names
            ),
        ),
        body=(*body, TIMEOUT),
    )


def _command(name: str, path: str, summary: str, answer: Answer, *body: BodyField) -> Operation:
    return Operation(
        name=name,
        method="POST",
        path=path,
        summary=summary,
        answer=answer,
        errors=WRITE_ERRORS,
        path_names=(RUN_ID,),
        body=body,
    )


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="get_openapi_document",
        method="GET",
        path="/v1/openapi.json",
        summary="This document.",
        answer=Answer("200", "The document.", "Document"),
        # It names the app's agents, workflows and teams: only for callers it serves.
        errors=("401", "403", "500"),
        in_clients=False,
    ),
    _start(
        "agent",
        lambda app: app.agents,
        "Start a run of an agent; it goes on in the server.",
        BodyField(
            "input",
            any_json,
            {"description": "The agent's input: text, or its schema's JSON."},
            required=True,
        ),
        BodyField(
            "session_id",
            optional(identifier),
            {
                **NULLABLE_TEXT,
                "minLength": 1,
                "maxLength": MAX_ID_LENGTH,
                "description": "A session of the caller's to continue, or a new id.",
            },
        ),
    ),
    _start(
        "workflow",
        lambda app: app.workflows,
        "Start a run of a workflow (its latest version).",
        BodyField("input", any_json, {"description": "The workflow's input."}),
    ),
    _start(
        "team",
        lambda app: app.teams,
        "Start a run of a team (its latest version).",
        BodyField("input", any_json, {"description": "The team's input."}),
    ),
    Operation(
        name="list_runs",
        method="GET",
        path="/v1/runs",
        summary="The caller's runs, newest first.",
        description="Other namespaces' runs are skipped in the server: a page may hold fewer "
        "than limit runs; next_after (null: no more) continues it.",
        answer=Answer("200", "A page of runs.", "RunPage"),
        errors=READ_ERRORS,
        parameters=(
            QueryChoice("status", RUN_STATUSES),
            QueryText("kind"),
            QueryText("name"),
            QueryText("session_id"),
            QueryText("parent_run_id"),
            QueryWhole("limit", 1, MAX_RUN_PAGE, DEFAULT_RUN_PAGE),
            QueryCursor(
                "after", "A run id: the page starts after it (INVALID_CURSOR when no run has it)."
            ),
        ),
    ),
    Operation(
        name="get_run",
        method="GET",
        path="/v1/runs/{run_id}",
        summary="A run of the caller's.",
        answer=Answer("200", "The run.", "Run"),
        errors=READ_ERRORS,
        path_names=(RUN_ID,),
    ),
    Operation(
        name="get_run_view",
        method="GET",
        path="/v1/runs/{run_id}/view",
        summary="A run as the console draws it, computed by the server.",
        description="The four layers of fevex.events.project_run (stream, state, messages, "
        "turn: null until the run ends), the spans fevex builds for the run and its "
        "descendants (metadata only; open ones end now and say open), and the tokens and "
        "cost of the tree's model steps.",
        answer=Answer("200", "The run's view.", "RunView"),
        errors=READ_ERRORS,
        path_names=(RUN_ID,),
    ),
    Operation(
        name="list_events",
        method="GET",
        path="/v1/runs/{run_id}/events",
        summary="A page of a run's events, at most {event_page_size}.",
        answer=Answer(
            "200",
            "Events by sequence; next_after continues an asc page that was full.",
            "EventPage",
        ),
        errors=READ_ERRORS,
        path_names=(RUN_ID,),
        parameters=(
            QueryCursor(
                "after",
                "An event id of this run: the page starts after it (else INVALID_CURSOR).",
            ),
            QueryWhole("limit", 1, event_page, event_page),
            QueryChoice("order", ("asc", "desc"), "asc"),
        ),
    ),
    Operation(
        name="observe_run",
        method="GET",
        path="/v1/runs/{run_id}/events/stream",
        summary="Observe a run over server-sent events.",
        description="One frame per event (id: the event id, event: its type, data: its JSON), "
        "then an 'end' frame once the run has ended. Reconnect with Last-Event-ID to continue "
        "after the last event received. Disconnecting never cancels the run.",
        answer=Answer("200", "The stream.", "EventStream"),
        errors=READ_ERRORS,
        path_names=(RUN_ID,),
        parameters=(
            QueryCursor(
                "after",
                "Start after this event id (INVALID_CURSOR when it is not one of the run's).",
            ),
            HeaderCursor("Last-Event-ID", "Where a reconnecting client stopped; wins over after."),
        ),
    ),
    _command(
        "resume_run",
        "/v1/runs/{run_id}/resume",
        "Decide a pending approval (the actor is the caller; a rejection may give the model a "
        "reason), answer a pending input of a running run (input_id with action 'accept' and "
        "its content, 'decline' or 'cancel'), or continue a run whose wait is over.",
        Answer("202", TAKEN_OVER, "Run"),
        BodyField("approval_id", optional(identifier), {**NULLABLE_TEXT, "minLength": 1}),
        BodyField(
            "decision", optional(choice("approve", "reject")), {"enum": ["approve", "reject", None]}
        ),
        BodyField("reason", optional(text), NULLABLE_TEXT),
        BodyField("input_id", optional(identifier), {**NULLABLE_TEXT, "minLength": 1}),
        BodyField(
            "action",
            optional(choice("accept", "decline", "cancel")),
            {"enum": ["accept", "decline", "cancel", None]},
        ),
        BodyField(
            "content",
            any_json,
            {"type": ["object", "null"], "description": "The values, with 'accept'."},
        ),
        TIMEOUT,
    ),
    _command(
        "recover_run",
        "/v1/runs/{run_id}/recover",
        "Take over a running run whose lease expired and continue it.",
        Answer("202", TAKEN_OVER, "Run"),
        TIMEOUT,
    ),
    _command(
        "cancel_run",
        "/v1/runs/{run_id}/cancel",
        "Cancel a run (its children first) and return it as it stands after.",
        Answer("200", "The run.", "Run"),
        BodyField(
            "timeout",
            optional(positive_seconds),
            {
                **TIMEOUT_SCHEMA,
                "description": "Seconds to wait for another process that executes the run to obey.",
            },
        ),
    ),
    _command(
        "send_event",
        "/v1/runs/{run_id}/external-events",
        "Deliver an external event to a workflow run waiting for it.",
        Answer("202", TAKEN_OVER, "Run"),
        BodyField("name", non_empty_text, {"type": "string", "minLength": 1}, required=True),
        BodyField(
            "payload", any_json, {"description": "Plain JSON, checked against the event's schema."}
        ),
        TIMEOUT,
    ),
    Operation(
        name="get_session",
        method="GET",
        path="/v1/sessions/{session_id}",
        summary="A session whose runs are the caller's.",
        answer=Answer("200", "The session.", "Session"),
        errors=READ_ERRORS,
        path_names=(SESSION_ID,),
    ),
    Operation(
        name="compact_session",
        method="POST",
        path="/v1/sessions/{session_id}/compact",
        summary="Replace a session's history with a summary.",
        answer=Answer("200", "The compacted session.", "Session"),
        errors=WRITE_ERRORS,
        path_names=(SESSION_ID,),
        body=(
            BodyField("summary", text, {"type": "string"}, required=True),
            BodyField(
                "revision",
                optional(whole_number),
                {
                    "type": ["integer", "null"],
                    "minimum": 0,
                    "description": "The revision the summary was written from.",
                },
            ),
        ),
    ),
)

_BY_NAME = {operation.name: operation for operation in OPERATIONS}


def operation_named(name: str) -> Operation:
    """The operation ``name`` (an :class:`Operation`'s ``name``)."""
    return _BY_NAME[name]
