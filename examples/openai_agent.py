"""An agent on a real OpenAI model: a tool call, then a structured answer.

Run it with:  OPENAI_API_KEY=sk-... python examples/openai_agent.py
It needs the plugin:  pip install "fevex[openai]"  (in a checkout: pip install ./packages/openai)
Without OPENAI_API_KEY it only says what to set. OPENAI_MODEL picks another model
(default gpt-5-mini); OPENAI_BASE_URL points it at another OpenAI-compatible endpoint.
"""

from __future__ import annotations

import asyncio
import os
import sys

from pydantic import BaseModel, ConfigDict

from fevex import FevexError, create_fevex, define_agent, define_tool


# OpenAI's strict mode (the default schema policy) wants closed objects whose fields are
# all required: extra="forbid" and no defaults.
class AccountQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    account_id: int


class Account(BaseModel):
    id: int
    status: str


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str


@define_tool(name="accounts_get", description="Get an account by ID.")
async def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


async def main(model: str) -> None:
    app = create_fevex(
        agents=[
            define_agent(
                name="support",
                instructions="Answer account questions clearly. Look accounts up with tools.",
                model=f"openai:{model}",
                tools=["accounts_get"],
                output_schema=Answer,
            )
        ],
        tools=[get_account],
    )
    try:
        streaming = False
        async for event in app.stream_agent("support", "What is the status of account 42?"):
            if event.type == "model.output.delta":
                # The answer as the model writes it (JSON, since the agent has an output schema).
                print(("" if streaming else "   ") + event.payload["delta"], end="", flush=True)
                streaming = True
                continue
            if streaming:
                print()
                streaming = False
            print(f"{event.sequence:>2} {event.type}")
        run = await app.get_run(event.run_id)
        print(f"\nrun {run.id} {run.status}: {Answer.model_validate(run.output).answer}")
        print(f"usage: {run.usage}")
    finally:
        await app.close()


if __name__ == "__main__":
    if not os.environ.get("OPENAI_API_KEY"):
        print(
            "This example talks to OpenAI. Set OPENAI_API_KEY (and optionally OPENAI_MODEL,\n"
            "default gpt-5-mini, or OPENAI_BASE_URL), install the plugin with\n"
            'pip install "fevex[openai]" (in a checkout: pip install ./packages/openai),\n'
            "then run: python examples/openai_agent.py"
        )
        raise SystemExit(0)
    try:
        asyncio.run(main(os.environ.get("OPENAI_MODEL", "gpt-5-mini")))
    except FevexError as error:
        # A fevex error says what went wrong and what to do in one line (an unreachable
        # OPENAI_BASE_URL is PROVIDER_NETWORK_ERROR): the traceback would only bury it.
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
