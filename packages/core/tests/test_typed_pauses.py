"""Pauses are typed: pending approvals with approve() and reject() helpers, on the error,
the run snapshot and the stream; tool input is validated before a reviewer is asked."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    ApprovalDecision,
    PendingApproval,
    RunPausedError,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.errors import FevexRunError
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

charged: list[int] = []


@define_tool(approval="required", risk="sensitive", errors_to_model="input")
def charge(amount: int, currency: str) -> dict[str, Any]:
    """Charge the customer."""
    charged.append(amount)
    return {"charged": amount, "currency": currency}


def billing_app(*responses: dict[str, Any]) -> Any:
    model = FakeModel(*responses)
    agent = define_agent(name="billing", instructions="Bill.", tools=[charge])
    return create_fevex(models={"default": model}, agents=[agent]), model


CALL = {
    "tool_calls": [{"id": "call-1", "name": "charge", "input": {"amount": 30, "currency": "EUR"}}]
}


async def test_a_pause_lists_typed_approvals_whose_helpers_build_the_decision() -> None:
    charged.clear()
    app, _ = billing_app(CALL, {"output": "Charged."})

    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("billing", "Charge 30 EUR")

    (approval,) = paused.value.approvals
    assert isinstance(approval, PendingApproval)
    assert (approval.tool_name, approval.tool_call_id, approval.risk) == (
        "charge",
        "call-1",
        "sensitive",
    )
    assert approval.input == {"amount": 30, "currency": "EUR"}
    assert approval.id == paused.value.pause["approvals"][0]["id"]
    run = await app.get_run(paused.value.run_id)
    assert run.approvals == (approval,)

    decision = approval.approve(actor="reviewer-42")
    assert decision == ApprovalDecision(approval.id, "approve", {"id": "reviewer-42"})
    result = await app.resume_run(paused.value.run_id, decision)

    assert result.output == "Charged."
    assert charged == [30]
    assert (await app.get_run(paused.value.run_id)).approvals == ()


async def test_a_rejection_with_a_reason_reaches_the_model() -> None:
    charged.clear()
    app, model = billing_app(CALL, {"output": "Not charged."})
    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("billing", "Charge 30 EUR")
    (approval,) = paused.value.approvals

    decision = approval.reject(actor={"id": "reviewer-7"}, reason="The card is blocked.")
    assert (decision.decision, decision.reason) == ("reject", "The card is blocked.")
    result = await app.resume_run(paused.value.run_id, decision)

    assert result.output == "Not charged."
    assert charged == []
    (tool_message,) = [m for m in model.calls[1].messages if m.role == "tool"]
    (part,) = tool_message.content
    assert part.output == {
        "code": "TOOL_REJECTED",
        "message": "A reviewer rejected this call of charge: The card is blocked.",
    }
    with pytest.raises(FevexRunError) as refused:
        approval.approve(actor={"name": "no id"})
    assert refused.value.code == "INVALID_ARGUMENT"


async def test_input_that_fails_the_schema_goes_back_to_the_model_without_a_pause() -> None:
    charged.clear()
    invalid = {"tool_calls": [{"id": "call-0", "name": "charge", "input": {"amount": "lots"}}]}
    app, model = billing_app(invalid, CALL, {"output": "Charged."})

    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("billing", "Charge 30 EUR")

    events = await app.list_events(paused.value.run_id)
    (failed,) = [event for event in events if event.type == "tool.failed"]
    assert failed.payload["tool_call_id"] == "call-0"
    assert failed.payload["error"]["code"] == "TOOL_INPUT_INVALID"
    assert failed.payload["retry"] is True
    pauses = [event for event in events if event.type == "run.paused"]
    assert len(pauses) == 1  # for the valid call only
    (approval,) = paused.value.approvals
    assert approval.tool_call_id == "call-1"
    assert len(model.calls) == 2
    assert charged == []


async def test_resume_run_typed_by_a_definition_refuses_a_run_of_another() -> None:
    charged.clear()
    app, _ = billing_app(CALL, {"output": "Charged."})
    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("billing", "Charge 30 EUR")
    (approval,) = paused.value.approvals
    other = define_agent(name="other", instructions="Other.")

    with pytest.raises(FevexRunError) as refused:
        await app.resume_run(paused.value.run_id, approval.approve(actor="r"), definition=other)
    assert refused.value.code == "RUN_DEFINITION_MISMATCH"
    assert charged == []  # nothing changed: the run still waits for its decision

    billing = define_agent(name="billing", instructions="Bill.", tools=[charge])
    result = await app.resume_run(
        paused.value.run_id, approval.approve(actor="r"), definition=billing
    )
    assert result.output == "Charged."


class Verdict(BaseModel):
    verdict: str


async def test_an_agent_step_returns_the_agents_validated_output_also_on_replay() -> None:
    judge = define_agent(name="judge", instructions="Judge.", output_schema=Verdict)
    seen: list[Any] = []

    @define_workflow(name="trial", version="1", events={"go": None})
    async def trial(step: WorkflowStep, input: Any) -> str:
        decided = await step.agent("judge", judge, input="Guilty?")
        seen.append(decided.output)
        await step.wait_for_event("go", "go")
        return decided.output.verdict

    model = FakeModel({"output": {"verdict": "innocent"}})
    app = create_fevex(models={"default": model}, agents=[judge], workflows=[trial])
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow(trial)
    result = await app.send_event(paused.value.run_id, "go")

    assert result.output == "innocent"
    assert seen == [Verdict(verdict="innocent"), Verdict(verdict="innocent")]  # run, replay


async def test_a_workflow_paused_on_a_childs_approval_lists_it_with_the_run_to_resume() -> None:
    charged.clear()
    billing = define_agent(name="billing", instructions="Bill.", tools=[charge])

    @define_workflow(name="checkout", version="1")
    async def checkout(step: WorkflowStep, input: Any) -> Any:
        return (await step.agent("bill", billing, input="Charge 30 EUR")).output

    model = FakeModel(CALL, {"output": "Charged."})
    app = create_fevex(models={"default": model}, agents=[billing], workflows=[checkout])
    with pytest.raises(RunPausedError) as paused:
        await app.run_workflow(checkout)

    (approval,) = paused.value.approvals
    assert approval.tool_call_id == "call-1"
    assert approval.run_id is not None
    assert approval.run_id != paused.value.run_id
    child = await app.get_run(approval.run_id)
    assert (child.kind, child.parent_run_id) == ("agent", paused.value.run_id)
    assert (await app.get_run(paused.value.run_id)).approvals == ()  # its own: none

    await app.resume_run(approval.run_id, approval.approve(actor="reviewer-42"))
    result = await app.resume_run(paused.value.run_id)
    assert result.output == "Charged."
    assert charged == [30]
