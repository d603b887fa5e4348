"""The app: a validated composition of agents, tools and models, bound to a run store."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fevex._internal.clock import new_id, utc_now
from fevex._internal.composition import Composition, compose
from fevex._internal.engine import AgentExecution
from fevex._internal.event_sink import EventSink
from fevex._internal.sync import iterate_sync, run_sync
from fevex.agents import AgentDefinition
from fevex.errors import FevexConfigurationError, FevexError, FevexRunError
from fevex.events import RunEvent
from fevex.messages import ContentPart, Message
from fevex.models import ModelGateway, Usage
from fevex.runtime.in_memory_run_store import InMemoryRunStore
from fevex.runtime.records import TERMINAL_STATUSES, AgentRun, Session
from fevex.runtime.run_store import EventOrder, ExecutionCreate, RunStore
from fevex.tools import ToolDefinition

__all__ = ["AgentInput", "Fevex", "RunResult", "create_fevex"]

OutputT = TypeVar("OutputT")
AgentInput = str | Message | Sequence[ContentPart]
_STORE_METHODS = ("create_execution", "commit_execution", "get_run", "list_events")


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """A finished run: ``output`` is the validated value (the agent's output schema type,
    or text), ``events`` every event the run committed."""

    run_id: str
    session_id: str
    output: OutputT
    usage: Usage
    events: tuple[RunEvent, ...]


def create_fevex(
    *,
    models: Mapping[str, ModelGateway] | None = None,
    agents: Iterable[AgentDefinition] = (),
    tools: Iterable[ToolDefinition] = (),
    run_store: RunStore | str | None = None,
    on_event: Callable[[RunEvent], Any] | Sequence[Callable[[RunEvent], Any]] | None = None,
) -> Fevex:
    """Validate the whole composition and return the app.

    ``run_store`` is a store, a store URL, or ``None`` to use ``FEVEX_RUN_STORE``
    (``memory://`` when unset). ``on_event`` observers see every committed event; their
    failures never affect a run.
    """
    composition = compose(models=models, agents=agents, tools=tools, on_event=on_event)
    if run_store is None and not os.environ.get("FEVEX_RUN_STORE"):
        store: RunStore = InMemoryRunStore()
    elif run_store is None or isinstance(run_store, str):
        # Imported here: plugin discovery (pluggy, entry points) is paid only when used.
        from fevex.plugins.discovery import open_run_store

        store = open_run_store(run_store or os.environ["FEVEX_RUN_STORE"])
    elif all(callable(getattr(run_store, name, None)) for name in _STORE_METHODS):
        store = run_store
    else:
        raise FevexConfigurationError(
            "INVALID_CONFIG", f"run_store must be a RunStore or a store URL, not {run_store!r}."
        )
    return Fevex(composition, store)


class Fevex:
    """Runs agents and answers questions about runs and sessions.

    Every coroutine method has a blocking twin with a ``_sync`` suffix for scripts.
    """

    def __init__(
        self, composition: Composition, store: RunStore, *, lease_seconds: float = 30.0
    ) -> None:
        self._composition = composition
        self.run_store = store
        self.lease_seconds = lease_seconds
        # One owner id per app: a recovered run is taken over under a new generation even
        # when a restarted process happens to reuse the id.
        self.lease_owner = f"{socket.gethostname()}:{os.getpid()}:{new_id('app')}"
        self._active: dict[str, AgentExecution] = {}
        self._background: set[asyncio.Task[None]] = set()

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(self._composition.agents)

    # -- starting runs --------------------------------------------------------------

    async def _begin(
        self, agent_name: str, input: AgentInput, session_id: str | None, timeout: float | None
    ) -> tuple[AgentExecution, RunEvent]:
        prepared = self._composition.agents.get(agent_name)
        if prepared is None:
            raise FevexRunError("AGENT_NOT_FOUND", f"There is no agent named {agent_name!r}.")
        user_message = _user_message(input)
        if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
            raise FevexRunError("INVALID_ARGUMENT", "timeout must be a positive number of seconds.")
        session = None
        if session_id is not None:
            if not isinstance(session_id, str) or not session_id:
                raise FevexRunError("INVALID_ARGUMENT", "session_id must be a non-empty string.")
            session = await self.run_store.get_session(session_id)
        else:
            session_id = new_id("ses")
        messages = []
        instructions = prepared.definition.instructions
        if instructions:
            messages.append(Message.system(instructions))
        if session is not None:
            if session.summary:
                messages.append(
                    Message.system(f"Summary of the conversation so far:\n{session.summary}")
                )
            messages.extend(session.messages())
        messages.append(user_message)
        input_json = (
            input if isinstance(input, str) else [p.to_json() for p in user_message.content]
        )
        now = utc_now()
        run = AgentRun(
            new_id("run"), session_id, agent_name, "running", input_json, now, now, revision=1
        )
        sink = EventSink(self.run_store, run, self._composition.observers)
        started = sink.event(
            "run.started",
            {"agent_name": agent_name, "session_id": session_id, "input": input_json},
            now,
        )
        sink.lease = await self.run_store.create_execution(
            ExecutionCreate(
                run,
                None if session is None else session.revision,
                (started,),
                None,
                self.lease_owner,
                self.lease_seconds,
            )
        )
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        execution = AgentExecution(prepared, sink, messages, [user_message], deadline)
        self._active[run.id] = execution
        return execution, started

    async def _events(
        self, execution: AgentExecution, started: RunEvent
    ) -> AsyncGenerator[RunEvent, None]:
        try:
            yield started
            execution.sink.observe(started)
            async with aclosing(execution.events()) as stream:
                async for event in stream:
                    yield event
        finally:
            self._active.pop(execution.run_id, None)

    async def run_agent(
        self,
        agent: str,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> RunResult[Any]:
        """Run an agent to its end and return the validated output.

        Raises the run's error after persisting ``run.failed`` or ``run.cancelled``.
        """
        execution, started = await self._begin(agent, input, session_id, timeout)
        events = [event async for event in self._events(execution, started)]
        run = execution.sink.run
        return RunResult(run.id, run.session_id, execution.output, execution.usage, tuple(events))

    async def stream_agent(
        self,
        agent: str,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        """Yield each committed event as it happens. The run advances only while you ask
        for events; closing the iterator early cancels the run and persists that."""
        execution, started = await self._begin(agent, input, session_id, timeout)
        async with aclosing(self._events(execution, started)) as stream:
            async for event in stream:
                yield event

    async def start_agent(
        self,
        agent: str,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> AgentRun:
        """Start a run in the background and return its first snapshot."""
        execution, started = await self._begin(agent, input, session_id, timeout)
        task = asyncio.create_task(self._drain(execution, started))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return execution.sink.run

    async def _drain(self, execution: AgentExecution, started: RunEvent) -> None:
        # The outcome is in the store; the error has nobody to reach here.
        try:
            async for _ in self._events(execution, started):
                pass
        except (FevexError, asyncio.CancelledError):
            pass
        except Exception:
            pass

    # -- consulting and controlling runs --------------------------------------------

    async def get_run(self, run_id: str) -> AgentRun:
        run = await self.run_store.get_run(run_id)
        if run is None:
            raise FevexRunError("RUN_NOT_FOUND", f"There is no run {run_id!r}.")
        return run

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> list[RunEvent]:
        """A run's events by sequence; ``after`` is an event id of the same run."""
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
        ):
            raise FevexRunError("INVALID_ARGUMENT", "limit must be a positive integer.")
        if order not in ("asc", "desc"):
            raise FevexRunError("INVALID_ARGUMENT", "order must be 'asc' or 'desc'.")
        await self.get_run(run_id)
        return list(await self.run_store.list_events(run_id, after=after, limit=limit, order=order))

    async def cancel_run(self, run_id: str) -> AgentRun:
        """Cancel a run executing in this app; a finished run is returned unchanged."""
        execution = self._active.get(run_id)
        if execution is not None:
            await execution.cancel()
            await execution.settled.wait()
            return await self.get_run(run_id)
        run = await self.get_run(run_id)
        if run.status in TERMINAL_STATUSES:
            return run
        raise FevexRunError(
            "RUN_NOT_ACTIVE",
            f"Run {run_id} is {run.status} but not executing in this process.",
        )

    # -- sessions -------------------------------------------------------------------

    async def get_session(self, session_id: str) -> Session:
        session = await self.run_store.get_session(session_id)
        if session is None:
            raise FevexRunError("SESSION_NOT_FOUND", f"There is no session {session_id!r}.")
        return session

    async def compact_session(
        self, session_id: str, summary: str, *, revision: int | None = None
    ) -> Session:
        """Replace the session's history with ``summary``. ``revision`` is the revision of
        the snapshot the summary was written from (default: the current one); a session
        changed since then, or held by a run, is rejected."""
        if not isinstance(summary, str):
            raise FevexRunError("INVALID_ARGUMENT", "summary must be a string.")
        session = await self.get_session(session_id)
        expected = session.revision if revision is None else revision
        compacted = dataclasses.replace(session, history=(), summary=summary, updated_at=utc_now())
        return await self.run_store.save_session(compacted, expected_revision=expected)

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.run_store.close()

    # -- blocking twins -------------------------------------------------------------

    def run_agent_sync(
        self,
        agent: str,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> RunResult[Any]:
        return run_sync(self.run_agent(agent, input, session_id=session_id, timeout=timeout))

    def stream_agent_sync(
        self,
        agent: str,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> Iterator[RunEvent]:
        return iterate_sync(self.stream_agent(agent, input, session_id=session_id, timeout=timeout))

    def get_run_sync(self, run_id: str) -> AgentRun:
        return run_sync(self.get_run(run_id))

    def list_events_sync(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> list[RunEvent]:
        return run_sync(self.list_events(run_id, after=after, limit=limit, order=order))

    def get_session_sync(self, session_id: str) -> Session:
        return run_sync(self.get_session(session_id))

    def compact_session_sync(
        self, session_id: str, summary: str, *, revision: int | None = None
    ) -> Session:
        return run_sync(self.compact_session(session_id, summary, revision=revision))

    def close_sync(self) -> None:
        run_sync(self.close())


def _user_message(input: Any) -> Message:
    if isinstance(input, str):
        return Message.user(input)
    if isinstance(input, Message):
        if input.role != "user":
            raise FevexRunError("INVALID_INPUT", "An input message must have the user role.")
        return input
    if isinstance(input, Sequence) and input and all(hasattr(p, "to_json") for p in input):
        return Message.user(input)
    raise FevexRunError(
        "INVALID_INPUT",
        "Agent input must be text, a user Message or a list of content parts.",
        category="validation",
    )
