"""Costs that must stay flat as the work grows: pages of a big in-memory store, memory search
over many entries, and one more turn on a long session.

Each figure is a ratio of process CPU time (``time.process_time``: it counts every thread of
the process, so SQLite's store thread too, and no time spent waiting) between a small and a
large size, measured in the same run with the samples of both sizes interleaved; a sample is
the CPU of several calls, and the figure is the median of the samples.

- **event page**: ``InMemoryRunStore.list_events`` of one run holding 10³ and 10⁶ events,
  100 events a page: the first page and the page after the middle event, ascending and
  descending. Target: within 1.5x.
- **run page**: ``InMemoryRunStore.list_runs`` of a store holding 10³ and 10⁶ runs, 50 a
  page: the first page and the page after the middle run, unfiltered and filtered by name (one
  of ten names). Target: within 1.5x.
- **memory search**: ``InMemoryMemoryStore.search`` over 10³ and 10⁵ memories, for three
  terms (one of them a substring of a word) that match 10 memories at either size. Target:
  within 5x.
- **session turn**: one more ``run_agent`` turn on a session holding 0 and 1 000 turns (2 000
  messages, stored through ``save_session``), on the in-memory and the SQLite store, with a
  model that does no work. Target: within 1.5x.

Run with ``python -m benchmarks.flat_costs [--only events,runs,memory,sessions] [--out FILE]``
from the repository root (about three minutes, most of it building the big stores);
``--smoke`` runs every figure at tiny sizes in seconds, to show the benchmark still works (its
ratios mean nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.durable import timing
from fevex import Fevex, create_fevex, define_agent
from fevex.events import RunEvent
from fevex.knowledge import InMemoryMemoryStore
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, OutputDelta, Usage
from fevex.runtime import AgentRun, EventOrder, ExecutionCreate, InMemoryRunStore, RunStore
from fevex_sqlite import SQLiteRunStore

FIGURES = ("events", "runs", "memory", "sessions")
OCCURRED_AT = "2026-01-01T00:00:00.000000Z"
NAMES = tuple(f"agent-{number}" for number in range(10))
MARKED = 10  # memories holding each searched word, at every size


@dataclass(frozen=True)
class Sizes:
    events: tuple[int, int]
    runs: tuple[int, int]
    memories: tuple[int, int]
    turns: tuple[int, int]
    samples: int
    calls_per_sample: int
    turn_samples: int


FULL = Sizes((1_000, 1_000_000), (1_000, 1_000_000), (1_000, 100_000), (0, 1_000), 31, 20, 31)
SMOKE = Sizes((200, 2_000), (200, 2_000), (100, 1_000), (0, 20), 3, 2, 3)
TARGETS = {"events": 1.5, "runs": 1.5, "memory": 5.0, "sessions": 1.5}


def cpu_ratio(
    small: Callable[[], Awaitable[object]],
    large: Callable[[], Awaitable[object]],
    samples: int,
    calls: int,
) -> dict[str, float]:
    """Median process CPU per call of ``small`` and ``large``, samples interleaved."""

    async def sample(call: Callable[[], Awaitable[object]]) -> float:
        start = time.process_time()
        for _ in range(calls):
            await call()
        return (time.process_time() - start) / calls

    async def measure() -> dict[str, float]:
        await small()
        await large()
        taken: dict[str, list[float]] = {"small": [], "large": []}
        for number in range(samples):
            order = ("small", "large") if number % 2 == 0 else ("large", "small")
            for which in order:
                taken[which].append(await sample(small if which == "small" else large))
        low, high = statistics.median(taken["small"]), statistics.median(taken["large"])
        return {"small_us": low * 1e6, "large_us": high * 1e6, "ratio": high / low}

    return asyncio.run(measure())


# -- events and runs -------------------------------------------------------------------


def event(run_id: str, sequence: int) -> RunEvent:
    payload = {"delta": f"token {sequence} of the answer"}
    return RunEvent(
        f"evt_{run_id}_{sequence}", run_id, sequence, "model.output.delta", OCCURRED_AT, payload
    )


def new_run(number: int, name: str = "pager") -> AgentRun:
    # created_at grows with the number, as runs created one after another do.
    created = f"2026-01-01T00:00:00.{number:09d}Z"
    return AgentRun(
        f"run_{number:09d}", f"ses_{number:09d}", name, "running", "page me", created, created
    )


async def event_store(size: int) -> InMemoryRunStore:
    store = InMemoryRunStore()
    run = new_run(0)
    events = tuple(event(run.id, sequence) for sequence in range(1, size + 1))
    await store.create_execution(ExecutionCreate(run, None, events, {}, "loader", 3600.0))
    return store


def event_pages(sizes: Sizes) -> dict[str, Any]:
    built = [asyncio.run(event_store(size)) for size in sizes.events]
    run_id = new_run(0).id
    figures = {}
    orders: tuple[EventOrder, ...] = ("asc", "desc")
    for order in orders:
        for where in ("first", "middle"):
            small, large = (
                functools.partial(
                    store.list_events,
                    run_id,
                    after=None if where == "first" else f"evt_{run_id}_{size // 2}",
                    limit=100,
                    order=order,
                )
                for store, size in zip(built, sizes.events, strict=True)
            )
            figures[f"{where} page {order}"] = cpu_ratio(
                small, large, sizes.samples, sizes.calls_per_sample
            )
    return {"sizes": list(sizes.events), "target": TARGETS["events"], "pages": figures}


async def run_store_of(size: int) -> InMemoryRunStore:
    store = InMemoryRunStore()
    for number in range(size):
        run = new_run(number, NAMES[number % len(NAMES)])
        await store.create_execution(ExecutionCreate(run, None, (), {}, "loader", 3600.0))
    return store


def run_pages(sizes: Sizes) -> dict[str, Any]:
    built = [asyncio.run(run_store_of(size)) for size in sizes.runs]
    figures = {}
    for name in (None, NAMES[3]):
        for where in ("first", "middle"):
            small, large = (
                functools.partial(
                    store.list_runs,
                    name=name,
                    after=None if where == "first" else new_run(size // 2).id,
                    limit=50,
                )
                for store, size in zip(built, sizes.runs, strict=True)
            )
            label = f"{where} page" + ("" if name is None else ", by name")
            figures[label] = cpu_ratio(small, large, sizes.samples, sizes.calls_per_sample)
    return {"sizes": list(sizes.runs), "target": TARGETS["runs"], "pages": figures}


# -- memory search ---------------------------------------------------------------------

SEARCHED = ("harbourmaster", "refundable", "parcel")
QUERY = "harbourmaster refund arcel"  # "refund" and "arcel" match as substrings


def filler(number: int) -> str:
    """A memory's ordinary text: words of a vocabulary of a few thousand."""
    words = [f"w{(number * 7919 + index * 104729) % 4999:04d}x" for index in range(8)]
    return f"Customer {number} said " + " ".join(words) + "."


