"""Agents over the loopback billing service, what a run left behind, and a hang guard."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from fevex import Fevex, FevexRunError, ToolContext, create_fevex, define_agent, define_connection
from fevex.events import RunEvent
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel
from fevex_openapi import create_openapi_tool_provider

TOKEN = "bt_live_4f9c2e7a1d8b6350"

T = TypeVar("T")


async def bearer(context: ToolContext) -> dict[str, str]:
    return {"Authorization": f"Bearer {await context.get_credential('billing-token')}"}


def call(name: str, input: dict[str, Any], call_id: str = "call-1") -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "input": input}]}


def agent_app(
    billing: Any,
    model: FakeModel,
    allow: list[str],
    *,
    headers: Mapping[str, str] | Callable[[ToolContext], Any] = bearer,
    connection_timeout: float = 30.0,
    **provider: Any,
) -> Fevex:
    """The agent ``clerk`` with the allowed billing operations as tools."""
    provider.setdefault("allow_hosts", [f"127.0.0.1:{billing.port}"])
    connection = define_connection(
        name="billing",
        provider=create_openapi_tool_provider(
            document=billing.document(), operations={"allow": allow}, headers=headers, **provider
        ),
        allowlist=allow,
        credentials=["billing-token"],
        timeout=connection_timeout,
    )
    return create_fevex(
        models={"default": model},
        agents=[
            define_agent(
                name="clerk",
                instructions="Answer billing questions.",
                tools=[f"billing__{name}" for name in allow],
            )
        ],
        connections=[connection],
        credentials={"billing-token": TOKEN},
        run_store=InMemoryRunStore(),
    )


@dataclass
class RecordedRun:
    events: list[RunEvent]
    error: FevexRunError | None
    #: Everything the run left behind as text: streamed and stored events, the run record,
    #: and the error as the caller sees it.
    text: str

    @property
    def tool_outputs(self) -> list[Any]:
        return [e.payload["output"] for e in self.events if e.type == "tool.completed"]


async def recorded_run(app: Fevex, prompt: str, *, timeout: float | None = None) -> RecordedRun:
    events: list[RunEvent] = []
    error: FevexRunError | None = None
    try:
        async for event in app.stream_agent("clerk", prompt, timeout=timeout):
            events.append(event)
    except FevexRunError as caught:
        error = caught
    run_id = events[0].run_id
    run = await app.get_run(run_id)
    stored = await app.list_events(run_id)
    text = json.dumps(
        {
            "events": [event.to_json() for event in events],
            "stored": [event.to_json() for event in stored],
            "run": run.to_json(),
            "error": [str(error), repr(error), getattr(error, "details", None)],
        },
        default=str,
    )
    return RecordedRun(events, error, text)


def finishes_within(seconds: float, work: Callable[[], T]) -> T:
    """``work()``'s result, computed in a thread of its own; the test fails when it has not
    finished after ``seconds``.

    A check that holds the event loop cannot be interrupted from that loop: neither
    ``asyncio.wait_for`` nor a run's timeout fires until the loop is free. So the guard
    watches from another thread (``work`` starts its own loop with ``asyncio.run``) and
    abandons a stuck one, a daemon, instead of joining it.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed to the test's thread below
            outcome["error"] = error

    thread = threading.Thread(target=target, name="hang-guard", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"not finished after {seconds} s: something held the event loop")
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value
