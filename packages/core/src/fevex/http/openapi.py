"""The OpenAPI 3.1 document of the run protocol, as one app serves it.

It is made from the operations table (:mod:`fevex.http.operations`), the same entries the
server's routes check requests by (the same bounds, the same fields, the app's own agent,
workflow and team names), and every status an operation can answer is listed with its
body, so that a client generated from it, or a fuzzer checking responses against it, sees
the server as it is.
"""

from __future__ import annotations

from typing import Any

from fevex.__about__ import __version__
from fevex.app import Fevex
from fevex.http.operations import (
    ERROR_MEANINGS,
    OPERATIONS,
    RUN_STATUSES,
    Answer,
    Model,
    Operation,
)
from fevex.http.parameters import BodyField, Bounds

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
SPAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A span fevex builds (fevex.observability.Span), metadata only; times in "
    "milliseconds since the epoch; run_id and sequence name the event that ended it.",
    "properties": {
        "span_id": {"type": "string"},
        "parent_span_id": NULLABLE_TEXT,
        "name": {"type": "string"},
        "kind": {"type": "string"},
        "start_ms": {"type": "number"},
        "end_ms": {"type": "number"},
        "status": {"type": "string", "enum": ["ok", "error"]},
        "error_code": NULLABLE_TEXT,
        "attributes": {"type": "object"},
        "events": {"type": "array", "items": {"type": "object"}},
        "run_id": NULLABLE_TEXT,
        "sequence": {"type": ["integer", "null"]},
        "open": {"type": "boolean"},
    },
    "required": ["span_id", "name", "kind", "start_ms", "end_ms", "status", "run_id", "open"],
}
VIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A run's four layers (fevex.events.project_run), its tree's spans and totals.",
    "properties": {
        "run_id": {"type": "string"},
        "stream": {"type": "array", "items": {"type": "object"}},
        "state": {"type": "array", "items": {"type": "object"}},
        "messages": {"type": "array", "items": {"type": "object"}},
        "turn": {"type": ["object", "null"]},
        "trace_id": {"type": "string"},
        "spans": {"type": "array", "items": {"$ref": "#/components/schemas/Span"}},
        "totals": {
            "type": "object",
            "properties": {
                "runs": {"type": "integer"},
                "usage": {"type": "object", "additionalProperties": {"type": "integer"}},
                "cost": {"type": ["object", "null"]},
            },
            "required": ["runs", "usage", "cost"],
        },
    },
    "required": ["run_id", "stream", "state", "messages", "turn", "trace_id", "spans", "totals"],
}
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


def openapi_document(
    app: Fevex, *, event_page_size: int, max_body_size: int, anonymous: bool
) -> dict[str, Any]:
    """The document for ``app`` served with these bounds: one entry per operation."""
    bounds = Bounds(app, event_page_size)
    paths: dict[str, Any] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method.lower()] = _operation(
            operation, bounds
        )
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
                "RunView": VIEW_SCHEMA,
                "Span": SPAN_SCHEMA,
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


def _operation(operation: Operation, bounds: Bounds) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "operationId": operation.operation_id,
        "summary": operation.summary.replace("{event_page_size}", str(bounds.event_page_size)),
    }
    if operation.description:
        entry["description"] = operation.description
    parameters = [
        {
            "name": name.name,
            "in": "path",
            "required": True,
            "schema": name.schema(bounds),
            "description": name.description,
        }
        for name in operation.path_names
    ]
    for parameter in operation.parameters:
        described: dict[str, Any] = {
            "name": parameter.name,
            "in": parameter.location,
            "required": False,
            "schema": parameter.schema(bounds),
        }
        if parameter.description:
            described["description"] = parameter.description
        parameters.append(described)
    if parameters:
        entry["parameters"] = parameters
    if operation.body is not None:
        entry["requestBody"] = _request_body(operation.body)
    entry["responses"] = {
        operation.answer.status: _answer(operation.answer),
        **{
            status: {"description": ERROR_MEANINGS[status], **_json(_ref("Error"))}
            for status in operation.errors
        },
    }
    if not operation.authenticated:
        entry["security"] = []
    return entry


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _page(key: str, item: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            key: {"type": "array", "items": _ref(item)},
            "next_after": NULLABLE_TEXT,
        },
        "required": [key, "next_after"],
    }


# Each model of an answer, as its content.
MODEL_CONTENT: dict[Model, dict[str, Any]] = {
    "Document": _json({"type": "object"}),
    "Run": _json(_ref("Run")),
    "RunPage": _json(_page("runs", "Run")),
    "EventPage": _json(_page("events", "RunEvent")),
    "EventStream": {"content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}}},
    "Session": _json(_ref("Session")),
    "RunView": _json(_ref("RunView")),
}


def _answer(answer: Answer) -> dict[str, Any]:
    return {"description": answer.description, **MODEL_CONTENT[answer.model]}


def _request_body(fields: tuple[BodyField, ...]) -> dict[str, Any]:
    required = [field.name for field in fields if field.required]
    return {
        "required": bool(required),
        **_json(
            {
                "type": "object",
                "properties": {field.name: field.schema for field in fields},
                "required": required,
                "additionalProperties": False,
            }
        ),
    }
