"""The step driver of workflow runs: the workflow function, replayed from the start on
every takeover, its steps answered from the journal when they ran already.

Each step is a journal entry under its ``step_id``. A new step is journalled ``started``
and committed with ``workflow.step.started`` (before the effect for tool and agent steps,
whose effect must not run twice; with the completion for ``run`` steps, which are
at-least-once: one interrupted mid-call runs again), then ``completed`` or ``failed``. A
wait (an event, a timer, a paused child run) raises :class:`Suspended` out of the
function; the driver turns it into the run's pause, and whatever ends the wait settles the
entry in the checkpoint (see :mod:`fevex._internal.waits`) for the next replay to find.

``parallel`` runs its branches as tasks and settles every one before it ends; its own
entry only checks its identity and announces its end: on a replay the branches run again
and their steps answer from the journal. Several branches that pause pause the run on
the first, in declaration order; the replay after that wait re-pauses on the next.

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
import dataclasses
import inspect
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from fevex._internal.clock import new_id
from fevex._internal.deadline import DeadlineReached
from fevex._internal.execution import Execution
from fevex._internal.journal import JournalEntry, StepJournal
from fevex._internal.kernel import child_run
from fevex._internal.tool_runner import ToolCallRun, summarize
from fevex._internal.waits import children_pause, event_pause, timer_pause
from fevex.agents import AgentDefinition, Limits
from fevex.errors import FevexError, FevexRunError
from fevex.events import RunEvent
from fevex.models import ToolCall, Usage
from fevex.schemas.schema import ensure_json
from fevex.tools import ToolDefinition
from fevex.workflows.step import AgentStepResult, EventDelivery

if TYPE_CHECKING:
    from fevex._internal.composition import PreparedWorkflow
    from fevex._internal.workflow_kind import WorkflowKind

__all__ = ["Suspended", "WorkflowDriver", "WorkflowState"]

logger = logging.getLogger("fevex")

CHECKPOINT_VERSION = 1
# Failures that are not the workflow's: its code changed under the run, or another
# process holds it. Nothing is undone for them.
NOT_COMPENSATED = frozenset({"STEP_MISMATCH", "LEASE_LOST", "WORKFLOW_VERSION_MISMATCH"})


class Suspended(BaseException):
    """Raised out of the workflow function to pause the run; a ``BaseException`` so that
    the function's own ``except Exception`` cannot swallow a pause."""

    def __init__(self, pause: dict[str, Any]) -> None:
        super().__init__(pause.get("reason"))
        self.pause = pause


