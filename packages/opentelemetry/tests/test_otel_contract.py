"""The trace-exporter conformance check of ``fevex.testing``, run against this exporter."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fevex.testing import check_trace_exporter
from fevex_opentelemetry import create_opentelemetry_exporter

pytestmark = pytest.mark.anyio


async def test_the_exporter_passes_the_trace_exporter_contract(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    spans = await check_trace_exporter(create_opentelemetry_exporter(tracer_provider))

    exported = {
        (f"{s.context.span_id:016x}", None if s.parent is None else f"{s.parent.span_id:016x}")
        for s in finished.get_finished_spans()
    }
    assert exported == {(span.span_id, span.parent_span_id) for span in spans}
    assert {s.context.trace_id for s in finished.get_finished_spans()} == {
        int(span.trace_id, 16) for span in spans
    }
