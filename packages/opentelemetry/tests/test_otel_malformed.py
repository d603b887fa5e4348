"""Hostile batches: a malformed span is named in a clear error after every well-formed span
of its batch was exported; a failing span processor costs only its own span."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_test_spans import RUN_SPAN_ID, TRACE_ID, model_span, run_span, run_trace, tool_span

from fevex.errors import FevexError
from fevex.observability import SpanEvent
from fevex_opentelemetry import create_opentelemetry_exporter

pytestmark = pytest.mark.anyio

GOOD = {"invoke_agent support", "chat gpt-5-mini", "execute_tool lookup_account"}


def names(finished: InMemorySpanExporter) -> set[str]:
    return {span.name for span in finished.get_finished_spans()}


MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "trace id not hex": (
        {"trace_id": "zz" * 16},
        "trace_id must be 32 hexadecimal digits, got 'zzzz",
    ),
    "trace id too short": ({"trace_id": "abc"}, "trace_id must be 32 hexadecimal digits"),
    "span id with a sign": ({"span_id": "-0f067aa0ba902b7"}, "span_id must be 16 hexadecimal"),
    "span id all zeros": ({"span_id": "0" * 16}, "span_id is all zeros"),
    "span id not a string": ({"span_id": 42}, "span_id must be 16 hexadecimal digits, got 42"),
    "empty parent id": ({"parent_span_id": ""}, "parent_span_id must be 16 hexadecimal"),
    "negative start": ({"start_ns": -1}, "start_ns must be a non-negative integer"),
    "float end": ({"end_ns": 1.5e18}, "end_ns must be a non-negative integer"),
    "end before start": ({"end_ns": 1}, "end_ns is before start_ns"),
    "empty name": ({"name": ""}, "name must be a non-empty string"),
    "event time": (
        {"events": (SpanEvent("fevex.tool.retry", -5),)},
        "events[0].time_ns must be a non-negative integer",
    ),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_malformed_span_is_reported_and_the_rest_of_its_batch_exported(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter, case: str
) -> None:
    changes, reason = MALFORMED[case]
    bad = model_span(**({"span_id": "b7ad6b71692033ff", "name": "chat broken"} | changes))
    model, tool, run = run_trace()

    with pytest.raises(FevexError) as raised:
        await create_opentelemetry_exporter(tracer_provider).export([model, bad, tool, run])

    assert raised.value.code == "TRACE_SPAN_INVALID"
    assert raised.value.message.startswith(
        "OpenTelemetry export of 4 spans: 1 malformed, not exported. model span "
    )
    assert reason in raised.value.message
    assert names(finished) == GOOD


async def test_something_that_is_no_span_is_reported_too(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    batch: list[Any] = [{"trace_id": TRACE_ID, "span_id": RUN_SPAN_ID}, *run_trace()]

    with pytest.raises(FevexError, match=r"a dict: dict is not a fevex.observability.Span"):
        await create_opentelemetry_exporter(tracer_provider).export(batch)

    assert names(finished) == GOOD


async def test_attribute_values_opentelemetry_cannot_carry_are_named_never_quoted(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    attributes: dict[str, Any] = {
        "fevex.input": ["sk-live-secret-value"],
        "fevex.options": {"api_key": "sk-live-secret-value"},
        "gen_ai.response.model": None,
        "gen_ai.request.model": "gpt-5-mini",
    }

    with pytest.raises(FevexError) as raised:
        await create_opentelemetry_exporter(tracer_provider).export(
            [model_span(attributes=attributes)]
        )

    error = raised.value
    assert error.code == "TRACE_SPAN_INVALID"
    assert "1 exported without some attributes" in error.message
    assert "fevex.input, fevex.options" in error.message
    assert "sk-live" not in str(error.to_json()) + str(error.details)
    (exported,) = finished.get_finished_spans()
    # None means unknown: left out without a word.
    assert dict(exported.attributes or {}) == {
        "gen_ai.request.model": "gpt-5-mini",
        "fevex.span.kind": "model",
    }


async def test_a_long_list_of_problems_is_summed_up(
    tracer_provider: TracerProvider, finished: InMemorySpanExporter
) -> None:
    broken = [model_span(span_id=f"{index:015x}g", name=f"chat {index}") for index in range(12)]

    with pytest.raises(FevexError) as raised:
        await create_opentelemetry_exporter(tracer_provider).export([*broken, run_span()])

    assert "12 malformed, not exported" in raised.value.message
    assert raised.value.message.endswith("; and 7 more.")
    assert len(raised.value.details["skipped"]) == 12
    assert names(finished) == {"invoke_agent support"}


class FailingProcessor(SpanProcessor):
    """An application's span processor that raises for one span name."""

    def __init__(self, name: str, when: str) -> None:
        self.name = name
        self.when = when

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        if self.when == "start" and span.name == self.name:
            raise RuntimeError("processor broke on start")

    def on_end(self, span: ReadableSpan) -> None:
        if self.when == "end" and span.name == self.name:
            raise RuntimeError("processor broke on end")


@pytest.mark.parametrize("when", ["start", "end"])
async def test_a_span_processor_that_raises_costs_only_its_own_span(
    finished: InMemorySpanExporter, when: str
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(FailingProcessor("execute_tool lookup_account", when))
    provider.add_span_processor(SimpleSpanProcessor(finished))

    with pytest.raises(FevexError) as raised:
        await create_opentelemetry_exporter(provider).export([tool_span(), *run_trace()[::2]])

    assert raised.value.code == "TRACE_EXPORT_FAILED"
    assert "1 failed in the OpenTelemetry SDK" in raised.value.message
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert names(finished) == {"invoke_agent support", "chat gpt-5-mini"}
    provider.shutdown()
