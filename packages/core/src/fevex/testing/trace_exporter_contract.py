"""The shared contract check every trace exporter runs against itself."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence

from fevex.errors import FevexRunError
from fevex.observability.spans import Span, SpanEvent, TraceExporter

__all__ = ["check_trace_exporter", "contract_spans"]

_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def contract_spans() -> list[Span]:
    """One finished span of every kind, linked as a run's spans are: a run with a model
    step, a tool call that was retried and failed, a workflow step, a team delegation and
    the delegation's child run; every attribute value type appears."""
    base = 1_767_225_600_000_000_000
    run = Span(
        _TRACE,
        "00f067aa0ba902b7",
        None,
        "invoke_agent support",
        "run",
        base,
        base + 9_000_000,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support",
            "fevex.run.id": "run_contract",
            "gen_ai.usage.input_tokens": 30,
            "fevex.cost.amount": 0.25,
            "fevex.interrupted": False,
        },
    )
    model = Span(
        _TRACE,
        "10f067aa0ba902b7",
        run.span_id,
        "chat gpt-5-mini",
        "model",
        base + 1_000_000,
        base + 2_000_000,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-5-mini"},
    )
    tool = Span(
        _TRACE,
        "20f067aa0ba902b7",
        run.span_id,
        "execute_tool accounts_get",
        "tool",
        base + 2_000_000,
        base + 3_000_000,
        "error",
        "TOOL_FAILED",
        {"gen_ai.operation.name": "execute_tool", "error.type": "TOOL_FAILED"},
        (SpanEvent("fevex.tool.retry", base + 2_500_000, {"fevex.tool.attempt": 1}),),
    )
    step = Span(
        _TRACE,
        "30f067aa0ba902b7",
        run.span_id,
        "fevex.workflow.step draft",
        "workflow_step",
        base + 3_000_000,
        base + 4_000_000,
        attributes={"fevex.workflow.step.id": "draft", "fevex.workflow.step.kind": "run"},
    )
    delegation = Span(
        _TRACE,
        "40f067aa0ba902b7",
        run.span_id,
        "fevex.team.delegation research",
        "team_delegation",
        base + 4_000_000,
        base + 8_000_000,
        attributes={"fevex.workflow.step.id": "research", "gen_ai.agent.name": "researcher"},
    )
    child = Span(
        _TRACE,
        "50f067aa0ba902b7",
        delegation.span_id,
        "invoke_agent researcher",
        "run",
        base + 5_000_000,
        base + 7_000_000,
        attributes={"gen_ai.operation.name": "invoke_agent", "fevex.parent_run.id": "run_x"},
    )
    return [run, model, tool, step, delegation, child]


async def check_trace_exporter(
    exporter: TraceExporter, *, timeout: float = 10.0, concurrency: int = 8
) -> list[Span]:
    """Check that ``exporter`` takes what fevex gives exporters, within ``timeout`` seconds
    per call: an empty batch; a batch with one span of every kind (see
    :func:`contract_spans`); the same spans one per call; and ``concurrency`` calls at once
    (an async ``export`` as concurrent tasks, a plain one from as many threads, as fevex
    never does but an application sharing the exporter may). Raises
    :class:`~fevex.FevexRunError` ``TRACE_EXPORTER_CONTRACT_VIOLATION`` on the first call
    that raises, runs past ``timeout`` or returns something other than ``None`` or an
    awaitable; returns the spans it exported."""
    export = getattr(exporter, "export", None)
    if not callable(export):
        raise _violation(f"{type(exporter).__name__} has no export(spans) method.")
    spans = contract_spans()
    await _call(exporter, [], timeout, "an empty batch")
    await _call(exporter, spans, timeout, "a batch of every kind of span")
    for span in spans:
        await _call(exporter, [span], timeout, f"a batch of one {span.kind} span")
    # A plain export is called from worker threads (see _call): these calls overlap.
    await asyncio.gather(
        *(_call(exporter, spans, timeout, "concurrent batches") for _ in range(concurrency))
    )
    return spans


async def _call(exporter: TraceExporter, spans: Sequence[Span], timeout: float, what: str) -> None:
    name = type(exporter).__name__
    try:
        async with asyncio.timeout(timeout):
            if inspect.iscoroutinefunction(exporter.export):
                result = await exporter.export(spans)
            else:
                result = await asyncio.to_thread(exporter.export, spans)
            if inspect.isawaitable(result):
                result = await result
    except TimeoutError:
        raise _violation(f"{name}.export took longer than {timeout} s for {what}.") from None
    except FevexRunError:
        raise
    except Exception as error:
        raise _violation(
            f"{name}.export raised {type(error).__name__} for {what}: {error}"
        ) from error
    if result is not None:
        raise _violation(f"{name}.export returned {type(result).__name__} for {what}, not None.")


def _violation(message: str) -> FevexRunError:
    return FevexRunError("TRACE_EXPORTER_CONTRACT_VIOLATION", message, category="plugin")
