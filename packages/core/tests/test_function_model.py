"""fevex.testing.FunctionModel: a model that is a function, sync or async, never exhausted,
streaming its text in deltas; it passes the gateway contract and serves an agent's run."""

from __future__ import annotations

import pytest

from fevex import FevexRunError, create_fevex, define_agent
from fevex.models import ModelInput, ModelResult, OutputDelta, ToolCall, Usage
from fevex.testing import FunctionModel, check_model_gateway

pytestmark = pytest.mark.anyio


def answer(model_input: ModelInput) -> ModelResult | str:
    if model_input.tools:
        call = ToolCall("call-1", model_input.tools[0].name, {"account_id": 42})
        return ModelResult(tool_calls=[call], usage=Usage(input_tokens=3, output_tokens=2))
    return "Hello there, friend."


async def test_a_sync_function_passes_the_contract_again_and_again() -> None:
    model = FunctionModel(answer)
    for _ in range(3):  # never exhausted
        results = await check_model_gateway(model)
        assert results[0].output == "Hello there, friend."
        assert list(results[1].tool_calls) == [
            ToolCall("call-1", "accounts_get", {"account_id": 42})
        ]
    assert len(model.calls) == 6


async def test_text_streams_a_word_at_a_time_or_in_chunks() -> None:
    async def hello(model_input: ModelInput) -> str:
        return "Hello there,  friend."

    model_input = ModelInput(())
    words = [event async for event in FunctionModel(hello).stream(model_input)]
    assert [event.delta for event in words if isinstance(event, OutputDelta)] == [
        "Hello",
        " there,",
        "  friend.",
    ]
    chunks = [event async for event in FunctionModel(hello, chunk_size=8).stream(model_input)]
    assert [event.delta for event in chunks if isinstance(event, OutputDelta)] == [
        "Hello th",
        "ere,  fr",
        "iend.",
    ]
    assert (await check_model_gateway(FunctionModel(hello)))[0].output == "Hello there,  friend."


async def test_structured_output_streams_as_json_text() -> None:
    model = FunctionModel(lambda model_input: ModelResult(output={"answer": "yes"}))
    results = await check_model_gateway(model)
    assert results[0].output == {"answer": "yes"}


async def test_it_serves_every_run_of_an_agent() -> None:
    model = FunctionModel(lambda model_input: f"You said: {model_input.messages[-1].text}")
    app = create_fevex(
        models={"default": model}, agents=[define_agent(name="echo", instructions="Echo.")]
    )
    async with app:
        for word in ("one", "two", "three"):
            result = await app.run_agent("echo", word)
            assert result.output == f"You said: {word}"
            deltas = [event for event in result.events if event.type == "model.output.delta"]
            assert len(deltas) == 3


async def test_a_return_that_is_no_answer_is_a_contract_violation() -> None:
    model = FunctionModel(lambda model_input: 42)  # type: ignore[arg-type, return-value]
    with pytest.raises(FevexRunError) as caught:
        await check_model_gateway(model)
    assert caught.value.code == "MODEL_CONTRACT_VIOLATION"
    assert "returned int" in caught.value.message


async def test_what_the_function_raises_is_the_step_failure() -> None:
    def broken(model_input: ModelInput) -> str:
        raise FevexRunError("PROVIDER_NETWORK_ERROR", "down", category="model")

    with pytest.raises(FevexRunError) as caught:
        await check_model_gateway(FunctionModel(broken))
    assert caught.value.code == "PROVIDER_NETWORK_ERROR"
