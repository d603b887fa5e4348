"""The blocking twins of :class:`fevex.Fevex`'s coroutine methods, for scripts: each runs
its coroutine on the thread's reusable event loop (see :mod:`fevex._internal.launch.sync`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from fevex._internal.launch.sync import iterate_sync, run_sync

if TYPE_CHECKING:
    from fevex.agents import AgentDefinition, Limits
    from fevex.app import (
        AgentInput,
        AgentReference,
        Fevex,
        RunContext,
        RunResult,
        TeamReference,
        TypedDefinition,
        WorkflowReference,
    )
    from fevex.events import RunEvent
    from fevex.observability.report import ObservabilityReport
    from fevex.runtime.approval import ApprovalDecision
    from fevex.runtime.records import AgentRun, RunStatus, Session
    from fevex.runtime.recovery import RecoverySweep, WakeSweep
    from fevex.runtime.run_store import EventOrder
    from fevex.teams import TeamDefinition, TeamLimits
    from fevex.workflows import WorkflowDefinition

__all__ = ["BlockingTwins"]

OutputT = TypeVar("OutputT")


def _app(twins: BlockingTwins) -> Fevex:
    """The app whose coroutine method a twin runs (``Fevex`` is the one subclass)."""
    return cast("Fevex", twins)


class BlockingTwins:
    """Every coroutine method of the app, as a blocking call with a ``_sync`` suffix."""

    @overload
    def run_agent_sync(
        self,
        agent: AgentDefinition[OutputT],
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    def run_agent_sync(
        self,
        agent: str,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> RunResult[Any]: ...

    def run_agent_sync(
        self,
        agent: AgentReference,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> RunResult[Any]:
        return run_sync(
            _app(self).run_agent(
                agent,
                input,
                session_id=session_id,
                timeout=timeout,
                context=context,
                run_id=run_id,
            )
        )

    def stream_agent_sync(
        self,
        agent: AgentReference,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> Iterator[RunEvent]:
        return iterate_sync(
            _app(self).stream_agent(
                agent,
                input,
                session_id=session_id,
                timeout=timeout,
                context=context,
                run_id=run_id,
            )
        )

    def start_agent_sync(
        self,
        agent: AgentReference,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> AgentRun:
        """Start a run in the background and return its first snapshot. The run advances
        while this thread is in a later blocking call of the app (``get_run_sync``,
        ``follow_events_sync``, ``close_sync``, ...); ``close_sync`` cancels it if it is
        still running."""
        return run_sync(
            _app(self).start_agent(
                agent,
                input,
                session_id=session_id,
                timeout=timeout,
                context=context,
                run_id=run_id,
            )
        )

    @overload
    def run_workflow_sync(
        self,
        workflow: WorkflowDefinition[Any, OutputT],
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    def run_workflow_sync(
        self,
        workflow: str,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> RunResult[Any]: ...

    def run_workflow_sync(
        self,
        workflow: WorkflowReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> RunResult[Any]:
        return run_sync(
            _app(self).run_workflow(
                workflow, input, context=context, timeout=timeout, limits=limits
            )
        )

    def stream_workflow_sync(
        self,
        workflow: WorkflowReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> Iterator[RunEvent]:
        return iterate_sync(
            _app(self).stream_workflow(
                workflow, input, context=context, timeout=timeout, limits=limits
            )
        )

    def start_workflow_sync(
        self,
        workflow: WorkflowReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> AgentRun:
        return run_sync(
            _app(self).start_workflow(
                workflow, input, context=context, timeout=timeout, limits=limits
            )
        )

    @overload
    def run_team_sync(
        self,
        team: TeamDefinition[Any, OutputT],
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    def run_team_sync(
        self,
        team: str,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> RunResult[Any]: ...

    def run_team_sync(
        self,
        team: TeamReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> RunResult[Any]:
        return run_sync(
            _app(self).run_team(team, input, context=context, timeout=timeout, limits=limits)
        )

    def stream_team_sync(
        self,
        team: TeamReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> Iterator[RunEvent]:
        return iterate_sync(
            _app(self).stream_team(team, input, context=context, timeout=timeout, limits=limits)
        )

    def start_team_sync(
        self,
        team: TeamReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> AgentRun:
        return run_sync(
            _app(self).start_team(team, input, context=context, timeout=timeout, limits=limits)
        )

    @overload
    def resume_run_sync(
        self,
        run_id: str,
        decision: ApprovalDecision | Mapping[str, Any] | None = None,
        *,
        definition: TypedDefinition[OutputT],
        timeout: float | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    def resume_run_sync(
        self,
        run_id: str,
        decision: ApprovalDecision | Mapping[str, Any] | None = None,
        *,
        definition: None = None,
        timeout: float | None = None,
    ) -> RunResult[Any]: ...

    def resume_run_sync(
        self,
        run_id: str,
        decision: ApprovalDecision | Mapping[str, Any] | None = None,
        *,
        definition: TypedDefinition[Any] | None = None,
        timeout: float | None = None,
    ) -> RunResult[Any]:
        return run_sync(
            _app(self).resume_run(run_id, decision, definition=definition, timeout=timeout)
        )

    def recover_run_sync(
        self, run_id: str, *, actor: Mapping[str, Any], timeout: float | None = None
    ) -> RunResult[Any]:
        return run_sync(_app(self).recover_run(run_id, actor=actor, timeout=timeout))

    def recover_expired_runs_sync(
        self, *, actor: Mapping[str, Any], limit: int | None = None
    ) -> RecoverySweep:
        return run_sync(_app(self).recover_expired_runs(actor=actor, limit=limit))

    def wake_due_runs_sync(self, *, limit: int | None = None) -> WakeSweep:
        return run_sync(_app(self).wake_due_runs(limit=limit))

    def send_event_sync(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        actor: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> RunResult[Any]:
        return run_sync(_app(self).send_event(run_id, name, payload, actor=actor, timeout=timeout))

    def get_run_sync(self, run_id: str) -> AgentRun:
        return run_sync(_app(self).get_run(run_id))

    def list_events_sync(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> list[RunEvent]:
        return run_sync(_app(self).list_events(run_id, after=after, limit=limit, order=order))

    def follow_events_sync(
        self,
        run_id: str,
        *,
        after: str | None = None,
        poll_interval: float = 0.2,
        page_size: int = 100,
    ) -> Iterator[RunEvent]:
        return iterate_sync(
            _app(self).follow_events(
                run_id, after=after, poll_interval=poll_interval, page_size=page_size
            )
        )

    def follow_event_pages_sync(
        self,
        run_id: str,
        *,
        after: str | None = None,
        poll_interval: float = 0.2,
        page_size: int = 100,
    ) -> Iterator[Sequence[RunEvent]]:
        return iterate_sync(
            _app(self).follow_event_pages(
                run_id, after=after, poll_interval=poll_interval, page_size=page_size
            )
        )

    def list_runs_sync(
        self,
        *,
        status: RunStatus | None = None,
        kind: str | None = None,
        name: str | None = None,
        session_id: str | None = None,
        parent_run_id: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> list[AgentRun]:
        return run_sync(
            _app(self).list_runs(
                status=status,
                kind=kind,
                name=name,
                session_id=session_id,
                parent_run_id=parent_run_id,
                limit=limit,
                after=after,
            )
        )

    def cancel_run_sync(self, run_id: str, *, timeout: float | None = None) -> AgentRun:
        return run_sync(_app(self).cancel_run(run_id, timeout=timeout))

    def get_session_sync(self, session_id: str) -> Session:
        return run_sync(_app(self).get_session(session_id))

    def compact_session_sync(
        self, session_id: str, summary: str, *, revision: int | None = None
    ) -> Session:
        return run_sync(_app(self).compact_session(session_id, summary, revision=revision))

    def flush_observability_sync(self) -> ObservabilityReport:
        return run_sync(_app(self).flush_observability())

    def close_sync(self) -> None:
        run_sync(_app(self).close())
