"""Traces, cost and redaction: what a run did, as spans for the application's exporters."""

from fevex.events.cost import Cost, CostCalculator
from fevex.observability.configuration import Observability
from fevex.observability.content import (
    DEFAULT_SENSITIVE_KEYS,
    REDACTED,
    ContentKind,
    ContentPolicy,
    redact_sensitive_keys,
)
from fevex.observability.in_memory import InMemoryTraceExporter
from fevex.observability.report import ExportFailure, ObservabilityReport
from fevex.observability.spans import AttributeValue, Span, SpanEvent, SpanKind, TraceExporter

__all__ = [
    "DEFAULT_SENSITIVE_KEYS",
    "REDACTED",
    "AttributeValue",
    "ContentKind",
    "ContentPolicy",
    "Cost",
    "CostCalculator",
    "ExportFailure",
    "InMemoryTraceExporter",
    "Observability",
    "ObservabilityReport",
    "Span",
    "SpanEvent",
    "SpanKind",
    "TraceExporter",
    "redact_sensitive_keys",
]
