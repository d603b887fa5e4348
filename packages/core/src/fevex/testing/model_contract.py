"""The shared contract check every model adapter runs against itself."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from fevex.messages import Message
from fevex.models import ModelGateway, ModelInput, ModelResult, ModelStreamReader, ToolSpec

__all__ = ["check_model_gateway", "default_contract_inputs"]


def default_contract_inputs() -> list[ModelInput]:
    """A plain text request and a request that offers one tool."""
    return [
        ModelInput((Message.system("Answer briefly."), Message.user("Say hello."))),
        ModelInput(
            (Message.user("What is the status of account 42?"),),
            tools=(
                ToolSpec(
                    "accounts_get",
                    "Get an account by ID.",
                    {
                        "type": "object",
                        "properties": {"account_id": {"type": "integer"}},
                        "required": ["account_id"],
                        "additionalProperties": False,
                    },
                ),
            ),
        ),
    ]


async def check_model_gateway(
    gateway: ModelGateway,
    inputs: Sequence[ModelInput] | None = None,
    *,
    timeout: float = 30.0,
) -> list[ModelResult]:
    """Stream each input through ``gateway`` and check the stream contract.

    Raises :class:`~fevex.FevexRunError` with the runtime's own code on the first
    violation (missing or duplicate terminal, event after the terminal, unknown event,
    output that does not match the deltas, malformed tool calls, usage or stop reason; and,
    for a gateway that streams blocks and tool-input deltas, which are optional, a block
    left open or stopped twice and arguments that do not spell the call's input), or
    ``MODEL_CONTRACT_VIOLATION`` when ``stream`` is not an async iterator. Returns the
    terminal results.
    """
    from fevex.errors import FevexRunError

    results = []
    for model_input in inputs if inputs is not None else default_contract_inputs():
        stream = gateway.stream(model_input)
        if not hasattr(stream, "__aiter__"):
            raise FevexRunError(
                "MODEL_CONTRACT_VIOLATION",
                f"{type(gateway).__name__}.stream must return an async iterator.",
                category="model",
            )
        reader = ModelStreamReader()
        async with asyncio.timeout(timeout):
            async for event in stream:
                reader.accept(event)
        results.append(reader.finish())
    return results
