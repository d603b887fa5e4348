"""The OpenAPI 3.1 document of the run protocol, as one app serves it.

It is built from what the endpoints check (the same bounds, the same fields, the app's own
agent, workflow and team names), and every status an operation can answer is listed with
its body, so that a client generated from it, or a fuzzer checking responses against it,
sees the server as it is.
"""

from __future__ import annotations

from typing import Any

from fevex.__about__ import __version__
from fevex.app import Fevex
from fevex.http.endpoints import DEFAULT_RUN_PAGE, MAX_RUN_PAGE, RUN_STATUSES
from fevex.http.request_body import MAX_ID_LENGTH, MAX_SECONDS

__all__ = ["openapi_document"]

NULLABLE_TEXT: dict[str, Any] = {"type": ["string", "null"]}
ANY_JSON: dict[str, Any] = {}

RUN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A snapshot of a run (AgentRun.to_json()).",
    "properties": {
        "id": {"type": "string"},
        "session_id": {"type": "string"},
        "agent_name": {"type": "string"},
        "status": {"type": "string", "enum": list(RUN_STATUSES)},
        "input": ANY_JSON,
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
        "output": ANY_JSON,
        "usage": {"type": "object", "additionalProperties": {"type": "integer"}},
        "error": {"type": ["object", "null"]},
        "pause": {"type": ["object", "null"]},
        "revision": {"type": "integer"},
        "kind": {"type": "string"},
        "name": {"type": "string"},
        "version": NULLABLE_TEXT,
        "parent_run_id": NULLABLE_TEXT,
        "root_run_id": {"type": "string"},
        "context": {"type": ["object", "null"]},
        "cancel_requested": {"type": "boolean"},
        "wake_at": {"type": ["number", "null"]},
    },
    "required": [
        "id", "session_id", "agent_name", "status", "input", "created_at", "updated_at",
        "output", "usage", "error", "pause", "revision", "kind", "name", "version",
        "parent_run_id", "root_run_id", "context", "cancel_requested", "wake_at",
    ],
}  # fmt: skip
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A committed event of a run (RunEvent.to_json()).",
    "properties": {
        "id": {"type": "string"},
        "run_id": {"type": "string"},
        "sequence": {"type": "integer", "minimum": 1},
        "type": {"type": "string"},
        "occurred_at": {"type": "string"},
        "payload": {"type": "object"},
    },
    "required": ["id", "run_id", "sequence", "type", "occurred_at", "payload"],
}
SESSION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A conversation (Session.to_json()).",
    "properties": {
        "id": {"type": "string"},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
        "history": {"type": "array", "items": {"type": "object"}},
        "summary": NULLABLE_TEXT,
        "active_run_id": NULLABLE_TEXT,
        "revision": {"type": "integer"},
    },
    "required": [
        "id", "created_at", "updated_at", "history", "summary", "active_run_id", "revision"
    ],
}  # fmt: skip
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "required": ["code", "message"],
            "additionalProperties": False,
        }
    },
    "required": ["error"],
    "additionalProperties": False,
}
# In OpenAPI 3.1, the schema of an event stream describes each of its events.
SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One frame: a run event (event: its type, id: its id, data: its JSON) or "
    "the last one (event: end, data: {run_id, status}).",
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string", "contentMediaType": "application/json"},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
    "required": ["event", "data"],
}
TIMEOUT: dict[str, Any] = {
    "type": ["number", "null"],
    "exclusiveMinimum": 0,
    "maximum": MAX_SECONDS,
    "description": "Seconds the run may take from here on.",
}

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


