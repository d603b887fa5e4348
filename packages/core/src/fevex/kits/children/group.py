"""A group of child runs, one step of a workflow or a team: every child started, checked
and, only when every result is accepted, committed in declaration order.

The group is one journal entry (``children``) of its run, and each task two more under
it: ``<step>:<task>`` (``child``: the child run, journalled ``started`` before the child
exists, so a recovery finds it and never starts a second; ``completed`` with its output
the moment it ends) and ``<step>:<task>:commit`` (``commit``: journalled ``started``
durably before ``commit`` is called and ``completed`` durably after, so that a replay
never commits twice; one found started and not completed is ``CHILD_COMMIT_UNCERTAIN``:
fevex cannot know whether it happened, so it does not guess). ``accept`` is a check and
may be asked again after a takeover, before any commit; it runs within its task's timeout.

Any failure (a child that failed, a result refused, a timeout) cancels the rest of the
group through the kernel (each child is cancelled as ``cancel_run`` cancels it); nothing
of the group is committed, and the step fails with ``CHILD_GROUP_FAILED`` listing each
failure in declaration order. A child that pauses (an approval) pauses the run until it
has ended, as an agent step does.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from fevex._internal.engine.journal import JournalEntry
from fevex._internal.engine.model_calls import ModelCallGate, ModelCallShare
from fevex._internal.workflows.step_host import AgentChild, RunTree, StepHost
from fevex._internal.workflows.team_steps import TeamSteps
from fevex._internal.workflows.workflow_state import error_from_json
from fevex._internal.workflows.workflow_steps import WorkflowSteps
from fevex.agents import Limits
from fevex.errors import FevexError, FevexRunError
from fevex.kits.callbacks import call_assertion, check_callable, json_copy
from fevex.kits.children.capacity import check_capacity
from fevex.kits.children.child_task import ChildTask, FrozenTask, freeze_tasks
from fevex.runtime.records import AgentRun

__all__ = ["run_children"]

# How often a timed-out or stopped task's child is asked again to cancel, while it is
# still being created (the kernel can cancel only a child that exists).
_CANCEL_RETRY_SECONDS = 0.2


async def run_children(
    step: Any,
    step_id: str,
    tasks: Sequence[ChildTask],
    *,
    concurrency: int | None = None,
    accept: Callable[[Any, str], Any] | None = None,
    commit: Callable[[Any, str], Any] | None = None,
) -> list[Any]:
    """Run ``tasks`` as child runs of the step's run, at most ``concurrency`` at once
    (``None``: all), check each result with ``accept(value, id)`` and then, once every
    one is accepted, call ``commit(value, id)`` for each in declaration order; return the
    results (each child's JSON output) in declaration order. Both callbacks return
    ``None`` to succeed and raise to reject (see :mod:`fevex.kits.callbacks`)."""
    host = _host_of(step)
    check_callable("accept", accept)
    check_callable("commit", commit)
    frozen = freeze_tasks(step_id, tasks)  # before the first await
    width = _width(step_id, concurrency, len(frozen))
    identity = {
        "tasks": [task.to_json() for task in frozen],
        "concurrency": concurrency,
        "commits": commit is not None,
    }
    entry = host.lookup(step_id, "children", identity)
    if entry is not None and entry.status != "started":
        result: list[Any] = await host.replayed(step_id, entry)
        return result
    tree = await host.run_tree()
    with host.model_calls(tree) as gate:
        if entry is None:
            await host.start(step_id, "children", identity, durable=False)
            try:
                check_capacity(step_id, tree, frozen, gate)
            except FevexRunError as refused:
                raise await host.fail(step_id, refused) from None
        group = _Group(host, step_id, frozen, accept)
        values = await group.run(gate, tree, width)
    if commit is not None:
        for task, value in zip(frozen, values, strict=True):
            await _commit(host, step_id, task, value, commit)
    completed: list[Any] = await host.complete(step_id, values)
    return completed


@dataclasses.dataclass(frozen=True, slots=True)
class _Done:
    value: Any


@dataclasses.dataclass(frozen=True, slots=True)
class _Failed:
    error: FevexError


@dataclasses.dataclass(frozen=True, slots=True)
class _Paused:
    run_id: str


@dataclasses.dataclass(frozen=True, slots=True)
class _Stopped:
    """Cancelled because another task of its group failed: not a failure of its own."""


_Outcome = _Done | _Failed | _Paused | _Stopped


class _Group:
    """One pass over a group's tasks: the children run, their results checked."""

    def __init__(
        self,
        host: StepHost,
        step_id: str,
        tasks: tuple[FrozenTask, ...],
        accept: Callable[[Any, str], Any] | None,
    ) -> None:
        self.host = host
        self.step_id = step_id
        self.tasks = tasks
        self.accept = accept
        # Task id -> why the group stopped its child (a timeout, another's failure).
        self.stopping: dict[str, FevexError] = {}
        # The tasks stopped for another's failure: not failures of their own.
        self.stopped: set[str] = set()
        self.failing = False
        # Tasks whose child has ended and whose result is being checked.
        self.accepting: set[str] = set()

    def sub_id(self, task: FrozenTask) -> str:
        return f"{self.step_id}:{task.id}"

    async def run(self, gate: ModelCallGate, tree: RunTree, width: int) -> list[Any]:
        """Each task's accepted result, in declaration order; the group's failure, or the
        run's pause for its paused children, raised."""
        host = self.host
        outcomes: dict[str, _Outcome] = {}
        pending: list[tuple[FrozenTask, JournalEntry | None]] = []
        for task in self.tasks:
            sub_id = self.sub_id(task)
            entry = host.lookup(sub_id, "child", {"task": task.id})
            # A child still kept is not over for the group, whatever its entry says (the
            # wake-up that ended a wait settles the entry the pause names).
            if entry is None or entry.status == "started" or host.child_of(sub_id) is not None:
                pending.append((task, entry))
            else:
                outcomes[task.id] = await self._replayed(task, entry)
        shares = [self._share(gate, tree, task, entry) for task, entry in pending]
        try:
            if any(isinstance(o, _Failed) for o in outcomes.values()):
                self.failing = True  # a failure journalled already: nothing new starts
            outcomes.update(await self._settle(pending, width))
        finally:
            for child_run_id in shares:
                gate.end_share(child_run_id)
        failures = [
            (task.id, outcome.error)
            for task in self.tasks
            if isinstance(outcome := outcomes[task.id], _Failed)
        ]
        if failures:
            raise await host.fail(self.step_id, _group_failed(self.step_id, failures))
        paused = [
            (task, o.run_id) for task in self.tasks if isinstance(o := outcomes[task.id], _Paused)
        ]
        if paused:
            # Named by the first paused task's entry: the wake-up settles that one, and
            # the replay reads every child from the store again.
            await host.wait_for_children(self.sub_id(paused[0][0]), [r for _, r in paused])
        return [_value(outcomes[task.id]) for task in self.tasks]

    def _share(
        self, gate: ModelCallGate, tree: RunTree, task: FrozenTask, entry: JournalEntry | None
    ) -> str:
        """The child's id (kept, or reserved now: checkpointed with its entry's start)
        and its share of the tree's model calls, set aside in ``gate``."""
        sub_id = self.sub_id(task)
        child_run_id = self.host.child_of(sub_id) if entry is not None else None
        if child_run_id is None:
            child_run_id = self.host.reserve_child(sub_id)
        used = tree.calls_under(child_run_id)
        gate.add_share(ModelCallShare(child_run_id, task.max_calls, task.reserve_calls, used))
        return child_run_id

    async def _replayed(self, task: FrozenTask, entry: JournalEntry) -> _Outcome:
        """A task whose child ended in an earlier pass: its result checked again, or its
        failure."""
        try:
            output = await self.host.replayed(self.sub_id(task), entry)
        except FevexError as error:
            if error.code == "CHILD_CANCELLED":
                return _Stopped()
            return _Failed(error)
        return await self._checked(task, output.get("output"))

    async def _settle(
        self, pending: list[tuple[FrozenTask, JournalEntry | None]], width: int
    ) -> dict[str, _Outcome]:
        """Run the pending tasks, ``width`` at once; the first failure stops the rest."""
        slots = asyncio.Semaphore(width)

        async def one(task: FrozenTask, entry: JournalEntry | None) -> _Outcome:
            async with slots:
                if self.failing:
                    return _Stopped()
                return await self._bounded(task, entry)

        running: dict[asyncio.Future[_Outcome], FrozenTask] = {
            asyncio.ensure_future(one(task, entry)): task for task, entry in pending
        }
        outcomes: dict[str, _Outcome] = {}
        waiting: set[asyncio.Future[_Outcome]] = set(running)
        try:
            while waiting:
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    task = running[future]
                    if future.cancelled() and task.id in self.stopping:
                        outcomes[task.id] = _Stopped()
                        continue
                    outcome = future.result()  # the run's own stop raises
                    if task.id in self.stopped and not _own_failure(outcome, self.stopping):
                        outcome = _Stopped()  # a late result: never committed
                    outcomes[task.id] = outcome
                    if isinstance(outcome, _Failed) and not self.failing:
                        await self._stop([running[w] for w in waiting])
        finally:
            for future in running:
                future.cancel()
            if running:
                await asyncio.wait(running)
        return outcomes

    async def _stop(self, tasks: list[FrozenTask]) -> None:
        """Cancel the children of ``tasks`` (another task of the group failed)."""
        self.failing = True
        for task in tasks:
            if task.id not in self.stopping:
                self.stopped.add(task.id)
                self.stopping[task.id] = _stopped_error(task)
            await self.host.cancel_child(self.sub_id(task))

    async def _bounded(self, task: FrozenTask, entry: JournalEntry | None) -> _Outcome:
        """The task within its timeout: when it runs out, its child is cancelled (or its
        check stopped) and the task fails with ``CHILD_TIMEOUT``."""
        work = asyncio.ensure_future(self._attempt(task, entry))
        try:
            done, _ = await asyncio.wait({work}, timeout=task.timeout)
        except BaseException:
            work.cancel()  # the run itself stops
            raise
        if work in done:
            return work.result()
        timeout = FevexRunError(
            "CHILD_TIMEOUT",
            f"Child task {task.id!r} did not end and pass its check within {task.timeout} s.",
            details={"task": task.id, "timeout": task.timeout},
        )
        self.stopping[task.id] = timeout
        while not work.done():
            if task.id in self.accepting or self.host.child_of(self.sub_id(task)) is None:
                work.cancel()
            else:
                await self.host.cancel_child(self.sub_id(task))
            await asyncio.wait({work}, timeout=_CANCEL_RETRY_SECONDS)
        if not work.cancelled():
            work.result()  # the run's own stop raises
        return _Failed(timeout)

    async def _attempt(self, task: FrozenTask, entry: JournalEntry | None) -> _Outcome:
        host, sub_id = self.host, self.sub_id(task)
        try:
            if entry is None:
                # Durable before the child exists: a recovery finds its id.
                await host.start(sub_id, "child", {"task": task.id}, durable=True)
            child = await _prepare(host, task)
        except FevexError as refused:
            if sub_id in host.entries and host.entries[sub_id].status == "started":
                return _Failed(await host.fail(sub_id, refused))
            return _Failed(refused)
        if task.id in self.stopping:
            # Stopped before its child ran here: cancel it if a crashed pass started it.
            await host.cancel_child(sub_id)
            return _Failed(await host.fail(sub_id, self.stopping[task.id]))
        ended = await host.run_child(sub_id, child)
        if ended.status in ("running", "paused"):
            return _Paused(ended.id)
        if ended.status != "completed":
            ending = self.stopping.get(task.id) or _child_error(ended)
            return _Failed(await host.fail(sub_id, ending))
        # No await since the child ended: its output is journalled with its end.
        await host.complete(sub_id, {"run_id": ended.id, "output": ended.output})
        return await self._checked(task, ended.output)

    async def _checked(self, task: FrozenTask, value: Any) -> _Outcome:
        if self.accept is None:
            return _Done(value)
        self.accepting.add(task.id)
        try:
            await call_assertion(
                "accept", self.accept, json_copy(value), task.id, rejected="CHILD_RESULT_REJECTED"
            )
        except FevexRunError as error:
            error.details.setdefault("task", task.id)
            return _Failed(error)
        finally:
            self.accepting.discard(task.id)
        return _Done(value)


async def _commit(
    host: StepHost, step_id: str, task: FrozenTask, value: Any, commit: Callable[..., Any]
) -> None:
    """Commit one accepted result, at most once over every replay."""
    commit_id, identity = f"{step_id}:{task.id}:commit", {"task": task.id}
    entry = host.lookup(commit_id, "commit", identity)
    if entry is not None and entry.status == "completed":
        await host.replayed(commit_id, entry)
        return
    error: FevexError | None = None
    if entry is not None and entry.status == "failed":
        try:
            await host.replayed(commit_id, entry)
        except FevexError as replayed:
            error = replayed
    elif entry is not None:
        error = await host.fail(
            commit_id,
            FevexRunError(
                "CHILD_COMMIT_UNCERTAIN",
                f"The run stopped while the commit of child task {task.id!r} (step "
                f"{step_id}) was running; fevex cannot know whether it happened and will "
                "not repeat it.",
                details={"step_id": step_id, "task": task.id},
            ),
        )
    else:
        await host.start(commit_id, "commit", identity, durable=True)
        try:
            await call_assertion(
                "commit", commit, json_copy(value), task.id, rejected="CHILD_COMMIT_FAILED"
            )
        except FevexRunError as failed:
            error = await host.fail(commit_id, failed)
        else:
            await host.complete(commit_id, None)
    if error is not None:
        raise await host.fail(step_id, _group_failed(step_id, [(task.id, error)]))


async def _prepare(host: StepHost, task: FrozenTask) -> AgentChild:
    """The task's child run, not started: only its own definition's tools, within its
    ``max_calls``."""
    if task.kind == "workflow":
        return await host.workflow_child(task.name, task.input)
    host.agent(task.name)  # AGENT_NOT_FOUND first
    limits = Limits(max_steps=task.max_calls, max_tool_calls=None, max_tool_retries=None)
    return await host.agent_child(task.name, task.input, session_id=None, limits=limits)


def _stopped_error(task: FrozenTask) -> FevexRunError:
    return FevexRunError(
        "CHILD_CANCELLED",
        f"Child task {task.id!r} was cancelled: another task of its group failed.",
        details={"task": task.id},
    )


def _own_failure(outcome: _Outcome, stopping: dict[str, FevexError]) -> bool:
    """Whether a stopped task failed of itself (its check refused it) rather than by
    the group's cancellation."""
    return isinstance(outcome, _Failed) and outcome.error not in stopping.values()


def _child_error(ended: AgentRun) -> FevexError:
    if ended.status == "cancelled" and ended.error is None:
        return FevexRunError("RUN_CANCELLED", f"Child run {ended.id} was cancelled.")
    error = error_from_json(ended.error)
    error.details.setdefault("child_run_id", ended.id)
    return error


def _value(outcome: _Outcome) -> Any:
    assert isinstance(outcome, _Done)
    return outcome.value


def _group_failed(step_id: str, failures: list[tuple[str, FevexError]]) -> FevexRunError:
    listed = [{"id": task_id, "error": error.to_json()} for task_id, error in failures]
    first_id, first = failures[0]
    return FevexRunError(
        "CHILD_GROUP_FAILED",
        f"{len(listed)} task(s) of the group of step {step_id!r} failed; nothing of the "
        f"group was committed after it. The first, {first_id!r}: {first.code}: "
        f"{first.message}",
        details={"step_id": step_id, "failures": listed},
    )


def _width(step_id: str, concurrency: Any, count: int) -> int:
    if concurrency is None:
        return count
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise FevexRunError(
            "KIT_REQUEST_INVALID",
            f"Step {step_id!r}: concurrency must be a positive integer or None.",
            details={"step_id": step_id},
        )
    return concurrency


def _host_of(step: Any) -> StepHost:
    if isinstance(step, WorkflowSteps | TeamSteps):
        return step.host
    raise FevexRunError(
        "KIT_REQUEST_INVALID",
        f"run_children runs in a workflow's or a team's step, not with {step!r}.",
    )
