"""An agent on DeepSeek: a strict tool call, thinking mode, and the answer streamed.

Run it with:  pip install "fevex[deepseek]"
                (in a checkout: pip install ./packages/openai ./packages/deepseek)
              DEEPSEEK_API_KEY=sk-... python examples/deepseek_agent.py
Without DEEPSEEK_API_KEY it explains what to set and exits.
"""

from __future__ import annotations

import asyncio
import os
import sys

from pydantic import BaseModel, ConfigDict

from fevex import FevexError, create_fevex, define_agent, define_tool

MODEL = "deepseek:deepseek-v4-flash"


class AccountQuery(BaseModel):
    # DeepSeek's strict tools (the default schema policy) accept closed objects only.
    model_config = ConfigDict(extra="forbid")
    account_id: int


class Account(BaseModel):
    id: int
    status: str


@define_tool(name="accounts_get", description="Get an account by ID.")
async def get_account(query: AccountQuery) -> Account:
    return Account(id=query.account_id, status="active")


async def main() -> None:
    app = create_fevex(
        agents=[
            define_agent(
                name="support",
                instructions="Answer account questions clearly, using the tools you have.",
                model=MODEL,
                tools=["accounts_get"],
            )
        ],
        tools=[get_account],
    )
    async for event in app.stream_agent("support", "What is the status of account 42?"):
        if event.type == "model.output.delta":
            print(event.payload["delta"], end="", flush=True)
        elif event.type in ("tool.started", "tool.completed", "run.completed"):
            print(f"\n[{event.type}] {event.payload}")
    await app.close()


if __name__ == "__main__":
    if not os.environ.get("DEEPSEEK_API_KEY"):
        print(
            f"This example runs an agent on {MODEL}. Set DEEPSEEK_API_KEY to your DeepSeek "
            "API key (and DEEPSEEK_BASE_URL if you use another endpoint), install the "
            'adapter with: pip install "fevex[deepseek]" (in a checkout: pip install '
            "./packages/openai ./packages/deepseek), then run it again."
        )
        raise SystemExit(0)
    try:
        asyncio.run(main())
    except FevexError as error:
        # One line that says what went wrong and what to do; a traceback would bury it.
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
