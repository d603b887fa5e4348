"""Through a real app: an agent run with a tool call, its spans built by the core and handed to
this exporter by ``create_fevex(observability=...)`` or by ``FEVEX_TRACE_EXPORTERS``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

from fevex import create_fevex, define_agent, define_tool
from fevex.observability import InMemoryTraceExporter, Observability
from fevex.testing import FakeModel
from fevex_opentelemetry import create_opentelemetry_exporter

pytestmark = pytest.mark.anyio


class AccountQuery(BaseModel):
    account_id: int


@define_tool(name="accounts_get", description="Get an account by ID.")
async def get_account(query: AccountQuery) -> dict[str, Any]:
    return {"id": query.account_id, "status": "active"}


def support_app(observability: Observability | None) -> Any:
    model = FakeModel(
        {
            "tool_calls": [{"id": "call-1", "name": "accounts_get", "input": {"account_id": 42}}],
            "usage": {"input_tokens": 50, "output_tokens": 7},
        },
        {"output": "Account 42 is active.", "usage": {"input_tokens": 80, "output_tokens": 9}},
    )
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="support", instructions="Answer.", tools=["accounts_get"])],
        tools=[get_account],
        observability=observability,
    )


async def test_a_run_s_spans_reach_opentelemetry_with_fevex_s_ids(
    tracer_provider: TracerProvider,
    finished: InMemorySpanExporter,
    meter_provider: MeterProvider,
    metric_reader: InMemoryMetricReader,
) -> None:
    kept = InMemoryTraceExporter()
    exporter = create_opentelemetry_exporter(tracer_provider, meter_provider)
    app = support_app(Observability(exporters=[kept, exporter]))
    try:
        result = await app.run_agent("support", input="What about account 42?")
        report = await app.flush_observability()
    finally:
        await app.close()

    assert result.output == "Account 42 is active."
    assert (report.failed_exports, report.failures) == (0, ())
    fevex_ids = {(s.trace_id, s.span_id, s.parent_span_id, s.name) for s in kept.spans}
    otel_ids = {
        (
            f"{s.context.trace_id:032x}",
            f"{s.context.span_id:016x}",
            None if s.parent is None else f"{s.parent.span_id:016x}",
            s.name,
        )
        for s in finished.get_finished_spans()
    }
    assert otel_ids == fevex_ids
    assert {s.kind for s in kept.spans} == {"run", "model", "tool"}
    assert len(fevex_ids) == 4  # the run, two model steps, one tool call

    data = metric_reader.get_metrics_data()
    assert data is not None
    (token_usage,) = [
        metric
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "gen_ai.client.token.usage"
    ]
    sums = {p.attributes["gen_ai.token.type"]: p.sum for p in token_usage.data.data_points}
    assert sums == {"input": 130, "output": 16}


def test_fevex_trace_exporters_opens_the_exporter_on_the_global_provider() -> None:
    # In a process of its own: the global tracer provider can be set once per process.
    code = """
        import asyncio, json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from fevex import create_fevex, define_agent
        from fevex.testing import FakeModel

        finished = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(finished))
        trace.set_tracer_provider(provider)

        async def main():
            app = create_fevex(
                models={"default": FakeModel({"output": "hi"})},
                agents=[define_agent(name="support", instructions="Answer.")],
            )
            await app.run_agent("support", input="hello")
            report = await app.flush_observability()
            await app.close()
            return report.failed_exports

        failed = asyncio.run(main())
        print(json.dumps({"failed": failed, "spans": sorted(
            [s.attributes["fevex.span.kind"], s.parent is None]
            for s in finished.get_finished_spans()
        )}))
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FEVEX_", "OTEL_"))}
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**env, "FEVEX_TRACE_EXPORTERS": "opentelemetry"},
        timeout=120,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.splitlines()[-1]) == {
        "failed": 0,
        "spans": [["model", False], ["run", True]],
    }
