"""The one launch path behind every ``run_*``, ``stream_*`` and ``start_*`` of the app, and
behind ``resume_run``, ``send_event`` and ``recover_run``, async or blocking: a run of any
kind is started by its kind's name, and a stored run is continued, the same way.

A run is driven to its end for a ``run_*`` (its events committed in batches), read event
by event for a ``stream_*``, or driven in a task of its own for a ``start_*`` (as its kind
batches background runs). A continuation is waited for, or goes on in the background once
what the caller decided is durable.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping
from contextlib import aclosing
from typing import Any, Literal, ParamSpec, overload

from fevex._internal.engine.execution import Execution
from fevex._internal.engine.kernel import Kernel, deadline_of
from fevex._internal.engine.run_kind import LaunchRequest
from fevex._internal.launch.run_arguments import (
    TypedDefinition,
    check_run_definition,
    check_run_id,
)
from fevex.errors import FevexRunError, RunPausedError
from fevex.events import RunEvent
from fevex.models import Usage
from fevex.runtime.approval import (
    ApprovalDecision,
    PendingApproval,
    approval_decision,
    check_actor,
    pending_approvals,
    waiting_children,
)
from fevex.runtime.context import ExecutionContext
from fevex.runtime.inputs import InputAnswer
from fevex.runtime.records import AgentRun
from fevex.runtime.run_result import RunResult
from fevex.schemas.schema import ensure_json

__all__ = ["Launcher"]

P = ParamSpec("P")
# Nesting of workflows and teams whose pauses are searched for their children's approvals.
_MAX_RUN_TREE_DEPTH = 8


class Launcher:
    """Starts and continues the runs of one kernel, and holds the runs it drives in the
    background until the app closes."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self._background: set[asyncio.Task[None]] = set()

    # -- new runs -------------------------------------------------------------------

    def run(self, kind: str, request: LaunchRequest) -> Coroutine[Any, Any, RunResult[Any]]:
        """Run to its end and return the result; ``RunPausedError`` when it pauses."""
        # The caller awaits result() itself: every resumption of a run's coroutine passes
        # through each frame above it, so the launch path adds none.
        return self.result(self._begin, kind, request, True)

    async def stream(self, kind: str, request: LaunchRequest) -> AsyncGenerator[RunEvent, None]:
        """Each committed event as it happens; closing the stream early cancels the run."""
        execution = await self._begin(kind, request, False)
        async with aclosing(self.kernel.events(execution)) as stream:
            async for event in stream:
                yield event

    async def start(self, kind: str, request: LaunchRequest) -> AgentRun:
        """Start in the background and return the run's first snapshot."""
        batching = self.kernel.kinds[kind].background_batching
        return self._in_background(await self._begin(kind, request, batching))

    async def _begin(self, kind: str, request: LaunchRequest, batching: bool) -> Execution:
        given = request.context
        context = None if given is None else ExecutionContext.of(given).to_json()
        deadline = deadline_of(request.timeout)
        run_id = request.run_id
        if run_id is not None:
            check_run_id(run_id)
        kernel = self.kernel
        new = await kernel.kinds[kind].launch(request, context, kernel.store.get_session)
        run = new.run
        if run_id is not None:
            run = dataclasses.replace(run, id=run_id, root_run_id=run_id)
        return await kernel.start(
            run,
            new.driver,
            session_revision=new.session_revision,
            opening=new.opening,
            deadline=deadline,
            batching=batching,
        )

    # -- stored runs ----------------------------------------------------------------

    async def resume(
        self,
        run_id: str,
        decision: ApprovalDecision | Mapping[str, Any] | None,
        definition: TypedDefinition[Any] | None,
        timeout: float | None,
    ) -> Execution:
        """Take a paused run over with ``decision`` on its approval, or without one once its
        wait is over (see ``Fevex.resume_run``)."""
        decided = None if decision is None else approval_decision(decision)
        run = await self.kernel.get_run(run_id)
        if definition is not None:
            check_run_definition(run, definition)
        if run.status != "paused":
            raise FevexRunError(
                "RUN_NOT_PAUSED",
                f"Run {run_id} is {run.status}; only a paused run resumes.",
                run_id=run_id,
            )
        if decided is None:
            return await self.kernel.continue_due(run_id, timeout=timeout)
        approval_id, verdict, actor, reason = decided
        choice: Literal["approve", "reject"] = "approve" if verdict == "approve" else "reject"
        return await self.kernel.decide_approval(
            run_id, ApprovalDecision(approval_id, choice, actor, reason=reason), timeout=timeout
        )

    async def answer_input(
        self,
        run_id: str,
        answer: InputAnswer,
        definition: TypedDefinition[Any] | None,
    ) -> AgentRun:
        """Deliver ``answer`` to the tool call of a running run that waits for it (see
        ``Fevex.resume_run``) and return the run as it stands once the call took it."""
        run = await self.kernel.get_run(run_id)
        if definition is not None:
            check_run_definition(run, definition)
        await self.kernel.inputs.answer(run, answer)
        return await self.kernel.inputs.settled(self.kernel.get_run, run_id, answer.input_id)

    async def send_event(
        self,
        run_id: str,
        name: str,
        payload: Any,
        actor: Mapping[str, Any] | None,
        timeout: float | None,
    ) -> Execution:
        """Take over a run paused for the event ``name`` (see ``Fevex.send_event``)."""
        if not isinstance(name, str) or not name:
            raise FevexRunError("INVALID_ARGUMENT", "The event name must be a non-empty string.")
        if actor is not None:
            check_actor(actor)
        try:
            ensure_json(payload)
        except TypeError as error:
            raise FevexRunError(
                "INVALID_ARGUMENT", f"The event payload is not JSON: {error}."
            ) from None
        return await self.kernel.deliver_event(
            run_id, name, payload, None if actor is None else dict(actor), timeout=timeout
        )

    async def recover(
        self, run_id: str, actor: Mapping[str, Any], timeout: float | None
    ) -> Execution:
        """Take over a running run whose lease expired (see ``Fevex.recover_run``)."""
        check_actor(actor)
        return await self.kernel.recover(run_id, actor, timeout=timeout)

    @overload
    async def continued(
        self,
        wait: Literal[True],
        take: Callable[P, Awaitable[Execution]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> RunResult[Any]: ...

    @overload
    async def continued(
        self,
        wait: bool,
        take: Callable[P, Awaitable[Execution]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> RunResult[Any] | AgentRun: ...

    async def continued(
        self,
        wait: bool,
        take: Callable[P, Awaitable[Execution]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> RunResult[Any] | AgentRun:
        """The end of the run ``take(*args, **kwargs)`` takes over (:meth:`resume`,
        :meth:`send_event`, :meth:`recover`), or with ``wait`` false its snapshot once the
        takeover is durable, the run going on in the background."""
        if wait:
            return await self.result(take, *args, **kwargs)
        execution = await take(*args, **kwargs)
        # A takeover's opening rides on the run's next commit; a caller told "continued"
        # must find the decision durable first, so it is committed before the answer.
        try:
            await execution.sink.flush()
        except BaseException:
            self.kernel.forget(execution)
            raise
        taken = await self.kernel.get_run(execution.run_id)
        self._in_background(execution)
        return taken

    # -- outcomes -------------------------------------------------------------------

    async def result(
        self, take: Callable[P, Awaitable[Execution]], *args: P.args, **kwargs: P.kwargs
    ) -> RunResult[Any]:
        """Drive the execution ``take(*args, **kwargs)`` starts or takes over to its end:
        its result, or ``RunPausedError`` listing the approvals its pause waits for."""
        execution = await take(*args, **kwargs)
        events = [event async for event in self.kernel.events(execution)]
        if execution.pause is not None:
            raise RunPausedError(
                execution.run_id,
                execution.pause,
                approvals=await self._pending_approvals(execution.run_id, execution.pause),
            )
        run = execution.sink.run
        usage: Usage | None = getattr(execution.driver, "usage", None)
        return RunResult(
            run.id,
            run.session_id,
            execution.output,
            usage if usage is not None else Usage(),
            tuple(events),
        )

    async def _pending_approvals(
        self, run_id: str, pause: Any, depth: int = 0
    ) -> tuple[PendingApproval, ...]:
        """The approvals a pause waits for: its own, or those of the children it waits for
        (a workflow's agent step, a team's delegation), each naming the run to resume."""
        found = pending_approvals(pause, run_id)
        if depth >= _MAX_RUN_TREE_DEPTH:
            return found
        for child_id in waiting_children(pause):
            child = await self.kernel.store.get_run(child_id)
            if child is not None and child.status == "paused":
                found += await self._pending_approvals(child.id, child.pause, depth + 1)
        return found

    def _in_background(self, execution: Execution) -> AgentRun:
        """Drive ``execution`` in a task of its own and return the run's first snapshot."""
        task = asyncio.create_task(self._drain(execution))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return execution.sink.run

    async def _drain(self, execution: Execution) -> None:
        # The outcome is in the store; the error has nobody to reach here.
        try:
            async for _ in self.kernel.events(execution):
                pass
        except (Exception, asyncio.CancelledError):
            pass

    async def close(self) -> None:
        """Cancel the runs driven in the background (each is stored ``cancelled``)."""
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
