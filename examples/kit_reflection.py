"""Reflection over run history: ask why a run failed, and get a report whose observations
cite the evidence the reflection read. Its model sees run metadata only: the secret in
the failed run's input never reaches it.

Run it with ``python examples/kit_reflection.py``; the models are scripted functions
(``fevex.testing.FunctionModel``), so it needs no key and no network.
"""

from __future__ import annotations

import json
from typing import Any

from fevex import FevexRunError, create_fevex, define_agent, define_tool
from fevex.kits.reflection import define_reflection, run_history_source
from fevex.models import ModelInput, ModelResult, ToolCall
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel, model_input_json

SECRET = "card 4111-1111-1111-1111"


@define_tool(name="refund", description="Refund a payment.")
def refund(payment: str) -> str:
    raise RuntimeError("the processor refused the card")


def support_model(model_input: ModelInput) -> ModelResult:
    return ModelResult(tool_calls=[ToolCall("call-1", "refund", {"payment": "p-7"})])


def reflector(model_input: ModelInput) -> ModelResult | str:
    """A scripted reflection: discover runs, read the failed one, cite what it read."""
    last = model_input.messages[-1]
    seen: Any = getattr(last.content[-1], "output", None) if last.role == "tool" else None
    if seen is None:
        return ModelResult(tool_calls=[ToolCall("q1", "history_query", {"action": "discover"})])
    if "accepted" in seen:
        return "Reported."
    items = seen["items"]
    if items[0]["type"] == "run":
        failed = next(item for item in items if item["status"] == "failed")
        call = {"action": "read", "run_id": failed["run_id"]}
        return ModelResult(tool_calls=[ToolCall("q2", "history_query", call)])
    cited = [item["evidence_id"] for item in items if item.get("error_code")]
    report = {
        "observed": [{"statement": "The refund run failed on its tool.", "evidence": cited}],
        "hypotheses": [{"statement": "The payment processor refuses these refunds."}],
        "recommendations": ["Check the processor's refusals before retrying."],
    }
    return ModelResult(
        tool_calls=[ToolCall("q3", "history_query", {"action": "submit", "report": report})]
    )


def may_read(query: dict[str, Any], context: ExecutionContext) -> None:
    if context.actor is None or context.actor["type"] != "auditor":
        raise PermissionError("only auditors read run history")


def may_ask(question: str, context: ExecutionContext) -> None:
    if context.namespace is None:
        raise PermissionError("a reflection is asked within a namespace")


reflect = define_reflection(
    model="reflector",
    source=run_history_source(authorize=may_read),
    authorize=may_ask,
    max_calls=4,
    reserve_calls=1,
    max_pages=4,
    max_events=64,
    max_evidence_chars=12_000,
)
support = define_agent(name="support", instructions="Refund when asked.", tools=[refund])
context = ExecutionContext(actor={"id": "ana", "type": "auditor"}, namespace="shop")

reflector_model = FunctionModel(reflector)

with create_fevex(
    models={"default": FunctionModel(support_model), "reflector": reflector_model},
    agents=[support, reflect.agent],
) as app:
    try:
        app.run_agent_sync("support", f"Refund p-7 ({SECRET}).", context=context)
    except FevexRunError as error:
        print("support run failed:", error.code)
    report = reflect.run_sync(app, "Why did the refund fail?", context=context)
    for finding in report.observed:
        print("observed:", finding.statement, list(finding.evidence))
    for hypothesis in report.hypotheses:
        print("hypothesis:", hypothesis.statement)
    print(
        "coverage:", report.coverage.runs_read, "run read,", report.coverage.events_read, "events"
    )
    print("reflection run:", app.get_run_sync(report.run_id).status)
    requests = json.dumps([model_input_json(call) for call in reflector_model.calls])
    print("the secret reached the model:", SECRET in requests)