async def memory_store_of(size: int) -> InMemoryMemoryStore:
    store = InMemoryMemoryStore()
    every = size // MARKED
    for number in range(size):
        text = filler(number)
        if number % every == 0:
            text += " " + " ".join(SEARCHED)
        await store.add("bench", text)
    found = await store.search("bench", QUERY, limit=MARKED)
    if len(found) != MARKED:
        raise RuntimeError(f"the query found {len(found)} memories, not {MARKED}")
    return store


def memory_search(sizes: Sizes) -> dict[str, Any]:
    small, large = (asyncio.run(memory_store_of(size)) for size in sizes.memories)
    figure = cpu_ratio(
        lambda: small.search("bench", QUERY, limit=5),
        lambda: large.search("bench", QUERY, limit=5),
        sizes.samples,
        sizes.calls_per_sample,
    )
    return {"sizes": list(sizes.memories), "target": TARGETS["memory"], "search": figure}


# -- session turns ---------------------------------------------------------------------

AGENT = "assistant"


class TurnModel:
    """Answers every turn at once; it does no work, so a turn costs what fevex does."""

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        answer = f"Noted, {len(input.messages)} messages so far."
        yield OutputDelta(delta=answer)
        usage = Usage(input_tokens=10, output_tokens=8, total_tokens=18)
        yield Completed(result=ModelResult(output=answer, usage=usage))


def history_of(turns: int) -> tuple[dict[str, Any], ...]:
    """The messages ``turns`` turns leave in a session, in their stored form."""
    messages = []
    for turn in range(turns):
        for role, text in (("user", f"Turn {turn}: remember {turn}."), ("assistant", "Noted.")):
            messages.append({"role": role, "content": [{"type": "text", "text": text}]})
    return tuple(messages)


