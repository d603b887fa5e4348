"""What an exporter receives: finished spans, plain data built from a run's events.

A span is one operation of a run: the run's execution in one process (``run``), a model
step (``model``), a tool call (``tool``), a workflow step (``workflow_step``) or a team
delegation (``team_delegation``). Ids are hexadecimal, as W3C trace context writes them:
``trace_id`` 32 digits, span ids 16. A run's trace id is derived from its root run's id, so
every run of one tree, and every execution of one run (a resume, a recovery in another
process), is one trace. Attribute values are JSON scalars; content (inputs, outputs, error
messages) is only present when the application's :class:`ContentPolicy` includes it, and
is redacted before it is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias, runtime_checkable

__all__ = ["AttributeValue", "Span", "SpanEvent", "SpanKind", "TraceExporter"]

AttributeValue: TypeAlias = str | int | float | bool
SpanKind = Literal["run", "model", "tool", "workflow_step", "team_delegation"]


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """Something that happened during a span (a tool retry), at ``time_ns``."""

    name: str
    time_ns: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Span:
    """One finished operation; times are nanoseconds since the epoch."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    status: Literal["ok", "error"] = "ok"
    # The stable fevex error code of a failed operation (OpenTelemetry's ``error.type``).
    error_code: str | None = None
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()


@runtime_checkable
class TraceExporter(Protocol):
    """Receives finished spans, in batches, off the run path (a background task of the
    app); ``export`` may be sync or async. Whatever it raises, or however long it takes,
    never changes a run: the app counts the failure and goes on."""

    def export(self, spans: Sequence[Span]) -> Awaitable[None] | None: ...
