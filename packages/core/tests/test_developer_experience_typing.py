"""An agent definition types its runs' output: mypy (strict) checks ``result.output``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import mypy.api as api

SAMPLE = textwrap.dedent(
    """
    from typing import Any, assert_type

    from pydantic import BaseModel

    from fevex import RunResult, create_fevex, define_agent
    from fevex.agents import AgentDefinition
    from fevex.testing import FakeModel


    class Answer(BaseModel):
        answer: str


    support_agent = define_agent(name="support", instructions="Help.", output_schema=Answer)
    chat_agent = define_agent(name="chat", instructions="Chat.")
    assert_type(support_agent, AgentDefinition[Answer])
    assert_type(chat_agent, AgentDefinition[str])


    async def main() -> None:
        async with create_fevex(
            models={"default": FakeModel()}, agents=[support_agent, chat_agent]
        ) as app:
            result = await app.run_agent(support_agent, input="Hello")
            assert_type(result, RunResult[Answer])
            answer: str = result.output.answer
            text = await app.run_agent(chat_agent, input="Hello")
            assert_type(text.output, str)
            by_name = await app.run_agent("support", input="Hello")
            assert_type(by_name, RunResult[Any])
            blocking = app.run_agent_sync(support_agent, input="Hello")
            assert_type(blocking.output, Answer)
            wrong: int = result.output.answer  # the one error mypy must report
            print(answer, wrong)
    """
)


def test_run_results_are_typed_by_the_agent_definition(tmp_path: Path) -> None:
    sample = tmp_path / "typed_agent.py"
    sample.write_text(SAMPLE, encoding="utf-8")
    report, errors, status = api.run(
        [
            "--strict",
            "--python-version=3.11",
            "--no-incremental",
            f"--cache-dir={tmp_path / 'mypy-cache'}",
            "--config-file=",
            str(sample),
        ]
    )
    wrong_line = SAMPLE.splitlines().index(
        "        wrong: int = result.output.answer  # the one error mypy must report"
    )
    found = [line for line in report.splitlines() if ": error:" in line]
    assert found == [
        f"{sample}:{wrong_line + 1}: error: Incompatible types in assignment "
        '(expression has type "str", variable has type "int")  [assignment]'
    ], report + errors
    assert status == 1
