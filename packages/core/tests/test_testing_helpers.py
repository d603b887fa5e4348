"""fevex.testing: the fake model, the gateway contract check and the pytest plugin."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fevex import FevexRunError
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall
from fevex.testing import FakeModel, check_model_gateway, pytest_plugin

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


# How the READMEs may count or rank the plugin's fixtures.
_COUNTED = re.compile(
    r"\b(one|two|three|four|five|six|first|second|third|fourth|fifth|sixth) fixtures?\b",
    re.IGNORECASE,
)
_NUMBERS = {
    word: number
    for number, words in enumerate(
        [("one", "first"), ("two", "second"), ("three", "third"), ("four", "fourth"),
         ("five", "fifth"), ("six", "sixth")],
        start=1,
    )
    for word in words
}  # fmt: skip


def test_the_readmes_count_the_plugin_s_fixtures_as_it_defines_them() -> None:
    module = ast.parse(inspect.getsource(pytest_plugin))
    fixtures = [
        node.name
        for node in module.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(decorator) == "pytest.fixture" for decorator in node.decorator_list)
    ]
    assert fixtures == ["fake_model", "fevex_app", "fevex_cassette"]
    root = Path(__file__).resolve().parents[3]
    for readme in (root / "README.md", root / "packages" / "core" / "README.md"):
        text = readme.read_text(encoding="utf-8")
        for count in _COUNTED.finditer(text):
            word = count.group(1).lower()
            cardinal = not word.endswith(("st", "nd", "rd", "th"))
            number = _NUMBERS[word]
            assert number == len(fixtures) if cardinal else number <= len(fixtures), count[0]
    section = (root / "README.md").read_text(encoding="utf-8").split("### Testing your agents")[1]
    assert all(f"`{name}`" in section.split("```")[0] for name in fixtures)
