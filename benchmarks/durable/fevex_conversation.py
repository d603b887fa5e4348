"""One round of fevex's side of the 25-turn conversation on a SQLite file.

Each conversation is 25 consecutive ``run_agent`` calls, the first one opening a session and
the others continuing its ``session_id``; the model does no work and has no tools. Each
turn is a durable run: the session is reserved with the run's creation (one commit), and
the run's events, output and the turn's messages in the session history are committed
when it completes (one more). The variants are ``await app.run_agent`` in one event loop and
the blocking ``app.run_agent_sync``; the same conversation on the in-memory store, which
persists nothing, is shown for reference only: what the runtime itself costs.

Prints one JSON object: milliseconds per conversation for each variant, commits per turn
(counted on one extra conversation) and what the file holds per conversation. Run it by
hand with ``python -m benchmarks.durable.fevex_conversation --directory /tmp/round``; the
side-by-side comparison runs it through ``benchmarks.durable.conversation_rounds``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.durable import conversation
from benchmarks.durable.counting_store import CountingRunStore
from fevex import Fevex, create_fevex, define_agent
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, OutputDelta, Usage
from fevex.runtime import InMemoryRunStore, RunStore
from fevex_sqlite import SQLiteRunStore

AGENT = "assistant"
REFERENCE = "run_agent (async), in-memory store: not durable, for reference"
TABLES = ("fevex_runs", "fevex_events", "fevex_sessions", "fevex_session_turns")


class ConversationModel:
    """Answers with the number of user messages the conversation holds."""

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        user_messages = sum(1 for message in input.messages if message.role == "user")
        answer = conversation.reply_text(user_messages)
        usage = Usage(input_tokens=10, output_tokens=8, total_tokens=18)
        yield OutputDelta(delta=answer)
        yield Completed(result=ModelResult(output=answer, usage=usage))


def build_app(store: RunStore | CountingRunStore) -> Fevex:
    return create_fevex(
        models={"default": ConversationModel()},
        agents=[define_agent(name=AGENT, instructions=conversation.INSTRUCTIONS)],
        run_store=store,
    )


async def converse(app: Fevex) -> None:
    session_id = None
    output = None
    for turn in range(1, conversation.TURNS + 1):
        result = await app.run_agent(
            AGENT, input=conversation.user_text(turn), session_id=session_id
        )
        session_id, output = result.session_id, result.output
    _check(output)


def converse_sync(app: Fevex) -> None:
    session_id = None
    output = None
    for turn in range(1, conversation.TURNS + 1):
        result = app.run_agent_sync(
            AGENT, input=conversation.user_text(turn), session_id=session_id
        )
        session_id, output = result.session_id, result.output
    _check(output)


def _check(output: object) -> None:
    expected = conversation.reply_text(conversation.TURNS)
    if output != expected:
        raise RuntimeError(f"the last turn answered {output!r}, expected {expected!r}")


async def _timed(conversations: int, once: Callable[[], Awaitable[None]]) -> list[float]:
    await once()  # warm-up, and the first conversation pays for creating the file
    milliseconds = []
    for _ in range(conversations):
        start = time.perf_counter()
        await once()
        milliseconds.append((time.perf_counter() - start) * 1e3)
    return milliseconds


async def _in_loop(path: Path, conversations: int) -> dict[str, Any]:
    app = build_app(SQLiteRunStore(path))
    milliseconds = await _timed(conversations, lambda: converse(app))
    counting = CountingRunStore(app.run_store)
    start = time.perf_counter()
    await converse(build_app(counting))
    elapsed = time.perf_counter() - start
    await app.close()
    return {
        "ms_per_conversation": milliseconds,
        "commits_per_turn": counting.commits / conversation.TURNS,
        "store_calls_per_turn": counting.per_run(conversation.TURNS),
        "store_share_of_time": counting.seconds / elapsed,
        "stored_per_conversation": conversation.per_conversation(
            conversation.stored_totals(path, TABLES), conversations + 2
        ),
    }


def _blocking(path: Path, conversations: int) -> dict[str, Any]:
    app = build_app(SQLiteRunStore(path))
    converse_sync(app)
    milliseconds = []
    for _ in range(conversations):
        start = time.perf_counter()
        converse_sync(app)
        milliseconds.append((time.perf_counter() - start) * 1e3)
    app.close_sync()
    return {"ms_per_conversation": milliseconds}


async def _in_memory(conversations: int) -> dict[str, Any]:
    # Not durable, and not part of the comparison: what the runtime costs without SQLite.
    app = build_app(InMemoryRunStore())
    return {"ms_per_conversation": await _timed(conversations, lambda: converse(app))}


def main(argv: list[str] | None = None) -> None:
    arguments = conversation.round_arguments(__doc__.splitlines()[0], argv)
    directory: Path = arguments.directory
    directory.mkdir(parents=True, exist_ok=True)
    variants = {
        "run_agent (async)": asyncio.run(
            _in_loop(directory / "fevex-async.db", arguments.conversations)
        ),
        "run_agent_sync": _blocking(directory / "fevex-sync.db", arguments.conversations),
        REFERENCE: asyncio.run(_in_memory(arguments.conversations)),
    }
    versions = {name: metadata.version(name) for name in ("fevex", "fevex-sqlite", "sqlalchemy")}
    print(json.dumps({"side": "fevex", "versions": versions, "variants": variants}))


if __name__ == "__main__":
    main()
