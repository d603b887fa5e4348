"""One publisher of tests/test_kit_publication_processes.py, run as its own process:
``python publication_racer.py URL NAMESPACE REVISION CANDIDATE_ID RACER BARRIER``.

Its ``verify_sources`` marks ``BARRIER/RACER`` and waits until every racer has marked it,
so that all of them have read the record at ``REVISION`` and passed every check before any
swaps. It prints, as JSON, its receipt or the code it was refused with.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from fevex import create_fevex
from fevex.errors import FevexRunError
from fevex.kits.publication import KnowledgePublication, define_knowledge_publication
from fevex.runtime import ExecutionContext

RACERS = 2


def allow(action: str, request: dict[str, Any], context: ExecutionContext) -> None:
    return None


def publication(barrier: Path | None = None) -> KnowledgePublication:
    def verify_sources(sources: list[dict[str, Any]], context: ExecutionContext) -> None:
        # A sync callback runs in a worker thread: it may block while it waits.
        if barrier is None or context.actor is None:
            return
        (barrier / context.actor["id"]).touch()
        deadline = time.monotonic() + 60
        while len(list(barrier.iterdir())) < RACERS:
            if time.monotonic() > deadline:
                raise TimeoutError("the other racer never came")
            time.sleep(0.005)

    return define_knowledge_publication(
        name="handbook", authorize=allow, verify_sources=verify_sources
    )


async def race(url: str, namespace: str, revision: int, candidate: str, racer: str) -> None:
    pub = publication(Path(sys.argv[6]))
    context = ExecutionContext(actor={"id": racer, "type": "editor"}, namespace=namespace)
    async with create_fevex(run_store=url) as app:
        try:
            receipt = await pub.publish(
                app, revision=revision, candidate_id=candidate, context=context
            )
        except FevexRunError as error:
            print(json.dumps({"racer": racer, "refused": error.code}))
        else:
            print(json.dumps({"racer": racer, "revision": receipt.revision}))


if __name__ == "__main__":
    url, namespace, revision, candidate, racer, _ = sys.argv[1:]
    asyncio.run(race(url, namespace, int(revision), candidate, racer))
