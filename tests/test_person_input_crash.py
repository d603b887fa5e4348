"""A process that asks a person for input and is killed (SIGKILL) while it waits: the
answer given afterwards, from another process sharing the SQLite store, is refused with
``INPUT_NOT_PENDING`` rather than lost in silence, and recovering the run ends the wait:
the run is no longer stuck on a request nobody can take."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from fevex import FevexRunError, ToolContext, create_fevex, define_agent, define_tool

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

ASKER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, sys.argv[2])
    from test_person_input_crash import make_app

    async def main():
        app = make_app(sys.argv[1])
        started = await app.start_agent("asker", "Ask me.")
        while not (await app.get_run(started.id)).inputs:
            await asyncio.sleep(0.02)
        print(started.id, flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


@define_tool(name="ask_name", description="Ask a person for a name.")
async def ask_name(context: ToolContext) -> dict[str, Any]:
    answer = await context.request_input("Which name?", schema=SCHEMA, timeout=300)
    return {"action": answer.action, "content": dict(answer.content or {})}


def make_app(store: str) -> Any:
    from fevex.testing import FakeModel

    model = FakeModel(
        {"tool_calls": [{"id": "call-1", "name": "ask_name", "input": {}}]}, {"output": "done"}
    )
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="asker", instructions="Ask.", tools=[ask_name])],
        run_store=store,
        lease_seconds=1.0,
    )


async def test_an_answer_after_the_waiting_process_died_is_refused_and_recovery_ends_the_wait(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    asker = subprocess.Popen(  # noqa: ASYNC220 - killed and waited for below
        [sys.executable, "-c", ASKER, store, str(Path(__file__).parent)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert asker.stdout is not None
        run_id = asker.stdout.readline().strip()
    finally:
        asker.send_signal(signal.SIGKILL)
        asker.wait(timeout=10)
        if asker.stdout is not None:
            asker.stdout.close()
    assert run_id
    async with make_app(store) as app:
        (request,) = (await app.get_run(run_id)).inputs
        with pytest.raises(FevexRunError) as refused:
            await app.resume_run(run_id, request.answer(content={"name": "Ada"}, actor="ops"))
        assert refused.value.code == "INPUT_NOT_PENDING"
        # The call may have had effects before it asked (the tool is not idempotent), so
        # recovery ends the run with the code that says so, and the request with it.
        with pytest.raises(FevexRunError) as recovered:
            await app.recover_run(run_id, actor={"id": "ops"})
        assert recovered.value.code == "TOOL_EFFECT_UNCERTAIN"
        run = await app.get_run(run_id)
        assert run.status == "failed"
        assert run.inputs == ()
