"""The two servers of the HTTP benchmark, each run by uvicorn in a process of its own.

- ``fevex_server``: ``create_http_app`` over a fevex app whose store (``BENCH_STORE``, the
  in-memory one by default) holds the finished runs of :func:`seed_runs` (``BENCH_EVENTS``,
  comma-separated counts; the run of ``count`` events has the id ``bench-<count>``), and
  whose ``gated`` agent waits for an approval and then ticks ``BENCH_TICKS`` times, for the
  observers measurement.
- ``peer_server``: minimal sse-starlette endpoints streaming the JSON of the same synthetic
  events from memory: ``GET /events/{count}`` one ``EventSourceResponse`` frame each (id,
  event type, JSON data), as a hand-written endpoint would, and ``GET /pages/{count}`` the
  frames of each page of ``BENCH_PAGE_SIZE`` events (100) encoded by sse-starlette's
  ``ServerSentEvent`` and written together, as fevex writes them.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

from pydantic import BaseModel

from fevex import Fevex, Limits, create_fevex, define_agent, define_tool
from fevex.events import RunEvent
from fevex.http import create_http_app
from fevex.models import Completed, ModelInput, ModelResult, ToolCall
from fevex.runtime import AgentRun, ExecutionCreate, RunStore

__all__ = ["fevex_server", "peer_server", "seed_runs", "synthetic_events"]

OCCURRED_AT = "2026-12-01T00:00:00.000000Z"
DELTA = "The quick brown fox jumps over the lazy dog; " * 2


def synthetic_events(run_id: str, count: int) -> Iterator[RunEvent]:
    """``count`` output deltas of about 200 bytes of JSON each: what a chatty run streams."""
    for sequence in range(1, count + 1):
        yield RunEvent(
            f"evt_{run_id}_{sequence:08d}",
            run_id,
            sequence,
            "model.output.delta",
            OCCURRED_AT,
            {"delta": f"{DELTA}{sequence}"},
        )


async def seed_runs(store: RunStore, counts: list[int]) -> None:
    """One completed run per count, ``bench-<count>``, holding that many events."""
    for count in counts:
        run_id = f"bench-{count}"
        if await store.get_run(run_id) is not None:
            continue
        run = AgentRun(
            run_id, f"ses-{run_id}", "gated", "completed", "seeded", OCCURRED_AT, OCCURRED_AT,
            output="done", revision=1,
        )  # fmt: skip
        events = tuple(synthetic_events(run_id, count))
        await store.create_execution(ExecutionCreate(run, None, events))


class Gate(BaseModel):
    reason: str


class Tick(BaseModel):
    number: int


async def gate(request: Gate) -> dict[str, str]:
    return {"opened": request.reason}


async def tick(request: Tick) -> dict[str, int]:
    await asyncio.sleep(float(os.environ.get("BENCH_TICK_SECONDS", "0.005")))
    return {"tick": request.number}


class GatedModel:
    """Asks for the gate (an approval), then for ``BENCH_TICKS`` ticks, then answers."""

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        done = sum(1 for message in input.messages if message.role == "tool")
        ticks = int(os.environ.get("BENCH_TICKS", "100"))
        if done == 0:
            call = ToolCall("gate", "gate", {"reason": "observers are ready"})
        elif done <= ticks:
            call = ToolCall(f"tick-{done}", "tick", {"number": done})
        else:
            yield Completed(ModelResult(output="done"))
            return
        yield Completed(ModelResult(tool_calls=[call]))


def _fevex() -> Fevex:
    return create_fevex(
        models={"default": GatedModel()},
        agents=[
            define_agent(
                name="gated",
                instructions="Tick.",
                tools=["gate", "tick"],
                limits=Limits(max_steps=10_000, max_tool_calls=10_000),
            )
        ],
        tools=[
            define_tool(name="gate", description="Wait.", approval="required")(gate),
            define_tool(name="tick", description="Tick.")(tick),
        ],
        run_store=os.environ.get("BENCH_STORE", "memory://"),
    )


class _Seeded:
    """The HTTP app, seeding the store when uvicorn starts the app (the lifespan)."""

    def __init__(self, app: Any, fevex: Fevex, counts: list[int]) -> None:
        self.app, self.fevex, self.counts = app, fevex, counts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await seed_runs(self.fevex.run_store, self.counts)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.fevex.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def fevex_server() -> Any:
    fevex = _fevex()
    counts = [int(count) for count in os.environ.get("BENCH_EVENTS", "").split(",") if count]
    app = create_http_app(
        fevex,
        # Every caller is the one operator, who may approve the gate.
        authenticate=lambda request: {"actor": {"id": "bench-operator"}},
        event_page_size=int(os.environ.get("BENCH_PAGE_SIZE", "100")),
        poll_interval=float(os.environ.get("BENCH_POLL_INTERVAL", "0.05")),
    )
    return _Seeded(app, fevex, counts)


def peer_server() -> Any:
    from sse_starlette.sse import EventSourceResponse, ServerSentEvent
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.routing import Route

    page_size = int(os.environ.get("BENCH_PAGE_SIZE", "100"))

    def frame(event: RunEvent) -> dict[str, str]:
        data = json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":"))
        return {"id": event.id, "event": event.type, "data": data}

    async def events(request: Request) -> EventSourceResponse:
        count = int(request.path_params["count"])

        async def frames() -> AsyncIterator[dict[str, str]]:
            for event in synthetic_events(f"bench-{count}", count):
                yield frame(event)

        return EventSourceResponse(frames())

    async def pages(request: Request) -> EventSourceResponse:
        count = int(request.path_params["count"])

        async def chunks() -> AsyncIterator[bytes]:
            page: list[bytes] = []
            for event in synthetic_events(f"bench-{count}", count):
                page.append(ServerSentEvent(**frame(event)).encode())
                if len(page) == page_size:
                    yield b"".join(page)  # sse-starlette writes bytes as they are
                    page = []
            if page:
                yield b"".join(page)

        return EventSourceResponse(chunks())

    return Starlette(routes=[Route("/events/{count}", events), Route("/pages/{count}", pages)])
