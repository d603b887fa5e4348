"""A consumer that stops reading closes the HTTP stream: the server sees the client go."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import pytest
from openai_loopback import ChatChunks, LoopbackServer, ResponseEvents, Scripted

from fevex.messages import Message
from fevex.models import BlockStarted, BlockStopped, ModelInput, OutputDelta
from fevex_openai import OpenAIModel

pytestmark = pytest.mark.anyio

QUESTION = ModelInput((Message.user("Tell me a long story."),))


def open_ended(api: str) -> bytes:
    # Deltas, then nothing: the response stays open as if the model were still writing.
    if api == "responses":
        return ResponseEvents().message("Once ", "upon ").body()
    return ChatChunks().content("Once ", "upon ").body(done=False)


async def client_left(server: LoopbackServer) -> bool:
    return await anyio.to_thread.run_sync(server.disconnected.wait, 10)


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_closing_the_stream_disconnects(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str
) -> None:
    server.respond(Scripted(body=open_ended(api), hold_open=True))
    stream = make_model(api=api).stream(QUESTION)
    assert await anext(stream) == BlockStarted(0, "text")
    first = await anext(stream)
    assert first == OutputDelta("Once ")
    assert not server.disconnected.is_set()
    await stream.aclose()
    assert await client_left(server)


@pytest.mark.parametrize("api", ["responses", "chat"])
async def test_cancelling_the_consumer_task_disconnects(
    server: LoopbackServer, make_model: Callable[..., OpenAIModel], api: str
) -> None:
    server.respond(Scripted(body=open_ended(api), hold_open=True))
    model = make_model(api=api)
    received: list[str] = []
    reading = asyncio.Event()

    async def consume() -> None:
        async for event in model.stream(QUESTION):
            if isinstance(event, BlockStarted | BlockStopped):
                continue  # the text block's bounds
            assert isinstance(event, OutputDelta)
            received.append(event.delta)
            reading.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(reading.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert received[0] == "Once "
    assert await client_left(server)
