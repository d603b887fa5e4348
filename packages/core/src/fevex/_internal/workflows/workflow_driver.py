"""The step driver of workflow runs: the workflow function, replayed from the start on
every takeover, its steps answered from the journal when they ran already.

The driver is the :class:`~fevex._internal.workflows.step_host.StepHost` of the run's
steps: they reach the kernel, the store, the tools and the event sink only through it.

Each step is a journal entry under its ``step_id``. A new step is journalled ``started``
and committed with ``workflow.step.started`` (before the effect for tool and agent steps,
whose effect must not run twice; with the completion for ``run`` steps, which are
at-least-once: one interrupted mid-call runs again), then ``completed`` or ``failed``;
a team's events go by the team's names, the
:class:`~fevex._internal.workflows.step_host.StepEvents` its kind hands the driver. A
wait (an event, a timer, a paused child run) raises :class:`Suspended` out of the
function; the driver turns it into the run's pause, and whatever ends the wait settles the
entry in the checkpoint (see :mod:`fevex._internal.engine.waits`) for the next replay to find.

Each step's start and end is logged at DEBUG on the ``fevex`` logger, with the run id and
the step id in ``extra`` (never its input or output). A child run's ``run.started`` names
the step that started it (``parent_step_id``), which links their traces.

A step given ``compensate=`` is remembered, in completed order, in the checkpoint. When
the function fails, the compensations of those steps run in reverse order, each
journalled in a journal of its own (``completed`` ones never run again, so a crash
mid-chain resumes it); their callables come from the replay, which reaches every
completed step again before it reaches the failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from fevex._ground.clock import new_id
from fevex._internal.composition.tool_runner import ToolCallRun, summarize
from fevex._internal.engine.deadline import DeadlineReached
from fevex._internal.engine.execution import Execution
from fevex._internal.engine.journal import JournalEntry
from fevex._internal.engine.kernel import child_run
from fevex._internal.engine.model_calls import ModelCallGate
from fevex._internal.engine.waits import children_pause, event_pause, timer_pause
from fevex._internal.workflows.run_tree import read_run_tree
from fevex._internal.workflows.step_host import (
    NO_ANNOUNCEMENT,
    AgentChild,
    Announcement,
    RunTree,
    StepEvents,
    StepHost,
)
from fevex._internal.workflows.workflow_state import (
    Suspended,
    WorkflowState,
    call_for_run,
    error_from_json,
    invalid_step,
)
from fevex._internal.workflows.workflow_steps import WorkflowSteps
from fevex.agents import AgentDefinition, Limits
from fevex.errors import FevexError, FevexRunError
from fevex.events import RunEvent
from fevex.models import ToolCall, Usage
from fevex.runtime.records import AgentRun
from fevex.schemas.schema import CompiledSchema, ensure_json
from fevex.tools import ToolDefinition

if TYPE_CHECKING:
    from fevex._internal.agents.agent_kind import AgentKind
    from fevex._internal.composition.registry import Composition, PreparedWorkflow
    from fevex._internal.engine.kernel import Kernel

__all__ = ["WorkflowDriver", "WorkflowParts"]

logger = logging.getLogger("fevex")

# Failures that are not the workflow's: its code changed under the run, or another
# process holds it. Nothing is undone for them.
NOT_COMPENSATED = frozenset({"STEP_MISMATCH", "LEASE_LOST", "WORKFLOW_VERSION_MISMATCH"})


class WorkflowParts(Protocol):
    """What the driver of a workflow run uses of its kind: the kernel that starts its
    children, the app's agents and composition (its tools), and the names its events go
    by (a workflow's, a team's)."""

    @property
    def kernel(self) -> Kernel: ...

    @property
    def agents(self) -> AgentKind: ...

    @property
    def composition(self) -> Composition: ...

    @property
    def step_events(self) -> StepEvents: ...


class WorkflowDriver(StepHost):
    """The steps of one workflow run in this process: the function's replay, and the
    host its steps talk to."""

    execution: Execution

    def __init__(self, parts: WorkflowParts, prepared: PreparedWorkflow, state: WorkflowState):
        self._parts = parts
        self._events = parts.step_events
        self.prepared = prepared
        self.state = state
        # Events committed and not yet taken by the run's stream, in commit order, each
        # with the future its publisher waits on; the stream's wake-up when it is empty.
        self._outbox: deque[tuple[RunEvent, asyncio.Future[None] | None]] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        # step id -> what its events announce, for each step this pass claimed.
        self._claimed: dict[str, Announcement] = {}
        # Parallel branches emit concurrently; the sink commits one event at a time.
        self._emitting = asyncio.Lock()
        # step id -> its compensation and the result it is called with (this replay's).
        self._compensations: dict[str, tuple[Callable[[Any], Any], Any]] = {}

    @property
    def usage(self) -> Usage:
        total = Usage()
        for entry in self.state.journal.entries.values():
            if entry.kind == "agent" and entry.status == "completed":
                output = entry.output if isinstance(entry.output, dict) else {}
                total = total + Usage.from_json(output.get("usage") or {})
        return total

    @property
    def limits(self) -> Mapping[str, int | None]:
        return self.state.limits

    @property
    def entries(self) -> Mapping[str, JournalEntry]:
        return self.state.journal.entries

    @property
    def workflow_name(self) -> str:
        return self.prepared.definition.name

    @property
    def declared_events(self) -> Mapping[str, CompiledSchema | None]:
        return self.prepared.events

    def checkpoint(self) -> dict[str, Any]:
        return self.state.checkpoint()

    # -- the run --------------------------------------------------------------------

    async def steps(self, execution: Execution) -> AsyncGenerator[RunEvent, None]:
        """Each event of the pass as it is committed: the function runs in a task of its
        own and waits for the stream to take each event (the run advances only while its
        consumer asks, as an agent's does); then the pass's pause or completion."""
        self.execution = execution
        loop = asyncio.get_running_loop()
        passing = asyncio.ensure_future(self._pass())
        passing.add_done_callback(self._wake)
        try:
            while True:
                while self._outbox:
                    event, taken = self._outbox.popleft()
                    yield event
                    if taken is not None and not taken.done():
                        taken.set_result(None)
                if passing.done():
                    break
                self._wakeup = loop.create_future()
                await self._wakeup
        finally:
            if not passing.done():
                # Not twice: a pass cancelled already (every task of the loop is, when a
                # script exits) is committing its children's cancellation, which a second
                # cancel would interrupt, leaving a child running.
                if not passing.cancelling():
                    passing.cancel()
                await asyncio.wait((passing,))
        pause, output = passing.result()
        if pause is not None:
            yield await execution.suspend(pause, self.checkpoint)
            return
        output_json = self._output_json(output)
        yield await execution.complete(output, output_json, self.usage.to_json(), ())

    async def _pass(self) -> tuple[dict[str, Any] | None, Any]:
        """Replay the function once: ``(pause, None)`` when it waits, ``(None, output)``
        when it returns; its failure, once the compensations ran, is raised."""
        definition = self.prepared.definition
        try:
            schema = self.prepared.input_schema
            value = self.state.input if schema is None else schema.validate(self.state.input)
            return None, await definition.run(WorkflowSteps(self), value)
        except Suspended as suspended:
            # Emitted for the pause the run takes: of several parallel branches waiting,
            # only the first waits now.
            pause = suspended.pause
            await self.emit(
                self._events.waiting,
                {key: value for key, value in pause.items() if value is not None},
                durable=False,
            )
            return pause, None
        except DeadlineReached:
            raise
        except Exception as error:
            failure = (
                error
                if isinstance(error, FevexError)
                else FevexRunError(
                    "WORKFLOW_FAILED",
                    f"Workflow {definition.name} raised {type(error).__name__}: {error}",
                )
            )
            if failure.code not in NOT_COMPENSATED:
                failure = await self._compensate(failure)
            if failure is error:
                raise
            raise failure from error

    def _wake(self, _: object = None) -> None:
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    async def _publish(self, event: RunEvent) -> None:
        """Hand ``event`` to the run's stream and, when a caller consumes the stream
        (``stream_workflow``), wait until it has taken it."""
        taken = self._enqueue(event)
        if taken is not None:
            await taken

    def _enqueue(self, event: RunEvent) -> asyncio.Future[None] | None:
        # A batching run's stream is read by fevex itself to its end: nothing to wait for.
        taken = None
        if not self.execution.sink.batching:
            taken = asyncio.get_running_loop().create_future()
        self._outbox.append((event, taken))
        self._wake()
        return taken

    def _output_json(self, output: Any) -> Any:
        schema = self.prepared.output_schema
        try:
            output_json = output if schema is None else schema.to_json(schema.validate(output))
            ensure_json(output_json)
        except Exception as error:
            raise FevexRunError(
                "OUTPUT_INVALID",
                f"The output of workflow {self.prepared.definition.name} is invalid: "
                f"{summarize(error)}",
                category="validation",
            ) from None
        return output_json

    async def emit(self, type: str, payload: dict[str, Any], *, durable: bool = True) -> None:
        async with self._emitting:
            event = await self.execution.sink.emit(
                type, payload, durable=durable, checkpoint=self.checkpoint
            )
            taken = self._enqueue(event)  # in commit order
        if taken is not None:
            await taken

    # -- compensations --------------------------------------------------------------

    def remember(self, step_id: str, compensate: Callable[[Any], Any] | None, output: Any) -> None:
        """Keep the compensation of a completed step (live or replayed) for a failure."""
        if compensate is None:
            return
        self._compensations[step_id] = (compensate, output)
        if step_id not in self.state.compensable:
            self.state.compensable.append(step_id)

    async def _compensate(self, error: FevexError) -> FevexError:
        """Run the compensations of the completed steps, latest first, and return the
        run's error: the workflow's failure, or ``WORKFLOW_COMPENSATION_FAILED`` with both
        errors when a compensation fails (the chain stops there)."""
        state = self.state
        if not state.compensable:
            return error
        if state.failure is None:
            state.failure, failure = error.to_json(), error
        else:
            # A chain a crash interrupted: the run fails with the failure that started it.
            failure = error_from_json(state.failure)
        journal = state.compensations
        named = self._events.compensation
        for step_id in reversed(state.compensable):
            identity = {"step_id": step_id}
            entry = journal.lookup(step_id, "compensation", identity)
            if entry is not None and entry.status == "completed":
                continue
            if entry is not None and entry.status == "failed":
                return _compensation_failed(failure, step_id, error_from_json(entry.error))
            remembered = self._compensations.get(step_id)
            if remembered is None:
                journal.started(step_id, "compensation", identity)
                problem = FevexRunError(
                    "STEP_MISMATCH",
                    f"Step {step_id!r} has a compensation, but the replay did not reach it "
                    "with one: the code that failed the run is not the code that started it.",
                    details={"step_id": step_id},
                )
                return await self._compensation_ended(failure, step_id, problem)
            compensate, output = remembered
            journal.started(step_id, "compensation", identity)
            await self.emit(f"{named}.started", identity, durable=False)
            try:
                await call_for_run(self.execution, compensate, output)
            except (asyncio.CancelledError, DeadlineReached):
                raise
            except FevexError as problem:
                return await self._compensation_ended(failure, step_id, problem)
            except Exception as problem:
                wrapped = FevexRunError(
                    "WORKFLOW_STEP_FAILED",
                    f"The compensation of step {step_id!r} failed: "
                    f"{type(problem).__name__}: {problem}",
                    details={"step_id": step_id},
                )
                return await self._compensation_ended(failure, step_id, wrapped)
            journal.completed(step_id, None)
            await self.emit(f"{named}.completed", identity)
        return failure

    async def _compensation_ended(
        self, failure: FevexError, step_id: str, problem: FevexError
    ) -> FevexError:
        self.state.compensations.failed(step_id, problem.to_json())
        await self.emit(
            f"{self._events.compensation}.failed",
            {"step_id": step_id, "error": problem.to_json()},
        )
        return _compensation_failed(failure, step_id, problem)

    # -- the journal ----------------------------------------------------------------

    def lookup(
        self, step_id: str, kind: str, identity: Any, announce: Announcement = NO_ANNOUNCEMENT
    ) -> JournalEntry | None:
        if not isinstance(step_id, str) or not step_id:
            raise invalid_step(f"A step id must be a non-empty string, not {step_id!r}.")
        if step_id in self._claimed:
            raise FevexRunError(
                "STEP_MISMATCH",
                f"Step id {step_id!r} is used twice in one run; each step needs its own id.",
                details={"step_id": step_id},
            )
        self._claimed[step_id] = announce
        try:
            ensure_json(identity)
        except TypeError as error:
            raise invalid_step(f"Step {step_id!r}: its input is not JSON: {error}.") from None
        return self.state.journal.lookup(step_id, kind, identity)

    async def start(self, step_id: str, kind: str, identity: Any, *, durable: bool) -> None:
        journal = self.state.journal
        limit = self.state.limits.get("max_steps")
        if limit is not None and len(journal.entries) >= limit:
            raise FevexRunError(
                "MAX_STEPS_EXCEEDED",
                f"The workflow needed more than {limit} steps.",
                details={"limit": limit},
            )
        if kind == "tool":
            tool_limit = self.state.limits.get("max_tool_calls")
            used = sum(1 for entry in journal.entries.values() if entry.kind == "tool")
            if tool_limit is not None and used >= tool_limit:
                raise FevexRunError(
                    "MAX_TOOL_CALLS_EXCEEDED",
                    f"The workflow needed more than {tool_limit} tool steps.",
                    details={"limit": tool_limit},
                )
        journal.started(step_id, kind, identity)
        self._log_step(step_id, kind, "started")
        preface = self._claimed.get(step_id, NO_ANNOUNCEMENT).preface
        if preface is not None:
            # Committed with the journal's ``started`` entry (the checkpoint of this
            # commit holds it), so no replay announces it again.
            await self.emit(*preface, durable=True)
        await self._step_event(step_id, kind, "started", {}, durable=durable)

    async def complete(self, step_id: str, output: Any, **announced: Any) -> Any:
        entry = self.state.journal.completed(step_id, output)
        self.state.announced.add(step_id)
        self._log_step(step_id, entry.kind, "completed")
        await self._step_event(step_id, entry.kind, "completed", {"output": output, **announced})
        return output

    async def fail(self, step_id: str, error: FevexError) -> FevexError:
        entry = self.state.journal.failed(step_id, error.to_json())
        self.state.announced.add(step_id)
        self._log_step(step_id, entry.kind, "failed", error.code)
        await self._step_event(step_id, entry.kind, "failed", {"error": error.to_json()})
        return error

    async def _step_event(
        self,
        step_id: str,
        kind: str,
        ending: str,
        fields: dict[str, Any],
        *,
        durable: bool = True,
    ) -> None:
        """``<step>.started``, ``.completed`` or ``.failed``, named as the run's kind
        names its steps, with what the step announces."""
        events, announce = self._events, self._claimed.get(step_id, NO_ANNOUNCEMENT)
        payload: dict[str, Any] = {"step_id": step_id}
        if events.names_kind:
            payload["kind"] = kind
        payload.update(fields)
        payload.update(announce.fields)
        if ending == "started":
            payload.update(announce.on_start)
        await self.emit(events.of_step(kind, ending), payload, durable=durable)

    def _log_step(self, step_id: str, kind: str, what: str, code: str | None = None) -> None:
        if not logger.isEnabledFor(logging.DEBUG):
            return
        run = self.execution.sink.run
        logger.debug(
            "Run %s: %s step %s %s%s",
            run.id,
            kind,
            step_id,
            what,
            "" if code is None else f" with {code}",
            extra={"run_id": run.id, "step_id": step_id, "step_kind": kind, "step_status": what},
        )

    async def replayed(self, step_id: str, entry: JournalEntry, event: str = "") -> Any:
        """A step the journal holds as ended: its stored result, or its failure raised.
        The end of a wait a takeover settled is announced now, once."""
        announce = step_id not in self.state.announced
        if entry.status == "failed":
            error = error_from_json(entry.error)
            if announce:
                await self.fail(step_id, error)
            raise error
        if announce:
            if entry.kind == "event":
                self.state.announced.add(step_id)
                self._log_step(step_id, "event", "completed")
                output = entry.output if isinstance(entry.output, dict) else {}
                await self.emit(
                    self._events.event_received,
                    {
                        "step_id": step_id,
                        "event": event,
                        "actor": output.get("actor"),
                        "received_at": output.get("received_at"),
                    },
                    # With the takeover that settled the wait, at the run's next commit.
                    durable=False,
                )
            else:
                await self.complete(step_id, entry.output)
        return entry.output

    # -- waits ----------------------------------------------------------------------

    async def wait_for_event(self, step_id: str, name: str) -> NoReturn:
        raise Suspended(event_pause(step_id, name))

    async def wait_for_timer(self, step_id: str, seconds: float) -> NoReturn:
        # Set when the step starts; a replay of the wait keeps that time.
        wake_at = self.state.timers.setdefault(step_id, time.time() + seconds)
        raise Suspended(timer_pause(step_id, wake_at))

    async def wait_for_children(self, step_id: str, run_ids: Sequence[str]) -> NoReturn:
        raise Suspended(children_pause(step_id, run_ids))

    # -- effects --------------------------------------------------------------------

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return await call_for_run(self.execution, function, *args)

    def tool(self, name: str) -> ToolDefinition[Any, Any] | None:
        prepared = self._parts.composition.tools.get(name)
        return None if prepared is None else prepared.definition

    async def run_tool(self, step_id: str, name: str, input: Any) -> Any:
        composition, execution = self._parts.composition, self.execution
        run = execution.sink.run
        runner = ToolCallRun(
            composition.tools[name],
            ToolCall(step_id, name, input),
            run_id=run.id,
            session_id=run.session_id,
            agent_name=run.name,
            policies=composition.policies,
            credentials=composition.credentials,
            cancellation=execution.cancellation,
            guard=execution.guard,
            on_tool_exception=composition.on_tool_exception,
        )
        return await runner.execute()

    def agent(self, name: str) -> AgentDefinition[Any]:
        return self._parts.agents.agent(name).definition

    # -- child runs -----------------------------------------------------------------

    async def agent_child(
        self, name: str, input: Any, *, session_id: str | None, limits: Limits
    ) -> AgentChild:
        agents = self._parts.agents
        store = self._parts.kernel.store
        session = None if session_id is None else await store.get_session(session_id)
        run, loop = agents.new_run(name, input, session_id or new_id("ses"), None, session, limits)
        return AgentChild(
            name,
            run.input,
            agents.agent(name).output_schema,
            run,
            loop,
            None if session is None else session.revision,
        )

    async def workflow_child(self, name: str, input: Any) -> AgentChild:
        # The app's workflow kind, as the kernel registered it (it builds drivers of this
        # class, so it is known here by what it does, not imported).
        begin = getattr(self._parts.kernel.kinds.get("workflow"), "begin", None)
        if begin is None:
            raise FevexRunError("WORKFLOW_NOT_FOUND", f"There is no workflow named {name!r}.")
        run, driver = begin(name, input, None, None)
        assert isinstance(run, AgentRun)
        assert isinstance(driver, WorkflowDriver)
        opening = {"workflow_name": run.name, "version": run.version, "input": run.input}
        return AgentChild(
            name,
            run.input,
            driver.prepared.output_schema,
            run,
            driver,
            None,
            {**opening, "session_id": run.session_id},
        )

    async def cancel_child(self, step_id: str) -> None:
        child_id = self.state.children.get(step_id)
        if child_id is None:
            return
        kernel = self._parts.kernel
        if child_id in kernel.active or await kernel.store.get_run(child_id) is not None:
            await kernel.cancel(child_id, kernel.lease_seconds)

    async def run_tree(self) -> RunTree:
        return await read_run_tree(self._parts.kernel.store, self.execution.sink.run, self.limits)

    @contextlib.contextmanager
    def model_calls(self, tree: RunTree) -> Iterator[ModelCallGate]:
        gates, root = self._parts.kernel.model_gates, tree.root_run_id
        gate = gates.get(root)
        if gate is None:
            limits = tree.root_limits
            gate = gates[root] = ModelCallGate(
                root,
                in_flight=limits.get("max_concurrent_model_calls"),
                budget=limits.get("max_model_calls"),
                used=tree.model_calls,
            )
        gate.holders += 1
        try:
            yield gate
        finally:
            gate.holders -= 1
            if gate.holders == 0 and gates.get(root) is gate:
                del gates[root]

    def child_of(self, step_id: str) -> str | None:
        return self.state.children.get(step_id)

    def reserve_child(self, step_id: str) -> str:
        child_id = self.state.children[step_id] = new_id("run")
        return child_id

    async def run_child(self, step_id: str, child: AgentChild) -> AgentRun:
        kernel, execution = self._parts.kernel, self.execution
        child_id = self.state.children[step_id]
        stored = await kernel.store.get_run(child_id)
        if stored is None:
            parent = execution.sink.run
            started = await kernel.start(
                child_run(parent, dataclasses.replace(child.run, id=child_id)),
                child.driver,
                session_revision=child.session_revision,
                opening={
                    **(
                        child.opening
                        or {
                            "agent_name": child.name,
                            "session_id": child.run.session_id,
                            "input": child.input,
                        }
                    ),
                    "parent_run_id": parent.id,
                    "parent_step_id": step_id,
                },
                deadline=execution.deadline,
                batching=execution.sink.batching,
            )
            try:
                # Guarded: cancelling the workflow cancels its child first.
                await execution.guard(self._drain(started, step_id, child.name))
            except FevexError as child_error:
                if child_error.run_id != child_id:
                    raise  # the workflow's own (its lease was lost)
                # The child's failure is in the store: read below.
            stored = await kernel.store.get_run(child_id)
            assert stored is not None
        if stored.status not in ("running", "paused"):
            del self.state.children[step_id]
        return stored

    async def _drain(self, child: Execution, step_id: str, agent_name: str) -> None:
        """Run a child to its end or its pause; its events join the workflow's stream."""
        relay = self._events.relay
        async for event in self._parts.kernel.events(child):
            await self._publish(relay(event, step_id, agent_name))


def _compensation_failed(failure: FevexError, step_id: str, problem: FevexError) -> FevexRunError:
    return FevexRunError(
        "WORKFLOW_COMPENSATION_FAILED",
        f"The workflow failed ({failure.code}: {failure.message}) and the compensation of "
        f"step {step_id!r} failed too ({problem.code}: {problem.message}).",
        details={
            "step_id": step_id,
            "error": failure.to_json(),
            "compensation_error": problem.to_json(),
        },
    )
