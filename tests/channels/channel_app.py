"""The app and adapter of the channel tests.

``EchoModel`` asks for one ``lookup`` call (keyed; it waits ``FEVEX_TEST_TOOL_DELAY``
seconds), then answers ``Echo: <text>``; a message whose text is ``approve`` asks for
``refund``, which needs approval; ``fail`` makes the model fail. ``MemoryAdapter`` parses
``{"id", "delivery_id", "conversation", "text"}`` and records what it delivers.

Run as a script with a message's JSON as argument, it handles that one message against
``FEVEX_RUN_STORE`` and prints the result's run id and status.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from fevex import Fevex, create_fevex, define_agent, define_tool
from fevex.channels import ChannelMessage, ChannelOutput, handle_channel_input
from fevex.errors import FevexRunError
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall


class Query(BaseModel):
    text: str


async def lookup(query: Query) -> dict[str, Any]:
    await asyncio.sleep(float(os.environ.get("FEVEX_TEST_TOOL_DELAY", "0")))
    return {"found": query.text}


async def refund(query: Query) -> dict[str, Any]:
    return {"refunded": query.text}


class EchoModel:
    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        text = [message.text for message in input.messages if message.role == "user"][-1]
        if text == "fail":
            raise FevexRunError("MODEL_ERROR", "The model is down.", category="model")
        if input.messages[-1].role == "tool":
            yield OutputDelta(f"Echo: {text}")
            yield Completed(ModelResult(output=f"Echo: {text}"))
            return
        tool = "refund" if text == "approve" else "lookup"
        yield Completed(ModelResult(tool_calls=[ToolCall("call-1", tool, {"text": text})]))


class MemoryAdapter:
    name = "memory"

    def __init__(self) -> None:
        self.delivered: list[ChannelOutput] = []

    async def parse(self, input: Any) -> ChannelMessage:
        if not isinstance(input, dict) or "delivery_id" not in input:
            raise ValueError("not a message of this channel")
        return ChannelMessage(
            id=input["id"],
            delivery_id=input["delivery_id"],
            conversation_id=input["conversation"],
            content=input["text"],
        )

    async def deliver(self, output: ChannelOutput) -> Any:
        self.delivered.append(output)
        return {"sent": output.output}


def build_app(run_store: Any = None) -> Fevex:
    return create_fevex(
        models={"default": EchoModel()},
        agents=[define_agent(name="assistant", instructions="Echo.", tools=["lookup", "refund"])],
        tools=[
            define_tool(name="lookup", description="Look up.", idempotency="keyed")(lookup),
            define_tool(name="refund", description="Refund.", approval="required")(refund),
        ],
        run_store=run_store,
        lease_seconds=float(os.environ.get("FEVEX_TEST_LEASE_SECONDS", "30")),
    )


async def main(message: dict[str, Any]) -> None:
    async with build_app() as app:
        result = await handle_channel_input(
            message,
            fevex=app,
            agent_name="assistant",
            adapter=MemoryAdapter(),
            on_event=lambda event: print(event.type, flush=True),
        )
        assert result.run is not None
        print(json.dumps({"run_id": result.run.id, "status": result.run.status}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
