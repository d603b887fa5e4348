"""One fevex :class:`~fevex.observability.Span` as what OpenTelemetry's tracer is given.

fevex names its attributes after the GenAI semantic conventions already
(``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``, ...,
and its own under ``fevex.*``), so they pass through; the mapping adds the span kind, the
status and ``error.type``, and checks what would otherwise fail later, inside the
application's processors, where one bad value loses a whole OTLP batch: ids, times,
attribute values the OTLP encoding refuses (integers beyond 64 bits, lone surrogates).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.trace import SpanKind as OtelSpanKind

from fevex.observability import Span
from fevex_opentelemetry.span_ids import parse_hex_id

__all__ = ["MappedEvent", "MappedSpan", "OtelAttributes", "map_span"]

OtelAttributes = dict[str, str | bool | int | float]

# A model step calls a model service: CLIENT. Tools, steps, delegations and the run's own
# execution are in-process operations: INTERNAL (as the conventions ask of `execute_tool`
# and of an `invoke_agent` that runs in process). A kind added to fevex later is INTERNAL.
SPAN_KINDS: Mapping[str, OtelSpanKind] = {
    "run": OtelSpanKind.INTERNAL,
    "model": OtelSpanKind.CLIENT,
    "tool": OtelSpanKind.INTERNAL,
    "workflow_step": OtelSpanKind.INTERNAL,
    "team_delegation": OtelSpanKind.INTERNAL,
}

# The conventions' value of `error.type` when no more specific one is known.
OTHER_ERROR = "_OTHER"

_INT64 = range(-(2**63), 2**63)
_SURROGATES = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class MappedEvent:
    name: str
    time_ns: int
    attributes: OtelAttributes


@dataclass(frozen=True, slots=True)
class MappedSpan:
    """A checked span; ``dropped`` names the attributes left out (values OpenTelemetry
    cannot carry), which the exporter reports."""

    fevex_kind: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    kind: OtelSpanKind
    start_ns: int
    end_ns: int
    error_type: str | None
    attributes: OtelAttributes
    events: tuple[MappedEvent, ...]
    dropped: tuple[str, ...]


def map_span(span: Span) -> MappedSpan:
    """``span`` for OpenTelemetry; a :class:`ValueError` that says what is malformed when its
    ids, times, name or kind are."""
    if not isinstance(span, Span):
        raise ValueError(f"{type(span).__name__} is not a fevex.observability.Span")
    trace_id = parse_hex_id(span.trace_id, 32, "trace_id")
    span_id = parse_hex_id(span.span_id, 16, "span_id")
    parent_span_id = (
        None
        if span.parent_span_id is None
        else parse_hex_id(span.parent_span_id, 16, "parent_span_id")
    )
    if not isinstance(span.name, str) or not span.name:
        raise ValueError("name must be a non-empty string")
    if not isinstance(span.kind, str):
        raise ValueError("kind must be a string")
    _check_time(span.start_ns, "start_ns")
    _check_time(span.end_ns, "end_ns")
    if span.end_ns < span.start_ns:
        raise ValueError("end_ns is before start_ns")

    dropped: list[str] = []
    attributes = _attributes(span.attributes, dropped, "")
    attributes.setdefault("fevex.span.kind", span.kind)
    error_type: str | None = None
    if span.status == "error":
        code = span.error_code or attributes.get("error.type")
        error_type = _text(code) if isinstance(code, str) and code else OTHER_ERROR
        attributes["error.type"] = error_type
    events = []
    for index, event in enumerate(span.events):
        if not isinstance(event.name, str) or not event.name:
            raise ValueError(f"events[{index}].name must be a non-empty string")
        _check_time(event.time_ns, f"events[{index}].time_ns")
        prefix = f"events[{index}]."
        events.append(
            MappedEvent(
                _text(event.name), event.time_ns, _attributes(event.attributes, dropped, prefix)
            )
        )
    return MappedSpan(
        fevex_kind=span.kind,
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent_span_id,
        name=_text(span.name),
        kind=SPAN_KINDS.get(span.kind, OtelSpanKind.INTERNAL),
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        error_type=error_type,
        attributes=attributes,
        events=tuple(events),
        dropped=tuple(dropped),
    )


def _check_time(value: object, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{field} must be a non-negative integer of nanoseconds")


def _text(value: str) -> str:
    # protobuf cannot encode a lone surrogate: one would fail the whole OTLP request.
    return value if value.isascii() else _SURROGATES.sub("\ufffd", value)


def _attributes(given: Mapping[str, object], dropped: list[str], prefix: str) -> OtelAttributes:
    """The attributes OpenTelemetry can carry; the names of the others go to ``dropped``.
    A ``None`` value means unknown and is left out silently."""
    kept: OtelAttributes = {}
    for key, value in given.items():
        if value is None:
            continue
        if not isinstance(key, str) or not key:
            dropped.append(f"{prefix}{key!r}"[:60])
        elif isinstance(value, str):
            kept[_text(key)] = _text(value)
        elif isinstance(value, bool | float) or (isinstance(value, int) and value in _INT64):
            kept[_text(key)] = value
        else:
            dropped.append(f"{prefix}{_text(key)}"[:60])
    return kept
