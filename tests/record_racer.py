"""One racer of tests/test_record_store_races.py, run as its own process:
``python record_racer.py URL NAMESPACE KEY RACER_ID TOTAL GO_FILE``.

It opens the store, reads the record once and prints ``ready``; then it waits for
``GO_FILE`` (which the test creates once every racer is ready, so that all start at once),
and until the record reaches revision ``TOTAL``: reads it, and swaps in its list of winners
with ``RACER_ID`` appended, against the revision it read; a refused swap is retried from a
new read. It prints, as JSON, the revisions its own swaps were given (``True`` as the receipt
of each).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

from fevex.plugins.discovery import open_record_store


def wait_for(go: Path) -> None:
    deadline = time.monotonic() + 60
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the race never started")
        time.sleep(0.001)


async def race(url: str, namespace: str, key: str, racer: str, total: int, go: Path) -> None:
    store = open_record_store(url)
    won: list[int] = []
    refused = 0
    try:
        await store.read(namespace, key)
        print("ready", flush=True)
        wait_for(go)
        while True:
            record = await store.read(namespace, key)
            revision = 0 if record is None else record.revision
            if revision >= total:
                break
            winners = [] if record is None else list(record.value["winners"])
            if await store.compare_and_swap(
                namespace, key, revision, {"winners": [*winners, racer]}
            ):
                won.append(revision + 1)
            else:
                refused += 1
    finally:
        await store.close()
    print(json.dumps({"racer": racer, "won": won, "refused": refused}))


if __name__ == "__main__":
    url, namespace, key, racer, total, go = sys.argv[1:]
    asyncio.run(race(url, namespace, key, racer, int(total), Path(go)))
