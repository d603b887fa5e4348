"""One round of LangGraph's side of the 25-turn conversation, with its SQLite checkpointer.

The graph is a ``StateGraph(MessagesState)`` with one model node over a fake chat model (the
same ``BaseChatModel`` subclass pattern as ``benchmarks/frameworks/with_langgraph.py``),
compiled with ``SqliteSaver`` (blocking ``invoke``) or ``AsyncSqliteSaver`` (``ainvoke``) on
a file. A conversation is one ``thread_id``; each turn invokes the graph with the new user
message only, and the checkpointer supplies the earlier ones.

LangGraph's ``durability`` decides when checkpoints are written: ``async`` (its default)
writes each step's checkpoint while the next step runs, ``sync`` before the next step
starts, ``exit`` only when the invocation returns. Every mode is measured; all of them have
written the turn by the time ``invoke`` returns.

Prints one JSON object like ``fevex_conversation``. Needs ``langgraph`` and
``langgraph-checkpoint-sqlite`` (``benchmarks/requirements/langgraph-sqlite.txt``); run it
with ``python -m benchmarks.durable.langgraph_conversation --directory /tmp/round``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from itertools import count
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Durability

from benchmarks.durable import conversation
from benchmarks.measure import OFFLINE_ENVIRONMENT

DURABILITY: tuple[Durability, ...] = ("async", "sync", "exit")
TABLES = ("checkpoints", "writes")
# Each checkpointer write method commits its own transaction (SqliteSaver's ``cursor()``
# commits on exit; AsyncSqliteSaver commits after each statement group).
WRITES = ("put", "put_writes", "aput", "aput_writes")


class ConversationChatModel(BaseChatModel):
    """Answers with the number of user messages the conversation holds."""

    @property
    def _llm_type(self) -> str:
        return "conversation-fake"

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        user_messages = sum(1 for message in messages if isinstance(message, HumanMessage))
        message = AIMessage(content=conversation.reply_text(user_messages))
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        # The default runs ``_generate`` in a thread pool, which no real async client does.
        return self._generate(messages)


def build_graph(checkpointer: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    model = ConversationChatModel()
    prompt = {"role": "system", "content": conversation.INSTRUCTIONS}

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([prompt, *state["messages"]])]}

    async def call_model_async(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke([prompt, *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", RunnableLambda(call_model, afunc=call_model_async))
    graph.add_edge(START, "model")
    return graph.compile(checkpointer=checkpointer)


_threads = count(1)


def _turn(number: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": conversation.user_text(number)}]}


def converse(graph: CompiledStateGraph[Any, Any, Any, Any], durability: Durability) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": f"thread-{next(_threads)}"}}
    state: dict[str, Any] = {}
    for number in range(1, conversation.TURNS + 1):
        state = graph.invoke(_turn(number), config, durability=durability)
    _check(state)


async def converse_async(
    graph: CompiledStateGraph[Any, Any, Any, Any], durability: Durability
) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": f"thread-{next(_threads)}"}}
    state: dict[str, Any] = {}
    for number in range(1, conversation.TURNS + 1):
        state = await graph.ainvoke(_turn(number), config, durability=durability)
    _check(state)


def _check(state: dict[str, Any]) -> None:
    expected = conversation.reply_text(conversation.TURNS)
    answer = state["messages"][-1].content
    if answer != expected or len(state["messages"]) != 2 * conversation.TURNS:
        raise RuntimeError(f"the last turn answered {answer!r}, expected {expected!r}")


def _count_writes(saver: BaseCheckpointSaver[Any]) -> Counter[str]:
    """Count the saver's write calls from now on (instance attributes shadow the methods)."""
    calls: Counter[str] = Counter()

    def counted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        if asyncio.iscoroutinefunction(method):

            async def counted_async(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                return await method(*args, **kwargs)

            return counted_async

        def counted_sync(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return method(*args, **kwargs)

        return counted_sync

    for name in WRITES:
        setattr(saver, name, counted(name, getattr(saver, name)))
    return calls


def _result(
    path: Path, milliseconds: list[float], calls: Counter[str], conversations: int
) -> dict[str, Any]:
    return {
        "ms_per_conversation": milliseconds,
        "commits_per_turn": sum(calls.values()) / conversation.TURNS,
        "store_calls_per_turn": {name: calls[name] / conversation.TURNS for name in sorted(calls)},
        "stored_per_conversation": conversation.per_conversation(
            conversation.stored_totals(path, TABLES), conversations + 2
        ),
    }


def blocking_round(path: Path, durability: Durability, conversations: int) -> dict[str, Any]:
    with SqliteSaver.from_conn_string(str(path)) as saver:
        graph = build_graph(saver)
        converse(graph, durability)  # warm-up; creates the tables
        milliseconds = []
        for _ in range(conversations):
            start = time.perf_counter()
            converse(graph, durability)
            milliseconds.append((time.perf_counter() - start) * 1e3)
        calls = _count_writes(saver)
        converse(graph, durability)
    return _result(path, milliseconds, calls, conversations)


async def async_round(path: Path, durability: Durability, conversations: int) -> dict[str, Any]:
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        graph = build_graph(saver)
        await converse_async(graph, durability)
        milliseconds = []
        for _ in range(conversations):
            start = time.perf_counter()
            await converse_async(graph, durability)
            milliseconds.append((time.perf_counter() - start) * 1e3)
        calls = _count_writes(saver)
        await converse_async(graph, durability)
    return _result(path, milliseconds, calls, conversations)


def main(argv: list[str] | None = None) -> None:
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    arguments = conversation.round_arguments(__doc__.splitlines()[0], argv)
    directory: Path = arguments.directory
    directory.mkdir(parents=True, exist_ok=True)
    variants: dict[str, Any] = {}
    for durability in DURABILITY:
        variants[f"invoke, SqliteSaver, durability={durability}"] = blocking_round(
            directory / f"langgraph-sync-{durability}.db", durability, arguments.conversations
        )
        variants[f"ainvoke, AsyncSqliteSaver, durability={durability}"] = asyncio.run(
            async_round(
                directory / f"langgraph-async-{durability}.db",
                durability,
                arguments.conversations,
            )
        )
    versions = {
        name: metadata.version(name)
        for name in ("langgraph", "langgraph-checkpoint-sqlite", "langchain-core", "aiosqlite")
    }
    print(json.dumps({"side": "langgraph", "versions": versions, "variants": variants}))


if __name__ == "__main__":
    main()