async def session_of(app: Fevex, turns: int) -> str:
    first = await app.run_agent(AGENT, input="Hello.")
    store = app.run_store
    session = await store.get_session(first.session_id)
    assert session is not None
    long = type(session)(session.id, session.created_at, session.updated_at, history_of(turns))
    await store.save_session(long, expected_revision=session.revision)
    return first.session_id


@contextmanager
def turn_stores() -> Iterator[dict[str, Callable[[], RunStore]]]:
    with tempfile.TemporaryDirectory(prefix="fevex-flat-") as directory:
        paths = iter(range(100))
        yield {
            "memory": InMemoryRunStore,
            "sqlite": lambda: SQLiteRunStore(Path(directory) / f"turns-{next(paths)}.db"),
        }


def session_turns(sizes: Sizes) -> dict[str, Any]:
    figures = {}
    with turn_stores() as stores:
        for kind, open_store in stores.items():
            figures[kind] = asyncio.run(_turns(open_store, sizes))
    return {"turns": list(sizes.turns), "target": TARGETS["sessions"], "turn": figures}


async def _turns(open_store: Callable[[], RunStore], sizes: Sizes) -> dict[str, float]:
    apps, turns = [], []
    for history in sizes.turns:
        app = create_fevex(
            models={"default": TurnModel()},
            agents=[define_agent(name=AGENT, instructions="Keep notes.")],
            run_store=open_store(),
        )
        apps.append(app)
        session_id = await session_of(app, history)
        turns.append(
            functools.partial(app.run_agent, AGENT, input="One more.", session_id=session_id)
        )
    small, large = turns
    result = await _cpu_ratio_in_loop(small, large, sizes.turn_samples)
    for app in apps:
        await app.close()
    return result


async def _cpu_ratio_in_loop(
    small: Callable[[], Awaitable[object]], large: Callable[[], Awaitable[object]], samples: int
) -> dict[str, float]:
    # The apps live in this loop (SQLite's store thread, its connection): sample here.
    await small()
    await large()
    taken: dict[str, list[float]] = {"small": [], "large": []}
    for number in range(samples):
        order = ("small", "large") if number % 2 == 0 else ("large", "small")
        for which in order:
            start = time.process_time()
            await (small if which == "small" else large)()
            taken[which].append(time.process_time() - start)
    low, high = statistics.median(taken["small"]), statistics.median(taken["large"])
    return {"small_us": low * 1e6, "large_us": high * 1e6, "ratio": high / low}


# -- the report ------------------------------------------------------------------------


def rows(result: dict[str, Any]) -> Iterator[tuple[str, str, float, float, float, float]]:
    """(figure, case, small µs, large µs, ratio, target) for every figure measured."""
    for key, label, cases in (
        ("events", "event page", "pages"),
        ("runs", "run page", "pages"),
        ("memory", "memory search", "search"),
        ("sessions", "session turn", "turn"),
    ):
        if key not in result:
            continue
        figure = result[key]
        measured = figure[cases] if cases != "search" else {"3 terms": figure[cases]}
        for case, values in measured.items():
            yield (
                label,
                case,
                values["small_us"],
                values["large_us"],
                values["ratio"],
                figure["target"],
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(FIGURES), help="comma-separated")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: does it still work")
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    arguments = parser.parse_args(argv)
    chosen = arguments.only.split(",")
    unknown = sorted(set(chosen) - set(FIGURES))
    if unknown:
        parser.error(f"unknown figures {unknown}; choose from {', '.join(FIGURES)}")
    sizes = SMOKE if arguments.smoke else FULL
    measures = {
        "events": event_pages,
        "runs": run_pages,
        "memory": memory_search,
        "sessions": session_turns,
    }
    result: dict[str, Any] = {"benchmark": "flat_costs", "machine": timing.machine()}
    result["smoke"] = arguments.smoke
    for name in FIGURES:
        if name in chosen:
            result[name] = measures[name](sizes)
    print("| figure | case | small µs CPU | large µs CPU | large ÷ small | target |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, case, small, large, ratio, target in rows(result):
        print(f"| {label} | {case} | {small:.1f} | {large:.1f} | {ratio:.2f}x | ≤ {target}x |")
    print(json.dumps(result, indent=2))
    if arguments.out is not None:
        arguments.out.parent.mkdir(parents=True, exist_ok=True)
        arguments.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
