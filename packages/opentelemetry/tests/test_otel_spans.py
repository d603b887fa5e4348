"""Each fevex span becomes one OpenTelemetry span with fevex's ids, kind, times, attributes,
status and events, read back from the SDK's in-memory span exporter."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from otel_test_spans import (
    MODEL_SPAN_ID,
    RUN_SPAN_ID,
    T0,
    TOOL_SPAN_ID,
    TRACE_ID,
    model_span,
    run_span,
    run_trace,
    tool_span,
)

from fevex_opentelemetry import create_opentelemetry_exporter

pytestmark = pytest.mark.anyio


def by_name(finished: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {span.name: span for span in finished.get_finished_spans()}


def hex_ids(span: ReadableSpan) -> tuple[str, str, str | None]:
    context = span.get_span_context()
    assert context is not None
    parent = None if span.parent is None else f"{span.parent.span_id:016x}"
    return f"{context.trace_id:032x}", f"{context.span_id:016x}", parent


async def test_each_span_keeps_its_trace_span_and_parent_ids(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    await create_opentelemetry_exporter(tracer_provider).export(run_trace())

    spans = by_name(finished)
    assert hex_ids(spans["invoke_agent support"]) == (TRACE_ID, RUN_SPAN_ID, None)
    assert hex_ids(spans["chat gpt-5-mini"]) == (TRACE_ID, MODEL_SPAN_ID, RUN_SPAN_ID)
    assert hex_ids(spans["execute_tool lookup_account"]) == (TRACE_ID, TOOL_SPAN_ID, RUN_SPAN_ID)


async def test_a_child_exported_in_an_earlier_batch_links_to_its_parent(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    # Two exporters on one provider: the batches of two processes continuing one run.
    await create_opentelemetry_exporter(tracer_provider).export([model_span()])
    await create_opentelemetry_exporter(tracer_provider).export([run_span()])

    child, root = finished.get_finished_spans()
    assert child.parent is not None
    assert child.parent.span_id == root.context.span_id
    assert child.context.trace_id == root.context.trace_id == int(TRACE_ID, 16)


async def test_a_root_span_stays_a_root_under_a_current_application_span(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    application = tracer_provider.get_tracer("the-application")
    with application.start_as_current_span("handle request"):
        await create_opentelemetry_exporter(tracer_provider).export([run_span()])

    spans = by_name(finished)
    assert hex_ids(spans["invoke_agent support"]) == (TRACE_ID, RUN_SPAN_ID, None)


async def test_the_provider_s_other_tracers_keep_drawing_their_own_ids(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    exporter = create_opentelemetry_exporter(tracer_provider)
    await exporter.export([run_span()])
    application = tracer_provider.get_tracer("the-application")
    application.start_span("after").end()
    await exporter.export([model_span()])
    application.start_span("again").end()

    spans = by_name(finished)
    theirs = [spans["after"].context, spans["again"].context]
    assert {context.trace_id for context in theirs}.isdisjoint({int(TRACE_ID, 16)})
    assert theirs[0].trace_id != theirs[1].trace_id
    assert {context.span_id for context in theirs}.isdisjoint(
        {int(RUN_SPAN_ID, 16), int(MODEL_SPAN_ID, 16)}
    )


async def test_concurrent_exports_give_every_span_its_own_ids(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    exporter = create_opentelemetry_exporter(tracer_provider)
    batches = [
        [
            model_span(trace_id=f"{run:032x}", span_id=f"{run:08x}{step:08x}", name=f"chat {run}")
            for step in range(1, 21)
        ]
        for run in range(1, 9)
    ]

    await asyncio.gather(*(exporter.export(batch) for batch in batches))

    exported = {
        (f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}", s.name)
        for s in finished.get_finished_spans()
    }
    assert exported == {(s.trace_id, s.span_id, s.name) for batch in batches for s in batch}


async def test_kinds_times_and_attributes_pass_through(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    await create_opentelemetry_exporter(tracer_provider).export(run_trace())

    spans = by_name(finished)
    model = spans["chat gpt-5-mini"]
    assert model.kind is SpanKind.CLIENT
    assert spans["invoke_agent support"].kind is SpanKind.INTERNAL
    assert spans["execute_tool lookup_account"].kind is SpanKind.INTERNAL
    assert (model.start_time, model.end_time) == (T0 + 100_000_000, T0 + 1_350_000_000)
    assert dict(model.attributes or {}) == {
        **model_span().attributes,
        "fevex.span.kind": "model",
    }
    assert model.status.status_code is StatusCode.UNSET


async def test_a_failed_span_has_error_status_and_its_error_code_as_error_type(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    await create_opentelemetry_exporter(tracer_provider).export(
        [tool_span(), model_span(status="error", error_code=None)]
    )

    spans = by_name(finished)
    tool = spans["execute_tool lookup_account"]
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.status.description == "TOOL_FAILED"
    assert (tool.attributes or {})["error.type"] == "TOOL_FAILED"
    # Failed without a code: the conventions' fallback value.
    assert (spans["chat gpt-5-mini"].attributes or {})["error.type"] == "_OTHER"


async def test_span_events_keep_their_names_times_and_attributes(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    await create_opentelemetry_exporter(tracer_provider).export([tool_span()])

    (tool,) = finished.get_finished_spans()
    (retry,) = tool.events
    assert (retry.name, retry.timestamp) == ("fevex.tool.retry", T0 + 2_000_000_000)
    assert dict(retry.attributes or {}) == {"fevex.tool.attempt": 1}


async def test_a_provider_that_cannot_take_fevex_ids_gets_nothing_and_no_error() -> None:
    for provider in (trace.NoOpTracerProvider(), trace.ProxyTracerProvider()):
        assert await create_opentelemetry_exporter(provider).export(run_trace()) is None
