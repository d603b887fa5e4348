"""fevex.testing: the fake model, the gateway contract check and the pytest plugin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from fevex import FevexRunError
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall
from fevex.testing import FakeModel, check_model_gateway

pytestmark = pytest.mark.anyio


async def test_fake_model_passes_the_contract_and_records_calls() -> None:
    model = FakeModel({"output": "hello"}, {"tool_calls": [{"id": "c", "name": "t", "input": {}}]})
    results = await check_model_gateway(model)
    assert [r.output for r in results] == ["hello", None]
    assert results[1].tool_calls == (ToolCall("c", "t", {}),)
    assert len(model.calls) == 2
    assert model.calls[1].tools[0].name == "accounts_get"
    with pytest.raises(FevexRunError) as caught:
        await check_model_gateway(model)
    assert caught.value.code == "FAKE_MODEL_EXHAUSTED"


class Liar:
    def __init__(self, events: list[Any]) -> None:
        self.events = events

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        for event in self.events:
            yield event


@pytest.mark.parametrize(
    ("events", "code"),
    [
        ([OutputDelta("x")], "MODEL_STREAM_MISSING_TERMINAL"),
        ([Completed(ModelResult()), Completed(ModelResult())], "MODEL_STREAM_DUPLICATE_TERMINAL"),
        ([Completed(ModelResult()), OutputDelta("x")], "MODEL_STREAM_EVENT_AFTER_TERMINAL"),
        ([OutputDelta("x"), Completed(ModelResult(output="y"))], "MODEL_OUTPUT_MISMATCH"),
    ],
)
async def test_the_contract_check_catches_broken_gateways(events: list[Any], code: str) -> None:
    with pytest.raises(FevexRunError) as caught:
        await check_model_gateway(Liar(events))
    assert caught.value.code == code


async def test_the_contract_check_wants_an_async_iterator() -> None:
    class NotStreaming:
        def stream(self, input: ModelInput) -> list[Any]:
            return []

    with pytest.raises(FevexRunError) as caught:
        await check_model_gateway(NotStreaming())  # type: ignore[arg-type]
    assert caught.value.code == "MODEL_CONTRACT_VIOLATION"


def test_the_pytest_plugin_gives_users_a_fake_model_and_an_app(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        from fevex import define_agent

        def test_agent(fake_model, fevex_app):
            fake_model.respond({"output": "Hi from the fake"})
            app = fevex_app(agents=[define_agent(name="greeter", instructions="Greet.")])
            assert app.run_agent_sync("greeter", "hello").output == "Hi from the fake"
            assert fake_model.calls[0].messages[-1].text == "hello"

        def test_fresh_app_per_test(fake_model, fevex_app):
            assert fake_model.calls == []
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
