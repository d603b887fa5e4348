"""The fevex trace exporter that hands spans to the application's OpenTelemetry providers.

The application owns OpenTelemetry: it installs the SDK, sets up processors and the OTLP
exporter, and shuts them down. This exporter only creates spans on a tracer of the given
(or global) tracer provider and records metrics on a meter of the given (or global) meter
provider. Each fevex span becomes one OpenTelemetry span with the same trace id, span id and
parent span id, started and ended at fevex's times, so a trace that a resume or a recovery
continues in another process stays one trace.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider, get_meter_provider
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from fevex.observability import Span
from fevex_opentelemetry.__about__ import __version__
from fevex_opentelemetry.errors import SpanProblem, export_error
from fevex_opentelemetry.gen_ai_metrics import INSTRUMENTATION_SCOPE, GenAIMetrics
from fevex_opentelemetry.span_ids import give_preset_ids, preset_ids
from fevex_opentelemetry.span_mapping import MappedSpan, map_span

__all__ = ["OpenTelemetryExporter"]

logger = logging.getLogger("fevex.opentelemetry")

# A parent exported elsewhere (another batch, another process) is remote, and sampled: the
# application's sampler decides for a root span by its trace id, and its usual parent-based
# sampler then keeps the trace's children.
_REMOTE_PARENT_FLAGS = TraceFlags(TraceFlags.SAMPLED)


class OpenTelemetryExporter:
    """A :class:`fevex.observability.TraceExporter` over OpenTelemetry providers.

    ``tracer_provider=None`` means the global one at the time of each export, so the
    exporter can be created before the application sets it up. A provider whose tracers
    cannot be given fevex's ids (the API's no-op provider, used until an SDK provider is
    set) gets no spans, and no error. ``meter_provider=None`` means the global one.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self._tracer_provider = tracer_provider
        self._metrics = GenAIMetrics(meter_provider or get_meter_provider())
        self._resolved: tuple[trace.TracerProvider, trace.Tracer | None] | None = None

    async def export(self, spans: Sequence[Span]) -> None:
        """Export ``spans``; every well-formed one is exported even when others are not,
        then a :class:`~fevex.FevexError` (``TRACE_SPAN_INVALID``, ``TRACE_EXPORT_FAILED``)
        names what went wrong. The work runs in a worker thread: the application's span
        processors may block (a simple processor exports over the network as a span ends)."""
        await asyncio.to_thread(self._export, list(spans))

    def _export(self, spans: list[Span]) -> None:
        tracer = self._tracer()
        skipped: list[SpanProblem] = []
        trimmed: list[SpanProblem] = []
        failed: list[SpanProblem] = []
        cause: BaseException | None = None
        for span in spans:
            try:
                mapped = map_span(span)
            except ValueError as error:
                skipped.append((_named(span), str(error)))
                continue
            try:
                if tracer is not None:
                    _emit(tracer, mapped)
                self._metrics.record(mapped)
            except Exception as error:
                failed.append((_named(span), type(error).__name__))
                cause = cause or error
                continue
            if mapped.dropped:
                names = ", ".join(mapped.dropped)
                trimmed.append((_named(span), f"attributes not str, bool, int64 or float: {names}"))
        if skipped or trimmed or failed:
            raise export_error(len(spans), skipped, trimmed, failed, cause)

    def _tracer(self) -> trace.Tracer | None:
        """The tracer of the provider in force, once given fevex's ids; None when it cannot
        be. Looked up again only when the provider changes (the global one being set)."""
        provider = self._tracer_provider or trace.get_tracer_provider()
        resolved = self._resolved
        if resolved is not None and resolved[0] is provider:
            return resolved[1]
        tracer: trace.Tracer | None = provider.get_tracer(INSTRUMENTATION_SCOPE, __version__)
        if not give_preset_ids(tracer):
            logger.debug(
                "%s cannot be given fevex's span ids; spans are not exported to it",
                type(provider).__name__,
            )
            tracer = None
        self._resolved = (provider, tracer)
        return tracer


def _emit(tracer: trace.Tracer, span: MappedSpan) -> None:
    # An empty context, never the current one: an application span current in this thread
    # must not become the parent of a fevex root span.
    context = Context()
    if span.parent_span_id is not None:
        parent = SpanContext(
            span.trace_id, span.parent_span_id, is_remote=True, trace_flags=_REMOTE_PARENT_FLAGS
        )
        context = trace.set_span_in_context(NonRecordingSpan(parent), context)
    with preset_ids(span.trace_id, span.span_id):
        otel_span = tracer.start_span(
            span.name,
            context=context,
            kind=span.kind,
            attributes=span.attributes,
            start_time=span.start_ns,
        )
    for event in span.events:
        otel_span.add_event(event.name, event.attributes, timestamp=event.time_ns)
    if span.error_type is not None:
        otel_span.set_status(Status(StatusCode.ERROR, span.error_type))
    otel_span.end(end_time=span.end_ns)


def _named(span: object) -> str:
    """How a problem names its span: kind, name and span id, shortened."""
    if not isinstance(span, Span):
        return f"a {type(span).__name__}"
    return f"{span.kind} span {span.name!r:.60} ({span.span_id!r:.40})"
