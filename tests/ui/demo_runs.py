"""Runs of ``examples/demo_app.py`` made in this process on a store a ``fevex serve --ui``
of the same app serves, with an in-memory exporter recording the spans fevex builds;
prints, as JSON, each run tree's root and the spans recorded for its trace.

``python demo_runs.py STORE_URL`` from the repository's root: a workflow whose refund is
approved (it completes), an agent whose refund is rejected (its tool call fails), and an
agent whose refund is left waiting for approval (paused).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from examples.demo_app import build_app

from fevex.observability import InMemoryTraceExporter

ADA = {"id": "ada", "type": "local"}
GUARD = 60.0


async def drive(app: Any, run_id: str) -> Any:
    """Approve every refund and wake the workflow when its children end, as the server's
    worker and a reviewer would, until it ends."""
    async with asyncio.timeout(GUARD):
        while (run := await app.get_run(run_id)).status != "completed":
            pause = run.pause or {}
            if run.status == "paused" and pause.get("reason") == "children":
                children = [await app.get_run(child) for child in pause["run_ids"]]
                for child in children:
                    if child.status == "paused":
                        approval = child.pause["approvals"][0]
                        decision = {"approval_id": approval["id"], "decision": "approve"}
                        await app.resume_run(child.id, {**decision, "actor": ADA})
                if all(child.status == "completed" for child in children):
                    await app.resume_run(run_id, wait=False)
            await asyncio.sleep(0.02)
    return run


async def reject(app: Any, run_id: str) -> None:
    """Refuse the run's refund: its tool call fails, and the model answers that."""
    async with asyncio.timeout(GUARD):
        for _ in iter(int, 1):
            run = await app.get_run(run_id)
            if run.status == "paused":
                break
            await asyncio.sleep(0.02)
    approval = run.pause["approvals"][0]
    decision = {"approval_id": approval["id"], "decision": "reject", "actor": ADA}
    await app.resume_run(run_id, decision)


async def main(store: str) -> dict[str, Any]:
    exporter = InMemoryTraceExporter()
    async with build_app(store, [exporter]) as app:
        started = await app.start_workflow("refund_review", {"account_id": 7, "amount": 12})
        finished = await drive(app, started.id)
        refused = await app.start_agent("support", "Refund 5 USD on account 3.")
        await reject(app, refused.id)
        waiting = await app.start_agent("support", "Refund 30 USD on account 42.")
        async with asyncio.timeout(GUARD):
            for _ in iter(int, 1):
                if (await app.get_run(waiting.id)).status == "paused":
                    break
                await asyncio.sleep(0.02)
        await app.flush_observability()
    spans: dict[str, list[dict[str, Any]]] = {}
    for span in exporter.spans:
        spans.setdefault(span.trace_id, []).append({"span_id": span.span_id, "kind": span.kind})
    return {
        "workflow": finished.id,
        "workflow_status": finished.status,
        "waiting": waiting.id,
        "refused": refused.id,
        "spans": spans,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
