"""The fixed metadata a reflection may hand its model, and nothing else (DESIGN §12).

Every item a source returns is projected again here, field by field, before the model sees
it: only the fields named below survive, strings only when they have the shape of an id, a
name, a code or an instant, numbers only when finite. Payloads, messages, tool output and
raw error text have no field to travel in, and a free text that a source put in an id's
place is dropped rather than passed on: the rule does not trust the source.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fevex.events import RunEvent
from fevex.runtime.records import AgentRun

__all__ = ["event_metadata", "fixed_metadata", "run_metadata", "span_metadata"]

# Ids, names, kinds and statuses: no spaces, no free text.
_TOKEN = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)?")

_TOKEN_FIELDS = frozenset(
    {
        "type",
        "run_id",
        "kind",
        "name",
        "status",
        "parent_run_id",
        "root_run_id",
        "event_type",
        "step_id",
        "tool_name",
        "child_run_id",
        "trace_id",
        "span_id",
        "parent_span_id",
        "span_kind",
    }
)
_CODE_FIELDS = frozenset({"error_code"})
_INSTANT_FIELDS = frozenset(
    {"created_at", "updated_at", "occurred_at", "started_at", "ended_at", "expires_at"}
)
_NUMBER_FIELDS = frozenset({"sequence", "step", "duration_seconds"})
_USAGE_FIELD = "usage"

# Span attributes read by name; everything else a span carries (content among it) is not.
_SPAN_ATTRIBUTES = {
    "fevex.run.id": "run_id",
    "fevex.run.kind": "kind",
    "fevex.run.name": "name",
    "fevex.run.status": "status",
    "fevex.parent_run.id": "parent_run_id",
    "fevex.root_run.id": "root_run_id",
    "fevex.model.step": "step",
    "fevex.workflow.step.id": "step_id",
    "fevex.child_run.id": "child_run_id",
    "gen_ai.tool.name": "tool_name",
    "gen_ai.agent.name": "name",
}
_SPAN_USAGE_PREFIXES = ("fevex.run.usage.", "gen_ai.usage.")


def fixed_metadata(item: Mapping[str, Any]) -> dict[str, Any]:
    """``item`` with only the fixed metadata fields, each of the shape its field allows."""
    kept: dict[str, Any] = {}
    for key, value in item.items():
        if key in _TOKEN_FIELDS:
            ok = isinstance(value, str) and _TOKEN.fullmatch(value) is not None
        elif key in _CODE_FIELDS:
            ok = isinstance(value, str) and _CODE.fullmatch(value) is not None
        elif key in _INSTANT_FIELDS:
            ok = isinstance(value, str) and _INSTANT.fullmatch(value) is not None
        elif key in _NUMBER_FIELDS:
            ok = _is_number(value)
        elif key == _USAGE_FIELD:
            value = _usage(value)
            ok = bool(value)
        else:
            ok = False
        if ok:
            kept[key] = value
    return kept


def run_metadata(run: AgentRun) -> dict[str, Any]:
    """A run as the model may see it: never its input, output, context or error text."""
    item: dict[str, Any] = {
        "type": "run",
        "run_id": run.id,
        "kind": run.kind,
        "name": run.name or run.agent_name,
        "status": run.status,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "root_run_id": run.root_run_id or run.id,
        "usage": run.usage,
    }
    if run.parent_run_id is not None:
        item["parent_run_id"] = run.parent_run_id
    code = (run.error or {}).get("code")
    if code is not None:
        item["error_code"] = code
    if run.status in ("completed", "failed", "cancelled"):
        duration = _seconds_between(run.created_at, run.updated_at)
        if duration is not None:
            item["duration_seconds"] = duration
    return fixed_metadata(item)


def event_metadata(event: RunEvent) -> dict[str, Any]:
    """An event as the model may see it: its type, sequence and time, and of its payload
    only the step, step id, tool name, child run id, error code and usage."""
    payload = event.payload
    item: dict[str, Any] = {
        "type": "event",
        "run_id": event.run_id,
        "event_type": event.type,
        "sequence": event.sequence,
        "occurred_at": event.occurred_at,
    }
    for key in ("step", "step_id", "tool_name", "child_run_id"):
        if key in payload:
            item[key] = payload[key]
    error = payload.get("error")
    if isinstance(error, Mapping) and "code" in error:
        item["error_code"] = error["code"]
    usage = payload.get("total_usage", payload.get("usage"))
    if usage is not None:
        item["usage"] = usage
    return fixed_metadata(item)


def span_metadata(record: Any) -> dict[str, Any]:
    """A span (a fevex :class:`~fevex.observability.Span` or a mapping of its fields, as
    an app's structured log keeps it) as the model may see it: ids, kind, status, error
    code, times and the run identity its attributes name; never its content attributes."""
    fields = record if isinstance(record, Mapping) else _fields_of(record)
    attributes = fields.get("attributes") or {}
    item: dict[str, Any] = {
        "type": "span",
        "trace_id": fields.get("trace_id"),
        "span_id": fields.get("span_id"),
        "parent_span_id": fields.get("parent_span_id"),
        "span_kind": fields.get("kind"),
        "status": fields.get("status"),
        "error_code": fields.get("error_code"),
        "expires_at": fields.get("expires_at"),
    }
    start, end = fields.get("start_ns"), fields.get("end_ns")
    if isinstance(start, int) and isinstance(end, int):
        item["started_at"] = _instant_of_ns(start)
        item["ended_at"] = _instant_of_ns(end)
        item["duration_seconds"] = round((end - start) / 1e9, 6)
    usage: dict[str, Any] = {}
    if isinstance(attributes, Mapping):
        for attribute, key in _SPAN_ATTRIBUTES.items():
            if attribute in attributes:
                item[key] = attributes[attribute]
        for attribute, value in attributes.items():
            for prefix in _SPAN_USAGE_PREFIXES:
                if isinstance(attribute, str) and attribute.startswith(prefix):
                    usage[attribute.removeprefix(prefix)] = value
    if usage:
        item["usage"] = usage
    return fixed_metadata(item)


def _fields_of(record: Any) -> dict[str, Any]:
    names = (
        "trace_id",
        "span_id",
        "parent_span_id",
        "kind",
        "status",
        "error_code",
        "start_ns",
        "end_ns",
        "attributes",
        "expires_at",
    )
    return {name: getattr(record, name, None) for name in names}


def _usage(value: Any) -> dict[str, int]:
    if not isinstance(value, Mapping):
        return {}
    return {
        key: count
        for key, count in value.items()
        if isinstance(key, str)
        and _TOKEN.fullmatch(key)
        and isinstance(count, int)
        and not isinstance(count, bool)
    }


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def _seconds_between(start: str, end: str) -> float | None:
    try:
        return round((_parse(end) - _parse(start)).total_seconds(), 6)
    except ValueError:
        return None


def _parse(instant: str) -> datetime:
    return datetime.fromisoformat(instant.replace("Z", "+00:00"))


def _instant_of_ns(ns: int) -> str:
    moment = datetime.fromtimestamp(ns / 1e9, tz=UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")
