"""The app the crash tests run in worker processes and recover in others.

A billing agent asks for one keyed ``charge`` call, then answers. The tool posts to the
idempotent service named by ``FEVEX_TEST_EFFECT_URL`` with the call's idempotency key,
sleeping ``FEVEX_TEST_TOOL_DELAY`` seconds before and after, to widen the window in which a
test can kill the worker. The store is ``FEVEX_RUN_STORE``.

Run as a script, it starts one run, prints its id, and runs it to the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from fevex import (
    Fevex,
    RunEvent,
    RunPausedError,
    ToolContext,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.models import Completed, ModelInput, ModelResult, OutputDelta, ToolCall


class Charge(BaseModel):
    amount: int


async def charge(request: Charge, context: ToolContext) -> dict[str, Any]:
    delay = float(os.environ.get("FEVEX_TEST_TOOL_DELAY", "0"))
    await asyncio.sleep(delay)
    headers = {"Idempotency-Key": context.idempotency_key or ""}
    if os.environ.get("FEVEX_TEST_SECRET"):
        headers["Authorization"] = f"Bearer {await context.get_credential('payments-api-key')}"
    answer = await asyncio.to_thread(_post, {"amount": request.amount}, headers)
    await asyncio.sleep(delay)
    return {"charged": request.amount, "first_time": answer["applied"]}


def _post(body: dict[str, Any], headers: dict[str, str]) -> Any:
    posted = urllib.request.Request(
        os.environ["FEVEX_TEST_EFFECT_URL"],
        data=json.dumps(body).encode(),
        headers=headers,
        method="POST",
    )
    with urllib.request.urlopen(posted, timeout=10) as response:
        return json.load(response)


class BillingModel:
    """Deterministic: asks for the charge, then answers once the result is there."""

    async def stream(self, input: ModelInput) -> AsyncIterator[Any]:
        if input.messages[-1].role == "tool":
            yield OutputDelta("Charged.")
            yield Completed(ModelResult(output="Charged."))
        else:
            call = ToolCall("call-1", "charge", {"amount": 30})
            yield Completed(ModelResult(tool_calls=[call]))


def build_app(on_event: Any = None) -> Fevex:
    """The billing app; ``FEVEX_TEST_APPROVAL=1`` makes the charge wait for approval and
    ``FEVEX_TEST_SECRET`` is the payments key the charge resolves and sends."""
    tool = define_tool(
        name="charge",
        description="Charge the customer.",
        idempotency="keyed",
        approval="required" if os.environ.get("FEVEX_TEST_APPROVAL") else "never",
        credentials=["payments-api-key"],
    )(charge)
    secret = os.environ.get("FEVEX_TEST_SECRET", "")
    return create_fevex(
        models={"default": BillingModel()},
        agents=[define_agent(name="billing", instructions="Bill.", tools=["charge"])],
        tools=[tool],
        credentials={"payments-api-key": secret} if secret else None,
        lease_seconds=float(os.environ.get("FEVEX_TEST_LEASE_SECONDS", "1.0")),
        on_event=on_event,
    )


def _announce(event: RunEvent) -> None:
    if event.type == "run.started":
        print(event.run_id, flush=True)


async def _main() -> int:
    app = build_app(on_event=_announce)
    try:
        await app.run_agent("billing", "Charge 30.")
    except RunPausedError as paused:
        print(f"paused {paused.pause['approvals'][0]['id']}", flush=True)
        return 0
    except Exception as error:
        print(f"error {getattr(error, 'code', type(error).__name__)}", flush=True)
        return 3
    finally:
        await app.run_store.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))