def openapi_document(
    app: Fevex, *, event_page_size: int, max_body_size: int, anonymous: bool
) -> dict[str, Any]:
    """The document for ``app`` served with these bounds."""
    run_id = _path("run_id", "A run's id.")
    session_id = _path("session_id", "A session's id.")
    page_limit = {"type": "integer", "minimum": 1, "maximum": event_page_size}
    paths: dict[str, Any] = {
        "/v1/openapi.json": {
            "get": {
                "operationId": "getOpenapiDocument",
                "summary": "This document.",
                "responses": {
                    "200": {"description": "The document.", **_json({"type": "object"})},
                    **_errors(("401", "403", "500")),
                },
            }
        },
        "/v1/agents/{agent_name}/runs": {
            "post": _start(
                "startAgent",
                "Start a run of an agent; it goes on in the server.",
                _path("agent_name", "The agent's name.", app.agents),
                {
                    "input": {"description": "The agent's input: text, or its schema's JSON."},
                    "session_id": {
                        **NULLABLE_TEXT,
                        "minLength": 1,
                        "maxLength": MAX_ID_LENGTH,
                        "description": "A session of the caller's to continue, or a new id.",
                    },
                    "timeout": TIMEOUT,
                },
                ["input"],
            )
        },
        "/v1/workflows/{workflow_name}/runs": {
            "post": _start(
                "startWorkflow",
                "Start a run of a workflow (its latest version).",
                _path("workflow_name", "The workflow's name.", app.workflows),
                {"input": {"description": "The workflow's input."}, "timeout": TIMEOUT},
                [],
            )
        },
        "/v1/teams/{team_name}/runs": {
            "post": _start(
                "startTeam",
                "Start a run of a team (its latest version).",
                _path("team_name", "The team's name.", app.teams),
                {"input": {"description": "The team's input."}, "timeout": TIMEOUT},
                [],
            )
        },
        "/v1/runs": {
            "get": {
                "operationId": "listRuns",
                "summary": "The caller's runs, newest first.",
                "description": "Other namespaces' runs are skipped in the server: a page may "
                "hold fewer than limit runs; next_after (null: no more) continues it.",
                "parameters": [
                    _query("status", {"type": "string", "enum": list(RUN_STATUSES)}),
                    _query("kind", {"type": "string", "minLength": 1}),
                    _query("name", {"type": "string", "minLength": 1}),
                    _query("session_id", {"type": "string", "minLength": 1}),
                    _query("parent_run_id", {"type": "string", "minLength": 1}),
                    _query(
                        "limit",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_RUN_PAGE,
                            "default": DEFAULT_RUN_PAGE,
                        },
                    ),
                    _query(
                        "after",
                        {"type": "string", "minLength": 1},
                        "A run id: the page starts after it (INVALID_CURSOR when no run has it).",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "A page of runs.",
                        **_json(_page("runs", "#/components/schemas/Run")),
                    },
                    **_errors(READ_ERRORS),
                },
            }
        },
        "/v1/runs/{run_id}": {
            "get": {
                "operationId": "getRun",
                "summary": "A run of the caller's.",
                "parameters": [run_id],
                "responses": {"200": _run_body("The run."), **_errors(READ_ERRORS)},
            }
        },
        "/v1/runs/{run_id}/events": {
            "get": {
                "operationId": "listEvents",
                "summary": f"A page of a run's events, at most {event_page_size}.",
                "parameters": [
                    run_id,
                    _query(
                        "after",
                        {"type": "string", "minLength": 1},
                        "An event id of this run: the page starts after it (else INVALID_CURSOR).",
                    ),
                    _query("limit", {**page_limit, "default": event_page_size}),
                    _query("order", {"type": "string", "enum": ["asc", "desc"], "default": "asc"}),
                ],
                "responses": {
                    "200": {
                        "description": "Events by sequence; next_after continues an asc page "
                        "that was full.",
                        **_json(_page("events", "#/components/schemas/RunEvent")),
                    },
                    **_errors(READ_ERRORS),
                },
            }
        },
        "/v1/runs/{run_id}/events/stream": {
            "get": {
                "operationId": "observeRun",
                "summary": "Observe a run over server-sent events.",
                "description": "One frame per event (id: the event id, event: its type, "
                "data: its JSON), then an 'end' frame once the run has ended. Reconnect "
                "with Last-Event-ID to continue after the last event received. "
                "Disconnecting never cancels the run.",
                "parameters": [
                    run_id,
                    _query(
                        "after",
                        {"type": "string", "minLength": 1},
                        "Start after this "
                        "event id (INVALID_CURSOR when it is not one of the run's).",
                    ),
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string"},
                        "description": "Where a reconnecting client stopped; wins over after.",
                    },
                ],
                "responses": {
                    "200": {
                        "description": "The stream.",
                        "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}},
                    },
                    **_errors(READ_ERRORS),
                },
            }
        },
        "/v1/runs/{run_id}/resume": {
            "post": _command(
                "resumeRun",
                "Decide a pending approval (the actor is the caller; a rejection may give the "
                "model a reason), or continue a run whose wait is over.",
                run_id,
                {
                    "approval_id": {**NULLABLE_TEXT, "minLength": 1},
                    "decision": {"enum": ["approve", "reject", None]},
                    "reason": NULLABLE_TEXT,
                    "timeout": TIMEOUT,
                },
                [],
                "202",
            )
        },
        "/v1/runs/{run_id}/recover": {
            "post": _command(
                "recoverRun",
                "Take over a running run whose lease expired and continue it.",
                run_id,
                {"timeout": TIMEOUT},
                [],
                "202",
            )
        },
        "/v1/runs/{run_id}/cancel": {
            "post": _command(
                "cancelRun",
                "Cancel a run (its children first) and return it as it stands after.",
                run_id,
                {
                    "timeout": {
                        **TIMEOUT,
                        "description": "Seconds to wait for another process "
                        "that executes the run to obey.",
                    }
                },
                [],
                "200",
            )
        },
        "/v1/runs/{run_id}/external-events": {
            "post": _command(
                "sendEvent",
                "Deliver an external event to a workflow run waiting for it.",
                run_id,
                {
                    "name": {"type": "string", "minLength": 1},
                    "payload": {"description": "Plain JSON, checked against the event's schema."},
                    "timeout": TIMEOUT,
                },
                ["name"],
                "202",
            )
        },
        "/v1/sessions/{session_id}": {
            "get": {
                "operationId": "getSession",
                "summary": "A session whose runs are the caller's.",
                "parameters": [session_id],
                "responses": {
                    "200": {"description": "The session.", **_json(_ref("Session"))},
                    **_errors(READ_ERRORS),
                },
            }
        },
        "/v1/sessions/{session_id}/compact": {
            "post": {
                "operationId": "compactSession",
                "summary": "Replace a session's history with a summary.",
                "parameters": [session_id],
                "requestBody": _request_body(
                    {
                        "summary": {"type": "string"},
                        "revision": {
                            "type": ["integer", "null"],
                            "minimum": 0,
                            "description": "The revision the summary was written from.",
                        },
                    },
                    ["summary"],
                ),
                "responses": {
                    "200": {"description": "The compacted session.", **_json(_ref("Session"))},
                    **_errors(WRITE_ERRORS),
                },
            }
        },
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "fevex run protocol",
            "version": f"1 (fevex {__version__})",
            "description": f"Runs, events and sessions of a fevex app. Request bodies are at "
            f"most {max_body_size} bytes. Errors are {{'error': {{'code', 'message'}}}} with "
            "one status per code.",
        },
        "paths": paths,
        "components": {
            "schemas": {
                "Run": RUN_SCHEMA,
                "RunEvent": EVENT_SCHEMA,
                "Session": SESSION_SCHEMA,
                "Error": ERROR_SCHEMA,
            },
        },
    }
    if not anonymous:
        document["components"]["securitySchemes"] = {
            "host": {
                "type": "http",
                "scheme": "bearer",
                "description": "Whatever the host's authenticate(request) accepts.",
            }
        }
        document["security"] = [{"host": []}]
    return document


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _page(key: str, item: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            key: {"type": "array", "items": {"$ref": item}},
            "next_after": NULLABLE_TEXT,
        },
        "required": [key, "next_after"],
    }