@dataclasses.dataclass(slots=True)
class WorkflowState:
    """Everything a workflow run needs to continue, as its checkpoint keeps it."""

    input: Any
    limits: dict[str, int | None]
    journal: StepJournal
    # step id -> the child run of an agent step (known before the child is created).
    children: dict[str, str] = dataclasses.field(default_factory=dict)
    # step id -> when its timer fires (seconds since the epoch).
    timers: dict[str, float] = dataclasses.field(default_factory=dict)
    # Steps whose end has an event already (a wait settled by a takeover has none yet).
    announced: set[str] = dataclasses.field(default_factory=set)
    # Completed steps that have a compensation, in the order they completed.
    compensable: list[str] = dataclasses.field(default_factory=list)
    # The compensations run so far, by the id of the step they undo.
    compensations: StepJournal = dataclasses.field(default_factory=StepJournal)
    # The failure that started the compensations: the run's error once they are done.
    failure: dict[str, Any] | None = None

    def checkpoint(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION,
            "input": self.input,
            "limits": self.limits,
            "journal": self.journal.to_json(),
            "children": self.children,
            "timers": self.timers,
            "announced": sorted(self.announced),
            "compensable": self.compensable,
            "compensations": self.compensations.to_json(),
            "failure": self.failure,
        }

    @classmethod
    def from_checkpoint(cls, run_id: str, checkpoint: Any) -> WorkflowState:
        try:
            if checkpoint.get("version") != CHECKPOINT_VERSION:
                raise ValueError("unknown checkpoint version")
            return cls(
                checkpoint["input"],
                dict(checkpoint["limits"]),
                StepJournal.from_json(checkpoint["journal"]),
                {str(k): str(v) for k, v in checkpoint["children"].items()},
                {str(k): float(v) for k, v in checkpoint["timers"].items()},
                {str(step) for step in checkpoint["announced"]},
                [str(step) for step in checkpoint.get("compensable", ())],
                StepJournal.from_json(checkpoint.get("compensations", {})),
                checkpoint.get("failure"),
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            raise FevexRunError(
                "CHECKPOINT_UNSUPPORTED",
                f"The checkpoint of workflow run {run_id} cannot be read by this fevex.",
                details={"run_id": run_id, "reason": "malformed"},
            ) from None


def limits_json(limits: Limits) -> dict[str, int | None]:
    return {
        "max_steps": limits.max_steps,
        "max_tool_calls": limits.max_tool_calls,
        "max_input_tokens": limits.max_input_tokens,
        "max_output_tokens": limits.max_output_tokens,
    }


def error_from_json(error: dict[str, Any] | None) -> FevexRunError:
    """The stored failure of a step, raised again as it was on every replay."""
    error = error or {}
    return FevexRunError(
        str(error.get("code", "WORKFLOW_STEP_FAILED")),
        str(error.get("message", "The step failed.")),
        recoverable=bool(error.get("recoverable", False)),
        details=dict(error.get("details") or {}),
    )


class WorkflowDriver:
    """The steps of one workflow run in this process: the function's replay and the
    :class:`~fevex.workflows.WorkflowStep` it is handed."""

    execution: Execution

    def __init__(self, kind: WorkflowKind, prepared: PreparedWorkflow, state: WorkflowState):
        self.kind = kind
        self.prepared = prepared
        self.state = state
        # Events committed and not yet taken by the run's stream, in commit order, each
        # with the future its publisher waits on; the stream's wake-up when it is empty.
        self._outbox: deque[tuple[RunEvent, asyncio.Future[None] | None]] = deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._replayed: set[str] = set()
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
            pause = suspended.pause
            await self.emit(
                "workflow.waiting",
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

    async def publish(self, event: RunEvent) -> None:
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

    # -- the journal ----------------------------------------------------------------

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
            await self.emit("workflow.compensation.started", identity, durable=False)
            try:
                await _call(self.execution, compensate, output)
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
            await self.emit("workflow.compensation.completed", identity)
        return failure

    async def _compensation_ended(
        self, failure: FevexError, step_id: str, problem: FevexError
    ) -> FevexError:
        self.state.compensations.failed(step_id, problem.to_json())
        await self.emit(
            "workflow.compensation.failed", {"step_id": step_id, "error": problem.to_json()}
        )
        return _compensation_failed(failure, step_id, problem)

    def lookup(self, step_id: str, kind: str, identity: Any) -> JournalEntry | None:
        if not isinstance(step_id, str) or not step_id:
            raise _invalid_step(f"A step id must be a non-empty string, not {step_id!r}.")
        if step_id in self._replayed:
            raise FevexRunError(
                "STEP_MISMATCH",
                f"Step id {step_id!r} is used twice in one run; each step needs its own id.",
                details={"step_id": step_id},
            )
        self._replayed.add(step_id)
        try:
            ensure_json(identity)
        except TypeError as error:
            raise _invalid_step(f"Step {step_id!r}: its input is not JSON: {error}.") from None
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
        await self.emit(
            "workflow.step.started", {"step_id": step_id, "kind": kind}, durable=durable
        )

    async def complete(self, step_id: str, output: Any, **announced: Any) -> Any:
        entry = self.state.journal.entries[step_id]
        entry.status, entry.output, entry.error = "completed", output, None
        self.state.announced.add(step_id)
        self._log_step(step_id, entry.kind, "completed")
        await self.emit(
            "workflow.step.completed",
            {"step_id": step_id, "kind": entry.kind, "output": output, **announced},
        )
        return output

    async def fail(self, step_id: str, error: FevexError) -> FevexError:
        """Journal the step ``failed`` (a replay raises the same error) and return the
        error to raise."""
        entry = self.state.journal.entries[step_id]
        entry.status, entry.output, entry.error = "failed", None, error.to_json()
        self.state.announced.add(step_id)
        self._log_step(step_id, entry.kind, "failed", error.code)
        await self.emit(
            "workflow.step.failed",
            {"step_id": step_id, "kind": entry.kind, "error": error.to_json()},
        )
        return error

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
                    "workflow.event.received",
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

    def relay(self, step_id: str, event: RunEvent) -> RunEvent:
        """An event of the child run of the agent step ``step_id``, as the workflow's
        stream yields it (a team's marks it with its delegation)."""
        return event

    async def wait(self, step_id: str, pause: dict[str, Any]) -> None:
        # ``workflow.waiting`` is emitted for the pause the run takes: of several parallel
        # branches waiting, only the first waits now.
        raise Suspended(pause)


class WorkflowSteps:
    """The :class:`~fevex.workflows.WorkflowStep` a workflow function receives."""

    __slots__ = ("_driver",)

    def __init__(self, driver: WorkflowDriver) -> None:
        self._driver = driver

    @property
    def driver(self) -> WorkflowDriver:
        """The driver replaying the run (a team's wraps these steps)."""
        return self._driver

    async def run(
        self,
        step_id: str,
        function: Callable[..., Any],
        /,
        *args: Any,
        compensate: Callable[[Any], Any] | None = None,
    ) -> Any:
        driver = self._driver
        if not callable(function):
            raise _invalid_step(f"Step {step_id!r}: {function!r} is not callable.")
        _check_compensation(step_id, compensate)
        identity = {"function": _function_name(function), "args": list(args)}
        entry = driver.lookup(step_id, "run", identity)
        if entry is not None and entry.status != "started":
            output = await driver.replayed(step_id, entry)
            driver.remember(step_id, compensate, output)
            return output
        if entry is None:
            await driver.start(step_id, "run", identity, durable=False)
        try:
            result = await _call(driver.execution, function, *args)
        except (asyncio.CancelledError, DeadlineReached):
            raise
        except FevexError as error:
            raise await driver.fail(step_id, error) from None
        except Exception as error:
            failure = FevexRunError(
                "WORKFLOW_STEP_FAILED",
                f"Step {step_id!r} failed: {type(error).__name__}: {error}",
                details={"step_id": step_id},
            )
            raise await driver.fail(step_id, failure) from error
        try:
            ensure_json(result)
        except TypeError as error:
            raise await driver.fail(
                step_id,
                FevexRunError(
                    "WORKFLOW_STEP_OUTPUT_INVALID",
                    f"Step {step_id!r} returned what is not JSON: {error}.",
                    details={"step_id": step_id},
                ),
            ) from None
        driver.remember(step_id, compensate, result)
        return await driver.complete(step_id, result)

    async def tool(
        self,
        step_id: str,
        tool: str | ToolDefinition,
        input: Any,
        *,
        compensate: Callable[[Any], Any] | None = None,
    ) -> Any:
        driver = self._driver
        _check_compensation(step_id, compensate)
        name = tool.name if isinstance(tool, ToolDefinition) else tool
        prepared = driver.kind.composition.tools.get(name) if isinstance(name, str) else None
        if prepared is None or (
            isinstance(tool, ToolDefinition) and prepared.definition is not tool
        ):
            raise FevexRunError(
                "TOOL_NOT_AVAILABLE",
                f"Step {step_id!r}: the app has no tool {name!r}; pass it in "
                "create_fevex(tools=[...]).",
                details={"tool_name": str(name)},
            )
        if prepared.definition.approval == "required":
            raise _invalid_step(
                f"Step {step_id!r}: tool {name} needs an approval; run it in an agent step."
            )
        identity = {"tool": name, "input": input}
        entry = driver.lookup(step_id, "tool", identity)
        if entry is not None and entry.status != "started":
            output = await driver.replayed(step_id, entry)
            driver.remember(step_id, compensate, output)
            return output
        if entry is not None and prepared.definition.idempotency != "keyed":
            raise await driver.fail(
                step_id,
                FevexRunError(
                    "TOOL_EFFECT_UNCERTAIN",
                    f"The run stopped while tool {name} (step {step_id}) was running, and the "
                    "tool is not idempotent, so fevex will not repeat it.",
                    category="tool",
                    details={"tool_name": name, "step_id": step_id},
                ),
            )
        if entry is None:
            await driver.start(step_id, "tool", identity, durable=True)
        execution = driver.execution
        run = execution.sink.run
        runner = ToolCallRun(
            prepared,
            ToolCall(step_id, name, input),
            run_id=run.id,
            session_id=run.session_id,
            agent_name=run.name,
            policies=driver.kind.composition.policies,
            credentials=driver.kind.composition.credentials,
            cancellation=execution.cancellation,
            guard=execution.guard,
        )
        try:
            output = await runner.execute()
        except FevexError as error:
            raise await driver.fail(step_id, error) from None
        driver.remember(step_id, compensate, output)
        return await driver.complete(step_id, output)

    async def agent(
        self,
        step_id: str,
        agent: str | AgentDefinition[Any],
        *,
        input: Any,
        session_id: str | None = None,
    ) -> AgentStepResult:
        driver = self._driver
        kind = driver.kind
        name = agent.name if isinstance(agent, AgentDefinition) else agent
        kind.agents.agent(name)
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise _invalid_step(f"Step {step_id!r}: session_id must be a non-empty string.")
        store = kind.kernel.store
        session = None if session_id is None else await store.get_session(session_id)
        parent = driver.execution.sink.run
        child, loop = kind.agents.new_run(
            name, input, session_id or new_id("ses"), None, session, _token_budget(driver)
        )
        identity = {"agent": name, "input": child.input, "session_id": session_id}
        entry = driver.lookup(step_id, "agent", identity)
        state = driver.state
        if entry is not None and entry.status != "started" and step_id not in state.children:
            output = await driver.replayed(step_id, entry)
            return _agent_result(output)
        if entry is None:
            _check_tokens(driver, exhausted=True)
            state.children[step_id] = new_id("run")
            # Durable before the child exists: a recovery finds its id, never a second child.
            await driver.start(step_id, "agent", identity, durable=True)
        child_id = state.children[step_id]
        existing = await store.get_run(child_id)
        if existing is None:
            child = child_run(parent, dataclasses.replace(child, id=child_id))
            execution = await kind.kernel.start(
                child,
                loop,
                session_revision=None if session is None else session.revision,
                opening={
                    "agent_name": name,
                    "session_id": child.session_id,
                    "input": child.input,
                    "parent_run_id": parent.id,
                    "parent_step_id": step_id,
                },
                deadline=driver.execution.deadline,
                batching=driver.execution.sink.batching,
            )
            try:
                # Guarded: cancelling the workflow cancels its child first.
                await driver.execution.guard(_drain(kind, execution, driver, step_id))
            except FevexError as child_error:
                if child_error.run_id != child_id:
                    raise  # the workflow's own (its lease was lost)
                # The child's failure is in the store: read below.
            existing = await store.get_run(child_id)
            assert existing is not None
        if existing.status in ("running", "paused"):
            await driver.wait(step_id, children_pause(step_id, [child_id]))
        del state.children[step_id]
        if existing.status != "completed":
            error = error_from_json(existing.error)
            if existing.status == "cancelled" and existing.error is None:
                error = FevexRunError("RUN_CANCELLED", f"Child run {child_id} was cancelled.")
            error.details.setdefault("child_run_id", child_id)
            raise await driver.fail(step_id, error)
        output = {
            "run_id": child_id,
            "session_id": existing.session_id,
            "output": existing.output,
            "usage": existing.usage,
        }
        await driver.complete(step_id, output, child_run_id=child_id)
        _check_tokens(driver)
        return _agent_result(output)

    async def wait_for_event(self, step_id: str, name: str) -> EventDelivery:
        driver = self._driver
        if name not in driver.prepared.events:
            raise FevexRunError(
                "EVENT_NOT_DECLARED",
                f"Workflow {driver.prepared.definition.name} waits for the event {name!r}, "
                "which it does not declare in events={...}.",
                details={"event": name},
            )
        identity = {"event": name}
        entry = driver.lookup(step_id, "event", identity)
        if entry is not None and entry.status != "started":
            output = await driver.replayed(step_id, entry, name)
            schema = driver.prepared.events[name]
            payload = output.get("payload")
            return EventDelivery(
                payload if schema is None else schema.validate(payload),
                output.get("actor"),
                str(output.get("received_at")),
            )
        if entry is None:
            await driver.start(step_id, "event", identity, durable=False)
        await driver.wait(step_id, event_pause(step_id, name))
        raise AssertionError("unreachable")  # pragma: no cover

    async def sleep(self, step_id: str, seconds: float) -> None:
        driver = self._driver
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise _invalid_step(f"Step {step_id!r}: seconds must be a number of 0 or more.")
        identity = {"seconds": seconds}
        entry = driver.lookup(step_id, "sleep", identity)
        if entry is not None and entry.status != "started":
            await driver.replayed(step_id, entry)
            return
        if entry is None:
            await driver.start(step_id, "sleep", identity, durable=False)
            driver.state.timers[step_id] = time.time() + float(seconds)
        await driver.wait(step_id, timer_pause(step_id, driver.state.timers[step_id]))

    async def parallel(
        self, step_id: str, branches: Mapping[str, Callable[[], Awaitable[Any]]]
    ) -> dict[str, Any]:
        driver = self._driver
        if not isinstance(branches, Mapping) or not branches:
            raise _invalid_step(f"Step {step_id!r}: parallel needs a mapping of branches.")
        for name, branch in branches.items():
            if not isinstance(name, str) or not name or not callable(branch):
                raise _invalid_step(
                    f"Step {step_id!r}: each branch is a name and a function of no arguments."
                )
        names = list(branches)
        identity = {"branches": names}
        entry = driver.lookup(step_id, "parallel", identity)
        if entry is None:
            await driver.start(step_id, "parallel", identity, durable=False)
        # Branches run again on every replay (their steps answer from the journal), so
        # that the compensations inside them are known again.
        outcomes = await _settle_branches(branches)
        pauses = [o for o in outcomes.values() if isinstance(o, Suspended)]
        if pauses:
            raise pauses[0]
        failures = {n: o for n, o in outcomes.items() if isinstance(o, BaseException)}
        if failures:
            error = _parallel_failure(step_id, failures)
            if entry is not None and entry.status == "failed":
                raise error
            raise await driver.fail(step_id, _as_fevex(error)) from error
        results = {name: outcomes[name] for name in names}
        if entry is None or entry.status != "completed":
            journalled = _as_json(results)
            try:
                ensure_json(journalled)
            except TypeError as error:
                raise await driver.fail(
                    step_id,
                    FevexRunError(
                        "WORKFLOW_STEP_OUTPUT_INVALID",
                        f"A branch of step {step_id!r} returned what is not JSON: {error}.",
                        details={"step_id": step_id},
                    ),
                ) from None
            await driver.complete(step_id, journalled)
        return results


async def _settle_branches(
    branches: Mapping[str, Callable[[], Awaitable[Any]]],
) -> dict[str, Any]:
    """Each branch's result, failure or pause, once every branch has settled. A branch
    stopped by the run itself (cancelled, out of time, the process stopping) stops the
    others and is raised at once."""

    async def call(branch: Callable[[], Awaitable[Any]]) -> Any:
        return await branch()

    tasks = {name: asyncio.ensure_future(call(branch)) for name, branch in branches.items()}
    pending: set[asyncio.Future[Any]] = set(tasks.values())
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task.cancelled() or _stops_the_run(task.exception()):
                    task.result()  # raises the stop
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
    outcomes: dict[str, Any] = {}
    for name, task in tasks.items():
        problem = task.exception()
        outcomes[name] = task.result() if problem is None else problem
    return outcomes


def _stops_the_run(error: BaseException | None) -> bool:
    if error is None or isinstance(error, Suspended):
        return False
    return isinstance(error, DeadlineReached) or not isinstance(error, Exception)


def _parallel_failure(step_id: str, failures: Mapping[str, BaseException]) -> BaseException:
    """One failed branch: its error as it is; several: ``WORKFLOW_PARALLEL_FAILED`` with
    each, in declaration order."""
    if len(failures) == 1:
        return next(iter(failures.values()))
    listed: list[dict[str, Any]] = [
        {"branch": name, "error": _as_fevex(e).to_json()} for name, e in failures.items()
    ]
    first = listed[0]["error"]
    return FevexRunError(
        "WORKFLOW_PARALLEL_FAILED",
        f"{len(listed)} branches of step {step_id!r} failed; the first, "
        f"{listed[0]['branch']!r}: {first['message']}",
        details={"step_id": step_id, "failures": listed},
    )


def _as_fevex(error: BaseException) -> FevexError:
    if isinstance(error, FevexError):
        return error
    return FevexRunError("WORKFLOW_FAILED", f"{type(error).__name__}: {error}")


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


async def _call(execution: Execution, function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` on the run's behalf: async awaited, sync in a thread."""
    guard = execution.guard
    if inspect.iscoroutinefunction(function):
        return await guard(function(*args))
    result = await guard(asyncio.to_thread(function, *args))
    if inspect.isawaitable(result):
        result = await guard(result)
    return result


def _check_compensation(step_id: str, compensate: Any) -> None:
    if compensate is not None and not callable(compensate):
        raise _invalid_step(f"Step {step_id!r}: compensate must be a function of the result.")


async def _drain(
    kind: WorkflowKind, execution: Execution, driver: WorkflowDriver, step_id: str
) -> None:
    """Run a child to its end or its pause; its events join the workflow's stream."""
    async for event in kind.kernel.events(execution):
        await driver.publish(driver.relay(step_id, event))


def _as_json(value: Any) -> Any:
    """Branch results as the journal keeps them: each ``AgentStepResult`` as its JSON."""
    if isinstance(value, AgentStepResult):
        return {
            "run_id": value.run_id,
            "session_id": value.session_id,
            "output": value.output,
            "usage": value.usage.to_json(),
        }
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_json(item) for item in value]
    return value


def _agent_result(output: Any) -> AgentStepResult:
    return AgentStepResult(
        str(output["run_id"]),
        str(output["session_id"]),
        output.get("output"),
        Usage.from_json(output.get("usage") or {}),
    )


def _token_budget(driver: WorkflowDriver) -> Limits:
    """The bounds the workflow's token budgets leave its next agent step, over that
    agent's own limits (a budget used up is refused before the step: ``_check_tokens``)."""
    usage = driver.usage
    left: dict[str, int | None] = {}
    for name, used in (("input", usage.input_tokens), ("output", usage.output_tokens)):
        limit = driver.state.limits.get(f"max_{name}_tokens")
        left[f"max_{name}_tokens"] = None if limit is None else max(1, limit - (used or 0))
    return Limits(max_steps=None, max_tool_calls=None, max_tool_retries=None, **left)


def _check_tokens(driver: WorkflowDriver, *, exhausted: bool = False) -> None:
    """Fail the workflow over a token budget; with ``exhausted``, also at a budget used up
    to its last token (before a new agent step, which would have nothing to spend)."""
    usage = driver.usage
    for name, used in (("input", usage.input_tokens), ("output", usage.output_tokens)):
        limit = driver.state.limits.get(f"max_{name}_tokens")
        if limit is None or used is None:
            continue
        if used > limit or (exhausted and used == limit):
            raise FevexRunError(
                f"MAX_{name.upper()}_TOKENS_EXCEEDED",
                f"The workflow's agent steps used {used} {name} tokens, over its budget of "
                f"{limit}.",
                details={"limit": limit, "used": used},
            )


def _function_name(function: Callable[..., Any]) -> str:
    """A ``run`` step's function as its identity knows it: its qualified name, without its
    module, which differs between a script run as ``__main__`` and a worker importing it."""
    return str(getattr(function, "__qualname__", type(function).__qualname__))


def _invalid_step(message: str) -> FevexRunError:
    return FevexRunError("WORKFLOW_STEP_INVALID", message)
