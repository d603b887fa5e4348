"""Bounded child runs: a workflow fans its texts out to child agent runs, checks every
result and commits them in declaration order only once all are accepted. Runs on the
default in-memory store, without network access.

Run it with:  python examples/kit_children.py
"""

from __future__ import annotations

import asyncio

from fevex import FevexRunError, Limits, WorkflowStep, create_fevex, define_agent, define_workflow
from fevex.kits.children import ChildTask, run_children
from fevex.models import ModelInput
from fevex.testing import FunctionModel

saved: list[str] = []


def summarize(input: ModelInput) -> str:
    # A stand-in for a real model ("openai:gpt-5-mini" with fevex[openai] installed).
    text = input.messages[-1].text
    return text.upper() if text else ""


def non_empty(value: str, task_id: str) -> None:
    if not value.strip():
        raise ValueError(f"{task_id}: empty analysis")


def save_part(value: str, task_id: str) -> None:
    saved.append(f"{task_id}={value}")


@define_workflow(
    name="analyze",
    limits=Limits(
        max_steps=None,
        max_tool_calls=None,
        max_tool_retries=None,
        max_children=8,
        max_depth=2,
        max_concurrent_model_calls=2,
        max_model_calls=8,
    ),
)
async def analyze(step: WorkflowStep, texts: list[str]) -> list[str]:
    return await run_children(
        step,
        "parts",
        [
            ChildTask(f"part-{i}", agent="analyst", input=text, max_calls=2, reserve_calls=1,
                      timeout=30)
            for i, text in enumerate(texts)
        ],
        concurrency=2,
        accept=non_empty,
        commit=save_part,
    )  # fmt: skip


async def main() -> None:
    app = create_fevex(
        models={"default": FunctionModel(summarize)},
        agents=[define_agent(name="analyst", instructions="Summarize the text.")],
        workflows=[analyze],
    )
    result = await app.run_workflow("analyze", ["red", "green", "blue"])
    print("results:", result.output)
    print("committed:", saved)
    children = await app.list_runs(parent_run_id=result.run_id)
    print("children:", len(children), sorted({child.status for child in children}))

    saved.clear()
    try:
        await app.run_workflow("analyze", ["red", ""])
    except FevexRunError as failed:
        print(
            "failed:",
            failed.code,
            [(f["id"], f["error"]["code"]) for f in failed.details["failures"]],
        )
    print("committed:", saved)
    await app.close()


if __name__ == "__main__":
    asyncio.run(main())
