"""The app's methods that start runs, for every kind: ``run_*`` (to the end), ``stream_*``
(event by event) and ``start_*`` (in the background), with their blocking twins. Each is a
call of the one launcher, typed for its kind: a new kind adds names here, not bodies.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, TypeVar, overload

from fevex._internal.engine.run_kind import LaunchRequest
from fevex._internal.launch.blocking_twins import blocking, blocking_iterator
from fevex._internal.launch.launcher import Launcher
from fevex._internal.launch.run_arguments import (
    AgentInput,
    AgentReference,
    RunContext,
    TeamReference,
    WorkflowReference,
)
from fevex._internal.launch.run_kinds import AGENT, TEAM, WORKFLOW
from fevex.agents import AgentDefinition, Limits
from fevex.events import RunEvent
from fevex.runtime.records import AgentRun
from fevex.runtime.run_result import RunResult

if TYPE_CHECKING:
    # Named in annotations only: an agent app never loads workflows or teams.
    from fevex.teams import TeamDefinition, TeamLimits
    from fevex.workflows import WorkflowDefinition

__all__ = ["RunMethods"]

OutputT = TypeVar("OutputT")


class RunMethods:
    """The ``run_*``, ``stream_*`` and ``start_*`` methods of :class:`fevex.Fevex`."""

    _launcher: Launcher

    @overload
    async def run_agent(
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
    async def run_agent(
        self,
        agent: str,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> RunResult[Any]: ...

    async def run_agent(
        self,
        agent: AgentReference,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> RunResult[Any]:
        """Run an agent to its end and return the validated output.

        ``agent`` is the agent's name or its definition; with the definition, the result is
        typed by the agent's output (``RunResult[Answer]``). ``run_id`` names the new run
        (default: a fresh id): a run with that id stored already is refused with
        ``RUN_CONFLICT`` and nothing runs, so that a caller keyed by something durable (a
        message's delivery id) starts its run at most once.

        Raises ``RunPausedError`` when a tool waits for approval, and the run's error
        after persisting ``run.failed`` or ``run.cancelled``.
        """
        request = LaunchRequest(agent, input, context, timeout, session_id, run_id)
        return await self._launcher.run(AGENT, request)

    def stream_agent(
        self,
        agent: AgentReference,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        """Yield each committed event as it happens. The run advances only while you ask
        for events; closing the iterator early cancels the run and persists that. A run
        that pauses ends the stream with ``run.paused``. ``run_id`` as for ``run_agent``."""
        request = LaunchRequest(agent, input, context, timeout, session_id, run_id)
        return self._launcher.stream(AGENT, request)

    async def start_agent(
        self,
        agent: AgentReference,
        input: AgentInput,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
        context: RunContext = None,
        run_id: str | None = None,
    ) -> AgentRun:
        """Start a run in the background and return its first snapshot; ``run_id`` as for
        ``run_agent``."""
        request = LaunchRequest(agent, input, context, timeout, session_id, run_id)
        return await self._launcher.start(AGENT, request)

    @overload
    async def run_workflow(
        self,
        workflow: WorkflowDefinition[Any, OutputT],
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    async def run_workflow(
        self,
        workflow: str,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> RunResult[Any]: ...

    async def run_workflow(
        self,
        workflow: WorkflowReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> RunResult[Any]:
        """Run a workflow to its end and return its validated output.

        ``workflow`` is its name (the version registered last) or its definition (that
        version). ``limits`` narrows the definition's limits for this run; the effective
        limits are checkpointed. Raises ``RunPausedError`` when it waits (an event, a
        timer, a child run that paused), and the run's error after persisting it."""
        request = LaunchRequest(workflow, input, context, timeout, limits=limits)
        return await self._launcher.run(WORKFLOW, request)

    def stream_workflow(
        self,
        workflow: WorkflowReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        """Yield the committed events of the workflow and of its child runs (each
        ``RunEvent.run_id`` says whose), until it ends or pauses (``run.paused``). A
        workflow's events are yielded as each of its passes ends or pauses."""
        request = LaunchRequest(workflow, input, context, timeout, limits=limits)
        return self._launcher.stream(WORKFLOW, request)

    async def start_workflow(
        self,
        workflow: WorkflowReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: Limits | None = None,
    ) -> AgentRun:
        """Start a workflow in the background and return its first snapshot."""
        request = LaunchRequest(workflow, input, context, timeout, limits=limits)
        return await self._launcher.start(WORKFLOW, request)

    @overload
    async def run_team(
        self,
        team: TeamDefinition[Any, OutputT],
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> RunResult[OutputT]: ...

    @overload
    async def run_team(
        self,
        team: str,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> RunResult[Any]: ...

    async def run_team(
        self,
        team: TeamReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> RunResult[Any]:
        """Run a team to its end and return its validated output.

        ``team`` is its name (the version registered last) or its definition. ``limits``
        narrows the definition's ``TeamLimits`` for this run; the effective limits are
        checkpointed. Raises ``RunPausedError`` when a delegation's child run pauses (an
        approval), and the run's error after persisting it."""
        request = LaunchRequest(team, input, context, timeout, limits=limits)
        return await self._launcher.run(TEAM, request)

    def stream_team(
        self,
        team: TeamReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        """Yield the committed events of the team and of its delegations' child runs
        (each ``RunEvent.run_id`` says whose), until it ends or pauses."""
        request = LaunchRequest(team, input, context, timeout, limits=limits)
        return self._launcher.stream(TEAM, request)

    async def start_team(
        self,
        team: TeamReference,
        input: Any = None,
        *,
        context: RunContext = None,
        timeout: float | None = None,
        limits: TeamLimits | None = None,
    ) -> AgentRun:
        """Start a team in the background and return its first snapshot."""
        request = LaunchRequest(team, input, context, timeout, limits=limits)
        return await self._launcher.start(TEAM, request)

    stream_agent_sync = blocking_iterator(stream_agent)
    start_agent_sync = blocking(
        start_agent,
        doc="""Start a run in the background and return its first snapshot. The run advances
        while this thread is in a later blocking call of the app (``get_run_sync``,
        ``follow_events_sync``, ``close_sync``, ...); ``close_sync`` cancels it if it is
        still running.""",
    )
    stream_workflow_sync = blocking_iterator(stream_workflow)
    start_workflow_sync = blocking(start_workflow)
    stream_team_sync = blocking_iterator(stream_team)
    start_team_sync = blocking(start_team)
