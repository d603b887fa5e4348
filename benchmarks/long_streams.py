"""What a long, finely streamed answer costs: one agent run whose model streams a text of
``--chars`` characters one character per delta, against the same text in ``--coarse``
deltas (1,000 by default), on each run store.

For each store and each stream it reports the run's time (``run_agent`` to its return, no
tracing; best of ``--repeats``) and its peak Python memory (``tracemalloc``, in a run of
its own, since tracing slows every allocation). Read the ratios of the fine stream to the
coarse one, measured in the same invocation, and the peak beside the run's transcript: the
JSON of every event the store keeps for the run (the deltas, the model step's output, the
run's output and the session's history each hold the text). The goal: the fine stream's
peak within twice the transcript plus a constant (the peak of a run of a one-character
answer, also measured), and its time within three times the coarse stream's. The model's
own cost, iterating the fine stream with no fevex at all, is measured too: no run can take
less.

Run with ``nox -s bench_streams`` or ``python -m benchmarks.long_streams [--quick]
[--stores memory,sqlite,postgres] [--out FILE]``; ``--quick`` is the suite's smoke run
(10,000 characters, memory and SQLite, no repeats).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import string
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.durable.stores import STORES, open_store, postgres_url
from fevex import create_fevex, define_agent
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, OutputDelta, Usage


class ChunkedModel:
    """Streams ``text`` in ``deltas`` pieces of equal size, never suspending (a response
    already buffered)."""

    def __init__(self, text: str, deltas: int) -> None:
        self.text = text
        self.size = max(1, -(-len(text) // deltas))

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        text, size = self.text, self.size
        for start in range(0, len(text), size):
            yield OutputDelta(text[start : start + size])
        yield Completed(ModelResult(output=text, usage=Usage(output_tokens=len(text))))


def _text(chars: int) -> str:
    return (string.ascii_letters * (chars // len(string.ascii_letters) + 1))[:chars]


async def _bare_stream(text: str) -> float:
    """Seconds to iterate the one-character stream alone, keeping its text."""
    model = ChunkedModel(text, len(text))
    started = time.perf_counter()
    parts = []
    async for event in model.stream(ModelInput(())):
        if isinstance(event, OutputDelta):
            parts.append(event.delta)
    took = time.perf_counter() - started
    assert "".join(parts) == text
    return took


async def _one_run(
    kind: str, directory: Path, url: str | None, text: str, deltas: int, traced: bool
) -> dict[str, Any]:
    store = await open_store(kind, directory, url)
    app = create_fevex(
        models={"default": ChunkedModel(text, deltas)},
        agents=[define_agent(name="writer", instructions="Write.")],
        run_store=store,
    )
    try:
        gc.collect()
        if traced:
            tracemalloc.start()
        started = time.perf_counter()
        result = await app.run_agent("writer", "go", timeout=600)
        took = time.perf_counter() - started
        peak = 0
        if traced:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        assert result.output == text
        run = await app.get_run(result.run_id)
        assert run.status == "completed", run.error
        events = await app.list_events(result.run_id, limit=100_000)
        transcript = len(json.dumps([event.payload for event in events]).encode())
        stored_deltas = sum(1 for event in events if event.type == "model.output.delta")
        return {
            "seconds": took,
            "peak_bytes": peak,
            "transcript_bytes": transcript,
            "events": len(events),
            "delta_events": stored_deltas,
        }
    finally:
        await app.close()


async def _measure(
    kind: str, url: str | None, text: str, deltas: int, repeats: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fevex-streams-") as directory:
        timed = [
            await _one_run(kind, Path(directory) / str(i), url, text, deltas, traced=False)
            for i in range(repeats)
        ]
        traced = await _one_run(kind, Path(directory) / "traced", url, text, deltas, traced=True)
    best = min(timed, key=lambda figures: figures["seconds"])
    return {**best, "peak_bytes": traced["peak_bytes"]}


async def _store_figures(
    kind: str, url: str | None, chars: int, coarse: int, repeats: int, bare: float
) -> dict[str, Any]:
    text = _text(chars)
    fine = await _measure(kind, url, text, chars, repeats)
    coarser = await _measure(kind, url, text, coarse, repeats)
    tiny = await _measure(kind, url, "x", 1, 1)
    return {
        "store": kind,
        "chars": chars,
        "fine": fine,
        "coarse": {**coarser, "deltas": coarse},
        "one_character_run": tiny,
        "time_ratio": fine["seconds"] / coarser["seconds"],
        "time_over_bare_stream": fine["seconds"] / bare,
        "peak_ratio": fine["peak_bytes"] / max(coarser["peak_bytes"], 1),
        # Within 2x the transcript plus the constant of a run itself.
        "peak_budget_bytes": 2 * fine["transcript_bytes"] + tiny["peak_bytes"],
    }


def _megabytes(count: int) -> str:
    return f"{count / 1e6:.1f} MB"


def _table(figures: dict[str, Any]) -> str:
    chars = figures["chars"]
    coarse = figures["stores"][0]["coarse"]["deltas"] if figures["stores"] else 0
    lines = [
        f"{chars:,} characters: one per delta against {coarse:,} deltas "
        f"(the bare one-character stream alone: {figures['bare_stream_seconds']:.2f} s)",
        "",
        "| store | time, 1/delta | time, coarse | ratio | / bare stream | peak, 1/delta "
        "| peak, coarse | ratio | transcript | peak budget | delta events |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for store in figures["stores"]:
        fine, coarser = store["fine"], store["coarse"]
        lines.append(
            f"| {store['store']} | {fine['seconds']:.2f} s | {coarser['seconds']:.3f} s "
            f"| {store['time_ratio']:.1f}x | {store['time_over_bare_stream']:.1f}x "
            f"| {_megabytes(fine['peak_bytes'])} "
            f"| {_megabytes(coarser['peak_bytes'])} | {store['peak_ratio']:.2f}x "
            f"| {_megabytes(fine['transcript_bytes'])} "
            f"| {_megabytes(store['peak_budget_bytes'])} "
            f"| {fine['delta_events']:,} / {coarser['delta_events']:,} |"
        )
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    stores = [name.strip() for name in args.stores.split(",") if name.strip()]
    unknown = set(stores) - set(STORES)
    if unknown:
        raise SystemExit(f"unknown stores {sorted(unknown)}; choose from {', '.join(STORES)}")
    bare = min([await _bare_stream(_text(args.chars)) for _ in range(args.repeats)])
    figures: dict[str, Any] = {
        "chars": args.chars,
        "python": sys.version.split()[0],
        "bare_stream_seconds": bare,
        "stores": [],
    }
    with ExitStack() as stack:
        url = None
        if "postgres" in stores:
            url = stack.enter_context(postgres_url(args.postgres_url))
        for kind in stores:
            figures["stores"].append(
                await _store_figures(kind, url, args.chars, args.coarse, args.repeats, bare)
            )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=1_000_000)
    parser.add_argument("--coarse", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--postgres-url", default=None, help="a server to use instead of one")
    parser.add_argument(
        "--quick", "--smoke", dest="quick", action="store_true", help="small sizes: does it run"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.chars, args.coarse, args.repeats = 10_000, 100, 1
        if "--stores" not in " ".join(argv or sys.argv[1:]):
            args.stores = "memory,sqlite"
    figures = asyncio.run(_main(args))
    print(_table(figures))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
