"""The GenAI client metrics of model steps, read back with the SDK's in-memory reader."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider
from otel_test_spans import model_span, run_span, run_trace, tool_span

from fevex_opentelemetry import create_opentelemetry_exporter

pytestmark = pytest.mark.anyio

MODEL_ATTRIBUTES = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-5-mini",
    "gen_ai.response.model": "gpt-5-mini-2025-08-07",
}


def histograms(reader: InMemoryMetricReader) -> dict[str, tuple[str, list[HistogramDataPoint]]]:
    """Each metric's unit and data points."""
    data = reader.get_metrics_data()
    found: dict[str, tuple[str, list[HistogramDataPoint]]] = {}
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points: list[Any] = list(metric.data.data_points)
                found[metric.name] = (metric.unit or "", points)
    return found


async def test_token_usage_is_recorded_by_token_type(
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    metric_reader: InMemoryMetricReader,
) -> None:
    exporter = create_opentelemetry_exporter(tracer_provider, meter_provider)
    await exporter.export(
        [*run_trace(), model_span(span_id="b7ad6b7169203332", attributes=model_span().attributes)]
    )

    unit, points = histograms(metric_reader)["gen_ai.client.token.usage"]
    assert unit == "{token}"
    by_type = {point.attributes["gen_ai.token.type"]: point for point in points}
    assert set(by_type) == {"input", "output"}
    assert (by_type["input"].count, by_type["input"].sum) == (2, 240)
    assert (by_type["output"].count, by_type["output"].sum) == (2, 60)
    for token_type, point in by_type.items():
        assert dict(point.attributes) == {**MODEL_ATTRIBUTES, "gen_ai.token.type": token_type}
    # The conventions' advised buckets: powers of 4 from 1 to 4**13 tokens.
    assert list(by_type["input"].explicit_bounds) == [4.0**power for power in range(14)]


async def test_operation_duration_is_recorded_in_seconds_with_the_error_type(
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    metric_reader: InMemoryMetricReader,
) -> None:
    failed = model_span(
        span_id="b7ad6b7169203339",
        status="error",
        error_code="PROVIDER_RATE_LIMITED",
        end_ns=model_span().start_ns + 500_000_000,
    )
    await create_opentelemetry_exporter(tracer_provider, meter_provider).export(
        [model_span(), failed]
    )

    unit, points = histograms(metric_reader)["gen_ai.client.operation.duration"]
    assert unit == "s"
    by_outcome = {point.attributes.get("error.type"): point for point in points}
    assert dict(by_outcome[None].attributes) == MODEL_ATTRIBUTES
    assert by_outcome[None].sum == pytest.approx(1.25)
    assert dict(by_outcome["PROVIDER_RATE_LIMITED"].attributes) == {
        **MODEL_ATTRIBUTES,
        "error.type": "PROVIDER_RATE_LIMITED",
    }
    assert by_outcome["PROVIDER_RATE_LIMITED"].sum == pytest.approx(0.5)
    assert by_outcome[None].explicit_bounds[:3] == (0.01, 0.02, 0.04)


async def test_only_model_steps_are_measured(
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    metric_reader: InMemoryMetricReader,
) -> None:
    # A tool or a run carrying token counts (a run's total) is no model call.
    tokens = {"gen_ai.usage.input_tokens": 500, "gen_ai.usage.output_tokens": 90}
    await create_opentelemetry_exporter(tracer_provider, meter_provider).export(
        [tool_span(attributes=tokens), run_span(attributes=tokens)]
    )

    assert histograms(metric_reader) == {}


async def test_metrics_are_recorded_when_the_tracer_provider_takes_no_spans(
    meter_provider: MeterProvider, metric_reader: InMemoryMetricReader
) -> None:
    exporter = create_opentelemetry_exporter(NoOpTracerProvider(), meter_provider)
    await exporter.export([model_span()])

    assert set(histograms(metric_reader)) == {
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
    }
