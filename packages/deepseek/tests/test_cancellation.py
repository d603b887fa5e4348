"""A cancelled or abandoned step closes its HTTP stream: the server sees the client go."""

import asyncio
from typing import Any

import anyio
import pytest

from fevex.messages import Message
from fevex.models import BlockStarted, ModelInput

pytestmark = pytest.mark.anyio

ASK = ModelInput((Message.user("Write a long story."),))


async def _server_saw_the_client_leave(server: Any) -> bool:
    result: bool = await anyio.to_thread.run_sync(server.disconnected.wait, 10)
    return result


async def test_abandoning_the_stream_closes_the_connection(
    deepseek: Any, deepseek_server: Any, wire: Any
) -> None:
    deepseek_server.stream(wire.chunk(content="Once upon"), done=False, hang=True)
    stream = deepseek().stream(ASK)

    assert await stream.__anext__() == BlockStarted(0, "text")
    first = await stream.__anext__()
    assert first.delta == "Once upon"
    assert not deepseek_server.disconnected.is_set()
    await stream.aclose()

    assert await _server_saw_the_client_leave(deepseek_server)


async def test_cancelling_the_task_closes_the_connection(
    deepseek: Any, deepseek_server: Any, wire: Any
) -> None:
    deepseek_server.stream(wire.chunk(content="Once upon"), done=False, hang=True)
    model = deepseek()
    started = asyncio.Event()

    async def consume() -> None:
        async for _ in model.stream(ASK):
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await _server_saw_the_client_leave(deepseek_server)
