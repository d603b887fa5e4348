"""fevex spans as the core hands them to exporters: one run with a model step and a tool
call that was retried and failed, built by hand so the tests need no run."""

from __future__ import annotations

from typing import Any

from fevex.observability import Span, SpanEvent

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
RUN_SPAN_ID = "00f067aa0ba902b7"
MODEL_SPAN_ID = "b7ad6b7169203331"
TOOL_SPAN_ID = "c1a2b3c4d5e6f708"
T0 = 1_700_000_000_000_000_000


def run_span(**changes: Any) -> Span:
    fields: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": RUN_SPAN_ID,
        "parent_span_id": None,
        "name": "invoke_agent support",
        "kind": "run",
        "start_ns": T0,
        "end_ns": T0 + 3_000_000_000,
        "attributes": {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support",
            "fevex.run.id": "run_01",
        },
    }
    return Span(**(fields | changes))


def model_span(**changes: Any) -> Span:
    fields: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": MODEL_SPAN_ID,
        "parent_span_id": RUN_SPAN_ID,
        "name": "chat gpt-5-mini",
        "kind": "model",
        "start_ns": T0 + 100_000_000,
        "end_ns": T0 + 1_350_000_000,
        "attributes": {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-5-mini",
            "gen_ai.response.model": "gpt-5-mini-2025-08-07",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 30,
            "fevex.step": 1,
            "fevex.cost": 0.0125,
        },
    }
    return Span(**(fields | changes))


def tool_span(**changes: Any) -> Span:
    fields: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": TOOL_SPAN_ID,
        "parent_span_id": RUN_SPAN_ID,
        "name": "execute_tool lookup_account",
        "kind": "tool",
        "start_ns": T0 + 1_400_000_000,
        "end_ns": T0 + 2_900_000_000,
        "status": "error",
        "error_code": "TOOL_FAILED",
        "attributes": {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup_account",
            "gen_ai.tool.call.id": "call_1",
            "fevex.tool.attempts": 2,
            "fevex.tool.retried": True,
        },
        "events": (SpanEvent("fevex.tool.retry", T0 + 2_000_000_000, {"fevex.tool.attempt": 1}),),
    }
    return Span(**(fields | changes))


def run_trace() -> list[Span]:
    """In the order the core finishes them: children before their run."""
    return [model_span(), tool_span(), run_span()]