def _run_body(description: str) -> dict[str, Any]:
    return {"description": description, **_json(_ref("Run"))}


def _errors(statuses: tuple[str, ...]) -> dict[str, Any]:
    return {
        status: {"description": ERROR_MEANINGS[status], **_json(_ref("Error"))}
        for status in statuses
    }


def _path(name: str, description: str, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": 1}
    if names:
        schema["enum"] = list(names)
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": schema,
        "description": description,
    }


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    parameter: dict[str, Any] = {"name": name, "in": "query", "required": False, "schema": schema}
    if description:
        parameter["description"] = description
    return parameter


def _request_body(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "required": bool(required),
        **_json(
            {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            }
        ),
    }


def _start(
    operation: str,
    summary: str,
    name: dict[str, Any],
    properties: dict[str, Any],
    required: list[str],
) -> dict[str, Any]:
    return {
        "operationId": operation,
        "summary": summary,
        "description": "The run's context is the caller's, from authentication.",
        "parameters": [name],
        "requestBody": _request_body(properties, required),
        "responses": {"201": _run_body("The new run's first snapshot."), **_errors(WRITE_ERRORS)},
    }


def _command(
    operation: str,
    summary: str,
    run_id: dict[str, Any],
    properties: dict[str, Any],
    required: list[str],
    status: str,
) -> dict[str, Any]:
    described = "The run, taken over; it goes on in the server." if status == "202" else "The run."
    return {
        "operationId": operation,
        "summary": summary,
        "parameters": [run_id],
        "requestBody": _request_body(properties, required),
        "responses": {status: _run_body(described), **_errors(WRITE_ERRORS)},
    }
