"""A complete model-tool-model run on the default in-memory store, without network access.

Run it with:  python examples/quickstart.py
"""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from fevex import create_fevex, define_agent, define_tool
from fevex.testing import FakeModel


class Answer(BaseModel):
    answer: str


@define_tool
async def get_account(account_id: int) -> dict[str, int | str]:
    """Get an account by its ID."""
    return {"id": account_id, "status": "active"}


async def main() -> None:
    # FakeModel answers with scripted responses; swap in "openai:gpt-5-mini" (with
    # fevex[openai] installed) to use a real model.
    model = FakeModel(
        {"tool_calls": [{"id": "call-1", "name": "get_account", "input": {"account_id": 42}}]},
        {"output": {"answer": "Account 42 is active."}, "usage": {"input_tokens": 31}},
    )
    app = create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="support",
                instructions="Answer account questions clearly.",
                tools=[get_account],
                output_schema=Answer,
            )
        ],
    )
    async for event in app.stream_agent("support", "What is the status of account 42?"):
        print(f"{event.sequence:>2} {event.type:<20} {event.payload}")
    run = await app.get_run(event.run_id)
    print(f"\nrun {run.id} {run.status}: {Answer.model_validate(run.output).answer}")


if __name__ == "__main__":
    asyncio.run(main())
