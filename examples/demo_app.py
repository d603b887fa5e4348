"""An app to serve and click through, without a provider: tools, an approval and a workflow.

Serve it with the console, from the repository's root:

    fevex serve --ui --app examples.demo_app:app

then open the console URL it prints (http://127.0.0.1:8000/ui/) and start runs from Python:

    from fevex.http import FevexClient
    with FevexClient("http://127.0.0.1:8000") as client:
        client.start_agent("support", "What is the status of account 42?")
        client.start_agent("support", "Refund 30 USD on account 42.")    # waits for approval
        client.start_workflow("refund_review", {"account_id": 7, "amount": 12})

On a loopback address the console decides approvals as you (``--actor NAME`` names someone
else). The model is a :class:`fevex.testing.FunctionModel`: a plain function that looks
accounts up, asks for a refund when the request says "refund", then answers from what the
tools returned, as often as it is asked. Swap in ``"openai:gpt-5-mini"`` for a real one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel

from fevex import Fevex, WorkflowStep, create_fevex, define_agent, define_tool, define_workflow
from fevex.events import Cost
from fevex.models import ModelInput, ModelResult, ToolCall, Usage
from fevex.observability import Observability, TraceExporter
from fevex.testing import FunctionModel

# A made-up price, so that the console has a cost to show: 0.002 USD per 1,000 tokens.
USD_PER_TOKEN = 0.000002


class AccountQuery(BaseModel):
    account_id: int


class Account(BaseModel):
    id: int
    status: str
    balance: int


class RefundRequest(BaseModel):
    account_id: int
    amount: int


class Refund(BaseModel):
    account_id: int
    refunded: int


@define_tool(name="accounts_get", description="Get an account by ID.")
async def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active", balance=100 + query.account_id)


@define_tool(
    name="refunds_issue",
    description="Refund an amount to an account.",
    approval="required",
    idempotency="keyed",
)
async def issue_refund(request: RefundRequest) -> Refund:
    return Refund(account_id=request.account_id, refunded=request.amount)


def support_model(model_input: ModelInput) -> ModelResult | str:
    """Look the account up (or ask for the refund) first, then answer from the tool's output."""
    request = next(message.text for message in model_input.messages if message.role == "user")
    numbers = [int(number) for number in re.findall(r"\d+", request)]
    account_id = numbers[-1] if numbers else 42
    results = [result for message in model_input.messages for result in message.tool_results]
    read = 10 * len(results)
    usage = Usage(input_tokens=120 + read, output_tokens=24, total_tokens=144 + read)
    if not results:
        if "refund" in request.lower():
            amount = numbers[0] if len(numbers) > 1 else 10
            call = ToolCall("call-1", "refunds_issue", {"account_id": account_id, "amount": amount})
        else:
            call = ToolCall("call-1", "accounts_get", {"account_id": account_id})
        return ModelResult(tool_calls=[call], usage=usage)
    last = results[-1]
    if last.is_error:
        text = f"I could not do that: {last.output}"
    elif last.name == "refunds_issue":
        text = f"Refunded {last.output['refunded']} USD to account {last.output['account_id']}."
    else:
        text = (
            f"Account {last.output['id']} is {last.output['status']}, with a balance of "
            f"{last.output['balance']} USD."
        )
    return ModelResult(output=text, usage=usage)


support = define_agent(
    name="support",
    instructions="Answer account questions; refunds need a person's approval.",
    tools=["accounts_get", "refunds_issue"],
)


@define_workflow(name="refund_review", version="1")
async def refund_review(step: WorkflowStep, request: RefundRequest) -> str:
    """Check the account, then refund through the agent (its refund waits for approval)."""
    checked = await step.agent(
        "check", "support", input=f"What is the status of account {request.account_id}?"
    )
    refunded = await step.agent(
        "refund", "support", input=f"Refund {request.amount} USD on account {request.account_id}."
    )
    return f"{checked.output} {refunded.output}"


def price(usage: Usage, model: str | None) -> Cost:
    return Cost(USD_PER_TOKEN * (usage.total_tokens or 0), "USD")


def build_app(run_store: str | None = None, exporters: Sequence[TraceExporter] = ()) -> Fevex:
    """The demo app on ``run_store`` (in memory by default), its spans to ``exporters``."""
    return create_fevex(
        models={"default": FunctionModel(support_model)},
        agents=[support],
        tools=[get_account, issue_refund],
        workflows=[refund_review],
        observability=Observability(exporters=list(exporters), calculate_cost=price),
        run_store=run_store,
    )


app = build_app()
