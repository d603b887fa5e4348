"""The README's examples type-check under mypy --strict, and what they get back is typed:
each ``reveal_type`` below must name its expected type, with no ``Any`` in it."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import mypy.api as api

SAMPLE = textwrap.dedent(
    """
    from pydantic import BaseModel

    from fevex import (
        EventDelivery,
        RunPausedError,
        ToolContext,
        WorkflowStep,
        create_fevex,
        define_agent,
        define_tool,
        define_workflow,
    )
    from fevex.teams import TeamMember, TeamStep, define_team
    from fevex.testing import FakeModel


    class Answer(BaseModel):
        answer: str


    class Order(BaseModel):
        text: str


    class Approved(BaseModel):
        approved: bool


    @define_tool
    async def get_account(account_id: int) -> dict[str, int | str]:
        \"\"\"Get an account by its ID.\"\"\"
        return {"id": account_id, "status": "active"}


    @define_tool(approval="required")
    def charge(amount: int, context: ToolContext) -> dict[str, int]:
        \"\"\"Charge the customer.\"\"\"
        return {"charged": amount}


    def send_mail(text: str) -> int:
        return len(text)


    support = define_agent(name="support", instructions="Help.", tools=[get_account],
                           output_schema=Answer)
    writer = define_agent(name="writer", instructions="Write.")


    @define_workflow(name="review", version="2", events={"review.approved": Approved})
    async def review(step: WorkflowStep, order: Order) -> str:
        draft = await step.agent("draft", writer, input=order.text)
        reveal_type(draft.output)  # E: str
        approval: EventDelivery = await step.wait_for_event("approval", "review.approved")
        sent = await step.run("notify", send_mail, draft.output)
        reveal_type(sent)  # E: int
        return f"{sent} {approval.received_at}"


    @define_team(name="software", supervisor="writer", members=[TeamMember(agent="writer")])
    async def software(team: TeamStep, request: str) -> Answer:
        plan = await team.delegate("plan", agent=writer, task=request)
        reveal_type(plan.output)  # E: str
        return Answer(answer=plan.output)


    reveal_type(get_account)  # E: TOOL
    reveal_type(review)  # E: WORKFLOW
    reveal_type(software)  # E: TEAM

    model = FakeModel()
    app = create_fevex(models={"default": model}, agents=[support, writer],
                       tools=[charge], workflows=[review], teams=[software])
    result = app.run_agent_sync(support, input="What is the status of account 42?")
    reveal_type(result.output)  # E: readme_examples.Answer


    async def main() -> None:
        try:
            await app.run_agent(support, "Charge 30 EUR")
        except RunPausedError as paused:
            (approval,) = paused.approvals
            reveal_type(approval)  # E: fevex.errors.PendingApproval
            resumed = await app.resume_run(
                paused.run_id, approval.approve(actor="reviewer-42"), definition=support
            )
            reveal_type(resumed.output)  # E: readme_examples.Answer
            decision = approval.reject(actor="reviewer-42", reason="Blocked card.")
            reveal_type(decision)  # E: fevex.errors.ApprovalDecision
        done = await app.run_workflow(review, Order(text="..."))
        reveal_type(done.output)  # E: str
        team = await app.run_team(software, "Add a login page")
        reveal_type(team.output)  # E: readme_examples.Answer
        stored = await app.get_run(done.run_id)
        reveal_type(stored.output)  # E: JSON
    """
)


# The longer expectations, by the name the sample's comment gives.
NAMED = {
    "TOOL": "fevex.tools.definition.ToolDefinition[dict[str, object], dict[str, int | str]]",
    "WORKFLOW": "fevex.workflows.definition.WorkflowDefinition[readme_examples.Order, str]",
    "TEAM": "fevex.teams.definition.TeamDefinition[str, readme_examples.Answer]",
    # fevex.runtime.JsonValue, as mypy spells the alias out (bool folded into int).
    "JSON": "int | float | str | list[bool | int | float | str | list[...] | "
    "dict[str, ...] | None] | dict[str, bool | int | float | str | list[...] | "
    "dict[str, ...] | None] | None",
}


def test_the_readme_examples_are_typed_without_any(tmp_path: Path) -> None:
    sample = tmp_path / "readme_examples.py"
    sample.write_text(SAMPLE, encoding="utf-8")
    report, errors, _ = api.run(
        [
            "--strict",
            "--python-version=3.11",
            "--no-incremental",
            f"--cache-dir={tmp_path / 'mypy-cache'}",
            "--config-file=",
            str(sample),
        ]
    )
    lines = SAMPLE.splitlines()
    expected = {
        number: NAMED.get(match.group(1).strip(), match.group(1).strip())
        for number, line in enumerate(lines, start=1)
        if (match := re.search(r"reveal_type\(.*\)  # E: (.*)$", line))
    }
    revealed: dict[int, str] = {}
    others: list[str] = []
    for line in report.splitlines():
        match = re.match(rf"{re.escape(str(sample))}:(\d+): note: Revealed type is \"(.*)\"", line)
        if match:
            revealed[int(match.group(1))] = match.group(2)
        elif ": error:" in line:
            others.append(line)
    assert others == [], report + errors
    assert len(expected) == 13
    assert revealed == expected, report
    assert not any("Any" in shown for shown in revealed.values())
