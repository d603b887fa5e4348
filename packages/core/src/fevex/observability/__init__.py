"""Traces, cost and redaction: what a run did, as spans for the application's exporters."""

from fevex.observability.spans import AttributeValue, Span, SpanEvent, SpanKind, TraceExporter

__all__ = ["AttributeValue", "Span", "SpanEvent", "SpanKind", "TraceExporter"]
