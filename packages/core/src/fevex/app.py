"""The app: a validated composition of agents, tools and models, bound to a run store."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Literal, Self, TypeVar, overload

from fevex._ground.clock import new_id, utc_now
from fevex._ground.names import did_you_mean
from fevex._ground.storable_text import is_storable
from fevex._internal.agents.agent_kind import AgentKind
from fevex._internal.agents.knowledge_context import attach_knowledge, open_memory_store
from fevex._internal.composition.connections import ConnectionResolver
from fevex._internal.composition.registry import Composition, Problems, compose
from fevex._internal.composition.tool_runner import CredentialResolver, ToolExceptionHook
from fevex._internal.engine.event_sink import Observers
from fevex._internal.engine.execution import Execution
from fevex._internal.engine.kernel import Kernel, deadline_of, seconds_of
from fevex._internal.engine.recovery_sweep import sweep_expired_runs, wake_due_runs
from fevex._internal.launch.blocking_twins import BlockingTwins
from fevex._internal.workflows.team_kind import TeamKind
from fevex._internal.workflows.workflow_kind import WorkflowKind
from fevex.agents import AgentDefinition, Limits
from fevex.errors import (
    FevexConfigurationError,
    FevexRunError,
    RunPausedError,
)
from fevex.events import RunEvent
from fevex.knowledge import ContextProviderDefinition, MemoryStore, SkillDefinition
from fevex.messages import ContentPart, Message
from fevex.models import ModelGateway, Usage
from fevex.policies.policy import Policy
from fevex.runtime.approval import (
    ApprovalDecision,
    PendingApproval,
    approval_decision,
    check_actor,
    pending_approvals,
    waiting_children,
)
from fevex.runtime.context import ExecutionContext
from fevex.runtime.in_memory_run_store import InMemoryRunStore
from fevex.runtime.records import AgentRun, RunStatus, Session
from fevex.runtime.recovery import RecoverySweep, WakeSweep
from fevex.runtime.run_store import (
    EventOrder,
    RunStore,
    missing_store_methods,
)
from fevex.runtime.store_rules import RunListing, check_event_page, check_session_id
from fevex.schemas.schema import ensure_json
from fevex.teams import TeamDefinition, TeamLimits
from fevex.tools import ToolDefinition
from fevex.tools.connection import ConnectionDefinition
from fevex.workflows import WorkflowDefinition

if TYPE_CHECKING:
    # Imported when used: an app without observability never loads it.
    from fevex._internal.tracing.trace_pipeline import TracePipeline
    from fevex.observability.configuration import Observability
    from fevex.observability.report import ObservabilityReport

__all__ = ["AgentInput", "Fevex", "RunResult", "create_fevex"]

OutputT = TypeVar("OutputT")
# What context= takes: who the run is for (see ExecutionContext), stored with the run.
RunContext = ExecutionContext | Mapping[str, Any] | None
# Text, a user message or content parts; a value of the agent's input_schema when it has one.
AgentInput = str | Message | Sequence[ContentPart] | Mapping[str, Any]
# An agent of the app: its name, or its definition (which types the run's output).
AgentReference = str | AgentDefinition[Any]
# A workflow of the app: its name (the version registered last), or its definition.
WorkflowReference = str | WorkflowDefinition[Any, Any]
# A team of the app: its name (the version registered last), or its definition.
TeamReference = str | TeamDefinition[Any, Any]
# A definition whose runs' output type is known: what types a result read back by run id.
TypedDefinition = (
    AgentDefinition[OutputT] | WorkflowDefinition[Any, OutputT] | TeamDefinition[Any, OutputT]
)
logger = logging.getLogger("fevex")
# A run id a caller chooses: what every store keeps as a key and every URL path carries.
_RUN_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
# Nesting of workflows and teams whose pauses are searched for their children's approvals.
_MAX_RUN_TREE_DEPTH = 8


@dataclass(frozen=True, slots=True)
class RunResult(Generic[OutputT]):
    """A finished run: ``output`` is the validated value (the agent's output schema type,
    or text), ``events`` every event this call committed."""

    run_id: str
    session_id: str
    output: OutputT
    usage: Usage
    events: tuple[RunEvent, ...]


def create_fevex(
    *,
    models: Mapping[str, ModelGateway] | None = None,
    agents: Iterable[AgentDefinition[Any]] = (),
    tools: Iterable[ToolDefinition[Any, Any]] = (),
    run_store: RunStore | str | None = None,
    on_event: Callable[[RunEvent], Any] | Sequence[Callable[[RunEvent], Any]] | None = None,
    credentials: CredentialResolver = None,
    policies: Iterable[Policy] = (),
    connections: Iterable[ConnectionDefinition] = (),
    workflows: Iterable[WorkflowDefinition[Any, Any]] = (),
    teams: Iterable[TeamDefinition[Any, Any]] = (),
    lease_seconds: float = 30.0,
    observability: Observability | None = None,
    context_providers: Iterable[ContextProviderDefinition | SkillDefinition] = (),
    memory_store: MemoryStore | str | None = None,
    on_tool_exception: ToolExceptionHook | None = None,
) -> Fevex:
    """Validate the whole composition and return the app.

    ``run_store`` is a store, a store URL, or ``None`` to use ``FEVEX_RUN_STORE``
    (``memory://`` when unset). ``on_event`` observers see every committed event; their
    failures never affect a run. ``credentials`` is a mapping or a function
    ``(name, context) -> str`` (may be async) that tools reach through
    ``context.get_credential``. ``policies`` may deny tool calls. ``connections`` expose
    remote tools as ``<connection>__<tool>``. ``workflows`` are durable workflows
    (several versions of one name may be given); ``teams`` delegate to registered agents
    (``INVALID_TEAM`` when a supervisor or member is not one). A running run holds a lease of
    ``lease_seconds``, renewed while it runs. ``observability`` gives trace exporters, the
    price of model steps and the content spans may carry (see
    :class:`~fevex.observability.Observability`); without it, ``FEVEX_TRACE_EXPORTERS``
    names the exporters plugins open.

    ``context_providers`` registers the skills and context providers agents name;
    ``memory_store`` is a store, a store URL, or ``None`` to use ``FEVEX_MEMORY_STORE``
    (an in-memory store when unset).

    ``on_tool_exception``, for debugging, is called as ``hook(exception, context)`` with
    each exception a tool function raises, exactly as raised: before it is scrubbed of the
    call's credentials, so what the hook does with it is the app's to keep safe. Once a
    call resolved a credential, the ``FevexRunError`` a caller gets does not chain the
    tool's exception; the hook is where it stays available.

    Every problem of the composition is reported at once: the ``FevexConfigurationError``
    has the first one's ``code`` and lists each in ``problems``. The app is a context
    manager (``async with create_fevex(...) as app``, or ``with`` in scripts) that closes
    it on exit.
    """
    problems = Problems()
    composition = compose(
        models=models,
        agents=agents,
        tools=tools,
        on_event=on_event,
        policies=policies,
        credentials=credentials,
        connections=connections,
        workflows=workflows,
        teams=teams,
        problems=problems,
        on_tool_exception=on_tool_exception,
    )
    if (
        not isinstance(lease_seconds, int | float)
        or isinstance(lease_seconds, bool)
        or lease_seconds <= 0
    ):
        problems.add(
            FevexConfigurationError("INVALID_CONFIG", "lease_seconds must be positive seconds.")
        )
    if observability is not None:
        from fevex.observability.configuration import Observability

        if isinstance(observability, Observability):
            for problem in observability.problems():
                problems.add(problem)
        else:
            problems.add(
                FevexConfigurationError(
                    "INVALID_OBSERVABILITY",
                    f"observability must be an Observability, not {type(observability).__name__}.",
                )
            )
    knowledge = attach_knowledge(composition, context_providers, problems)
    # The store is opened only for a valid composition: opening one can create it.
    problems.raise_if_any()
    knowledge.memory_store = open_memory_store(memory_store)
    tracing = None
    if observability is not None or os.environ.get("FEVEX_TRACE_EXPORTERS"):
        from fevex._internal.tracing.trace_pipeline import open_pipeline

        tracing = open_pipeline(observability)
    if observability is not None and observability.calculate_cost is not None:
        composition = dataclasses.replace(composition, calculate_cost=observability.calculate_cost)
    if run_store is None and not os.environ.get("FEVEX_RUN_STORE"):
        store: RunStore = InMemoryRunStore()
    elif run_store is None or isinstance(run_store, str):
        # Imported here: plugin discovery (pluggy, entry points) is paid only when used.
        from fevex.plugins.discovery import open_run_store

        store = open_run_store(run_store or os.environ["FEVEX_RUN_STORE"])
    else:
        store = run_store
    missing = missing_store_methods(store)
    if len(missing) == len(missing_store_methods(None)):
        raise FevexConfigurationError(
            "INVALID_CONFIG", f"run_store must be a RunStore or a store URL, not {run_store!r}."
        )
    if missing:
        # Refused now, by name: a store that lacks a method must never fail mid-run.
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            f"The run store {type(store).__name__} lacks {', '.join(missing)} of the run-store "
            "contract; upgrade the store's plugin or implement them.",
        )
    app = Fevex(composition, store, lease_seconds=float(lease_seconds), tracing=tracing)
    app.memory_store = knowledge.memory_store
    return app


class Fevex(BlockingTwins):
    """Runs agents and answers questions about runs and sessions.

    Every coroutine method has a blocking twin with a ``_sync`` suffix for scripts. Use it
    as ``async with`` (or ``with`` in scripts): it is closed on exit.
    """

    # The store agents' memory= reads and writes; closed with the app.
    memory_store: MemoryStore | None = None

    def __init__(
        self,
        composition: Composition,
        store: RunStore,
        *,
        lease_seconds: float = 30.0,
        tracing: TracePipeline | None = None,
    ) -> None:
        self._composition = composition
        self.run_store = store
        self.lease_seconds = lease_seconds
        self._tracing = tracing
        self._agent_kind = AgentKind(composition, ConnectionResolver(composition.connections))
        self._kernel = Kernel(
            store,
            {"agent": self._agent_kind},
            Observers(composition.observers, tracing),
            lease_seconds=lease_seconds,
        )
        self._workflow_kind = WorkflowKind(composition, self._kernel, self._agent_kind)
        self._kernel.kinds = {**self._kernel.kinds, "workflow": self._workflow_kind}
        self._team_kind = TeamKind(composition, self._kernel, self._agent_kind)
        self._kernel.kinds = {**self._kernel.kinds, "team": self._team_kind}
        self._background: set[asyncio.Task[None]] = set()

    @property
    def agents(self) -> tuple[str, ...]:
        return tuple(self._composition.agents)

    @property
    def workflows(self) -> tuple[str, ...]:
        """The names of the app's workflows, each once whatever its versions."""
        return tuple(dict.fromkeys(name for name, _ in self._composition.workflows))

    @property
    def teams(self) -> tuple[str, ...]:
        """The names of the app's teams, each once whatever its versions."""
        return tuple(dict.fromkeys(name for name, _ in self._composition.teams))

    @property
    def lease_owner(self) -> str:
        """The owner id of every lease this app takes."""
        return self._kernel.owner

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close_sync()

    def _agent_name(self, agent: AgentReference) -> str:
        """The name of one of this app's agents; ``AGENT_NOT_FOUND`` otherwise."""
        agents = self._composition.agents
        if isinstance(agent, AgentDefinition):
            prepared = agents.get(agent.name)
            if prepared is None or (
                prepared.definition is not agent and prepared.definition != agent
            ):
                raise FevexRunError(
                    "AGENT_NOT_FOUND",
                    f"The agent definition {agent.name!r} is not one this app was created with;"
                    " pass it in create_fevex(agents=[...]).",
                )
            return agent.name
        if not isinstance(agent, str) or agent not in agents:
            suggestion = did_you_mean(agent, agents) if isinstance(agent, str) else ""
            raise FevexRunError(
                "AGENT_NOT_FOUND", f"There is no agent named {agent!r}.{suggestion}"
            )
        return agent

    async def _begin(
        self,
        agent: AgentReference,
        input: AgentInput,
        session_id: str | None,
        timeout: float | None,
        *,
        context: RunContext = None,
        batching: bool = False,
        run_id: str | None = None,
    ) -> Execution:
        agent_name = self._agent_name(agent)
        if run_id is not None:
            _check_run_id(run_id)
        context_json = None if context is None else ExecutionContext.of(context).to_json()
        deadline = deadline_of(timeout)
        session = None
        if session_id is not None:
            # Before the store reads it: every store refuses it alike (store_rules).
            check_session_id(session_id)
            session = await self.run_store.get_session(session_id)
        else:
            session_id = new_id("ses")
        run, loop = self._agent_kind.new_run(agent_name, input, session_id, context_json, session)
        if run_id is not None:
            run = dataclasses.replace(run, id=run_id, root_run_id=run_id)
        return await self._kernel.start(
            run,
            loop,
            session_revision=None if session is None else session.revision,
            opening={"agent_name": agent_name, "session_id": session_id, "input": run.input},
            deadline=deadline,
            batching=batching,
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
            child = await self.run_store.get_run(child_id)
            if child is not None and child.status == "paused":
                found += await self._pending_approvals(child.id, child.pause, depth + 1)
        return found

    async def _result(self, execution: Execution) -> RunResult[Any]:
        events = [event async for event in self._kernel.events(execution)]
        if execution.pause is not None:
            raise RunPausedError(
                execution.run_id,
                execution.pause,
                approvals=await self._pending_approvals(execution.run_id, execution.pause),
            )
        run = execution.sink.run
        usage: Usage = getattr(execution.driver, "usage", Usage())
        return RunResult(run.id, run.session_id, execution.output, usage, tuple(events))

    # -- starting runs --------------------------------------------------------------

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
        return await self._result(
            await self._begin(
                agent, input, session_id, timeout, context=context, batching=True, run_id=run_id
            )
        )

    async def stream_agent(
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
        execution = await self._begin(
            agent, input, session_id, timeout, context=context, run_id=run_id
        )
        async with aclosing(self._kernel.events(execution)) as stream:
            async for event in stream:
                yield event

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
        execution = await self._begin(
            agent, input, session_id, timeout, context=context, run_id=run_id
        )
        return self._in_background(execution)

    def _in_background(self, execution: Execution) -> AgentRun:
        """Drive ``execution`` in a task of its own and return the run's first snapshot."""
        task = asyncio.create_task(self._drain(execution))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return execution.sink.run

    async def _drain(self, execution: Execution) -> None:
        # The outcome is in the store; the error has nobody to reach here.
        try:
            async for _ in self._kernel.events(execution):
                pass
        except (Exception, asyncio.CancelledError):
            pass

    # -- workflows ------------------------------------------------------------------

    async def _begin_function(
        self,
        kind: WorkflowKind,
        reference: WorkflowReference | TeamReference,
        input: Any,
        *,
        context: RunContext,
        timeout: float | None,
        limits: Limits | TeamLimits | None,
        batching: bool,
    ) -> Execution:
        """Start a run of a durable function (a workflow, or a team: ``kind`` says)."""
        context_json = None if context is None else ExecutionContext.of(context).to_json()
        deadline = deadline_of(timeout)
        run, driver = kind.begin(reference, input, context_json, limits)
        return await self._kernel.start(
            run,
            driver,
            session_revision=None,
            opening={
                f"{run.kind}_name": run.name,
                "version": run.version,
                "session_id": run.session_id,
                "input": run.input,
            },
            deadline=deadline,
            batching=batching,
        )

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
        return await self._result(
            await self._begin_function(
                self._workflow_kind,
                workflow,
                input,
                context=context,
                timeout=timeout,
                limits=limits,
                batching=True,
            )
        )

    async def stream_workflow(
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
        execution = await self._begin_function(
            self._workflow_kind,
            workflow,
            input,
            context=context,
            timeout=timeout,
            limits=limits,
            batching=False,
        )
        async with aclosing(self._kernel.events(execution)) as stream:
            async for event in stream:
                yield event

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
        execution = await self._begin_function(
            self._workflow_kind,
            workflow,
            input,
            context=context,
            timeout=timeout,
            limits=limits,
            batching=True,
        )
        return self._in_background(execution)

    # -- teams ----------------------------------------------------------------------

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
        return await self._result(
            await self._begin_function(
                self._team_kind,
                team,
                input,
                context=context,
                timeout=timeout,
                limits=limits,
                batching=True,
            )
        )

    async def stream_team(
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
        execution = await self._begin_function(
            self._team_kind,
            team,
            input,
            context=context,
            timeout=timeout,
            limits=limits,
            batching=False,
        )
        async with aclosing(self._kernel.events(execution)) as stream:
            async for event in stream:
                yield event

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
        execution = await self._begin_function(
            self._team_kind,
            team,
            input,
            context=context,
            timeout=timeout,
            limits=limits,
            batching=True,
        )
        return self._in_background(execution)

    # -- durable continuation -------------------------------------------------------

    @overload
    async def resume_run(
        self,
        run_id: str,
        decision: ApprovalDecision | Mapping[str, Any] | None = None,
        *,
        definition: TypedDefinition[OutputT],
        timeout: float | None = None,
        wait: Literal[True] = True,
    ) -> RunResult[OutputT]: ...

    @overload
    async def resume_run(
        self,
        run_id: str,
        decision: ApprovalDecision | Mapping[str, Any] | None = None,
        *,
        definition: None = None,
        timeout: float | None = None,
        wait: Literal[True] = True,
    ) -> RunResult[Any]: ...

    @overload
    async def resume_run(
        self,
        run_id: str,
        decision: ApprovalDecision | Mapping[str, Any] | None = None,
        *,
        definition: TypedDefinition[Any] | None = None,
        timeout: float | None = None,
        wait: Literal[False],
    ) -> AgentRun: ...

    async def resume_run(
        self,
        run_id: str,
        decision: ApprovalDecision | Mapping[str, Any] | None = None,
        *,
        definition: TypedDefinition[Any] | None = None,
        timeout: float | None = None,
        wait: bool = True,
    ) -> RunResult[Any] | AgentRun:
        """Continue a paused run, from any process sharing the store: with a ``decision``
        on its pending approval (an unknown approval fails closed: nothing changes), or,
        without one, a run whose wait is over (a due timer, children that ended), as a
        worker's wake-up pass would; ``RUN_NOT_DUE`` when it still waits.

        With ``wait=False`` it returns the run's snapshot once it is taken over (a refusal
        still raises) and the run goes on in the background, as after ``start_agent``; this
        holds for ``send_event`` and ``recover_run`` too.

        ``definition`` (the run's agent, workflow or team definition) types the result by
        its output; a run of another definition is refused with ``RUN_DEFINITION_MISMATCH``
        before anything changes."""
        decided = None if decision is None else approval_decision(decision)
        run = await self.get_run(run_id)
        if definition is not None:
            check_run_definition(run, definition)
        if run.status != "paused":
            raise FevexRunError(
                "RUN_NOT_PAUSED",
                f"Run {run_id} is {run.status}; only a paused run resumes.",
                run_id=run_id,
            )
        if decided is None:
            return await self._continued(
                await self._kernel.continue_due(run_id, timeout=timeout), wait
            )
        approval_id, verdict, actor, reason = decided

        def decide(_: AgentRun, checkpoint: dict[str, Any]) -> None:
            pending = checkpoint.get("pending")
            approval = pending.get("approval") if isinstance(pending, dict) else None
            if not isinstance(approval, dict) or approval.get("id") != approval_id:
                raise FevexRunError(
                    "APPROVAL_NOT_FOUND",
                    f"Run {run_id} has no pending approval {approval_id!r}; nothing was changed.",
                )
            assert isinstance(pending, dict)
            decisions = pending.get("decisions")
            pending["decisions"] = {
                **(decisions if isinstance(decisions, dict) else {}),
                str(approval.get("tool_call_id")): {
                    "decision": verdict,
                    "actor": dict(actor),
                    **({"reason": reason} if reason is not None else {}),
                },
            }

        execution = await self._kernel.take_over(
            run_id,
            status="paused",
            opening_type="run.resumed",
            opening_payload={
                "reason": "approval",
                "approval_id": approval_id,
                "decision": verdict,
                "actor": dict(actor),
            },
            decide=decide,
            timeout=timeout,
        )
        return await self._continued(execution, wait)

    async def _continued(self, execution: Execution, wait: bool) -> RunResult[Any] | AgentRun:
        if wait:
            return await self._result(execution)
        # A takeover's opening rides on the run's next commit; a caller told "continued"
        # must find the decision durable first, so it is committed before the answer.
        try:
            await execution.sink.flush()
        except BaseException:
            self._kernel.forget(execution)
            raise
        taken = await self.get_run(execution.run_id)
        self._in_background(execution)
        return taken

    @overload
    async def send_event(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        actor: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        wait: Literal[True] = True,
    ) -> RunResult[Any]: ...

    @overload
    async def send_event(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        actor: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        wait: Literal[False],
    ) -> AgentRun: ...

    async def send_event(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        actor: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        wait: bool = True,
    ) -> RunResult[Any] | AgentRun:
        """Deliver the external event ``name`` to a run paused waiting for it, from any
        process sharing the store, and continue the run (to its end or its next pause, as
        ``resume_run`` does). The waiting step receives ``{"payload", "actor",
        "received_at"}``. A run that does not wait for this event (another event, running,
        ended) is refused with ``EVENT_NOT_EXPECTED`` and nothing changes; so is a payload
        or an actor its definition refuses. ``payload`` must be plain JSON."""
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
        execution = await self._kernel.deliver_event(
            run_id, name, payload, None if actor is None else dict(actor), timeout=timeout
        )
        return await self._continued(execution, wait)

    @overload
    async def recover_run(
        self,
        run_id: str,
        *,
        actor: Mapping[str, Any],
        timeout: float | None = None,
        wait: Literal[True] = True,
    ) -> RunResult[Any]: ...

    @overload
    async def recover_run(
        self,
        run_id: str,
        *,
        actor: Mapping[str, Any],
        timeout: float | None = None,
        wait: Literal[False],
    ) -> AgentRun: ...

    async def recover_run(
        self,
        run_id: str,
        *,
        actor: Mapping[str, Any],
        timeout: float | None = None,
        wait: bool = True,
    ) -> RunResult[Any] | AgentRun:
        """Take over a running run whose lease expired (its worker died or froze) and
        continue it from its last committed step. Completed tool calls are not repeated;
        an in-flight keyed tool is retried with the same idempotency key; an in-flight
        tool that is not idempotent fails the run with ``TOOL_EFFECT_UNCERTAIN``. A run
        that was asked to cancel (``cancel_requested``) is cancelled instead, and this
        raises ``RunCancelledError``."""
        check_actor(actor)
        return await self._continued(
            await self._kernel.recover(run_id, actor, timeout=timeout), wait
        )

    async def recover_expired_runs(
        self, *, actor: Mapping[str, Any], limit: int | None = None
    ) -> RecoverySweep:
        """Claim and recover every running run of this app's agents whose lease expired
        (at most ``limit``).

        Several processes may call this at once: a store never lets two claim one run. A
        run of an agent this app does not have is never claimed; it is reported as skipped
        (``AGENT_NOT_FOUND``) for a worker that has the agent. One run that cannot be
        continued here never stops the sweep: it is skipped (and stays claimed until its
        lease lapses) or, when no fevex could continue it, failed; either way with a stable
        code and a log line. A run that was asked to cancel is cancelled, not continued,
        and reported among the ``recovered``. Runs whose lease expired but that no claim
        could take are reported as ``unclaimed``.
        """
        check_actor(actor)
        return await sweep_expired_runs(self, actor, limit)

    async def wake_due_runs(self, *, limit: int | None = None) -> WakeSweep:
        """Claim the paused runs this app can continue whose wake-up is due (a timer that
        elapsed, an event's deadline, the end of a child run; at most ``limit``) and
        continue each whose wait is over; one that woke early pauses again. Several
        processes may call this at once: a store never lets two claim one run, and a
        claimer that dies leaves the run due again once its lease lapses."""
        return await wake_due_runs(self, limit)

    # -- consulting and controlling runs --------------------------------------------

    async def get_run(self, run_id: str) -> AgentRun:
        return await self._kernel.get_run(run_id)

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: EventOrder = "asc",
    ) -> list[RunEvent]:
        """A run's events by sequence; ``after`` is an event id of the same run."""
        check_event_page(after, limit, order)
        await self.get_run(run_id)
        return list(await self.run_store.list_events(run_id, after=after, limit=limit, order=order))

    async def follow_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        poll_interval: float = 0.2,
        page_size: int = 100,
    ) -> AsyncGenerator[RunEvent, None]:
        """Yield every committed event of a run executing anywhere (this process or any
        other sharing the store), each once and in order, from after ``after``, until the
        run has ended (completed, failed or cancelled); a paused run is followed until it
        ends too. Full pages follow each other at once. An idle run is read again when the
        store says it moved on, if the store can (a
        :class:`~fevex.runtime.run_store.NotifyingRunStore`, such as PostgreSQL's), and at
        the latest every 30 seconds; on other stores, every ``poll_interval`` seconds.
        Closing the iterator never affects the run."""
        async with aclosing(
            self._kernel.follow(run_id, after, poll_interval=poll_interval, page_size=page_size)
        ) as events:
            async for event in events:
                yield event

    async def follow_event_pages(
        self,
        run_id: str,
        *,
        after: str | None = None,
        poll_interval: float = 0.2,
        page_size: int = 100,
    ) -> AsyncGenerator[Sequence[RunEvent], None]:
        """``follow_events`` a page at a time: each non-empty page of at most ``page_size``
        events as the store returned it, for a consumer that handles events in batches (an
        SSE server writing a page's frames at once) and holds one page at a time."""
        async with aclosing(
            self._kernel.follow_pages(
                run_id, after, poll_interval=poll_interval, page_size=page_size
            )
        ) as pages:
            async for page in pages:
                yield page

    async def list_runs(
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
        """Runs matching every filter given, newest first, ``limit`` (1 to 1000) at a
        time; pass the last run's id as ``after`` for the next page. Pages are stable:
        runs started meanwhile never shift them."""
        listing = RunListing(
            status=status,
            kind=kind,
            name=name,
            session_id=session_id,
            parent_run_id=parent_run_id,
            limit=limit,
            after=after,
        )
        return list(await self.run_store.list_runs(**listing))

    async def cancel_run(self, run_id: str, *, timeout: float | None = None) -> AgentRun:
        """Cancel a run and return it as it stands after; a finished run is returned
        unchanged.

        A run executing in this app is cancelled at once, a paused run (from any process)
        by taking it over. A run executing in another process sharing the store is asked
        to cancel (``AgentRun.cancel_requested``): its owner learns of it at its next lease
        renewal, within a third of its lease, and cancels it. This waits for that for at
        most ``timeout`` seconds (default ``lease_seconds``), and takes over and cancels
        the run itself if its owner's lease lapses first (the owner died) or the run
        paused meanwhile. When ``timeout`` passes first, the run is returned still
        ``running`` with the request recorded: its owner, or whoever takes it over next
        (a recovery), cancels it. A workflow's or a team's running or paused child runs
        are cancelled first, and their ends never fail it."""
        return await self._kernel.cancel(
            run_id, seconds_of(self.lease_seconds if timeout is None else timeout)
        )

    # -- sessions -------------------------------------------------------------------

    async def get_session(self, session_id: str) -> Session:
        # An id no store can keep names no session, on every store (none is asked).
        unstorable = isinstance(session_id, str) and not is_storable(session_id)
        session = None if unstorable else await self.run_store.get_session(session_id)
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
        if not is_storable(summary):
            raise FevexRunError(
                "INVALID_ARGUMENT",
                "summary holds a NUL character or a lone surrogate, which no store keeps.",
            )
        session = await self.get_session(session_id)
        expected = session.revision if revision is None else revision
        compacted = dataclasses.replace(session, history=(), summary=summary, updated_at=utc_now())
        return await self.run_store.save_session(compacted, expected_revision=expected)

    async def flush_observability(self) -> ObservabilityReport:
        """Build the spans of every event committed so far and wait until each exporter has
        had them (each export call within ``Observability.export_timeout``); report what
        failed or was dropped since the previous report. Never raises for an exporter."""
        if self._tracing is None:
            from fevex.observability.report import ObservabilityReport

            return ObservabilityReport()
        return await self._tracing.flush()

    async def close(self) -> None:
        """Stop background runs, flush observability (see ``flush_observability``; its
        failures are logged), close the models the app built from ``provider:model``
        references (those with an ``aclose()``), and close the run store."""
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self._tracing is not None:
            await self._tracing.close()
        for model in self._composition.owned_models:
            aclose = getattr(model, "aclose", None)
            if callable(aclose):
                await aclose()
        await self.run_store.close()
        if self.memory_store is not None:
            await self.memory_store.close()


def _check_run_id(run_id: object) -> None:
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None:
        raise FevexRunError(
            "INVALID_ARGUMENT",
            "run_id must be 1 to 128 letters, digits or the characters _ . : -",
        )


def check_run_definition(run: AgentRun, definition: TypedDefinition[Any]) -> None:
    """Refuse ``definition`` as the type of ``run``'s result unless the run is of it."""
    kind = (
        "agent"
        if isinstance(definition, AgentDefinition)
        else "workflow"
        if isinstance(definition, WorkflowDefinition)
        else "team"
    )
    if (run.kind, run.name) != (kind, definition.name):
        raise FevexRunError(
            "RUN_DEFINITION_MISMATCH",
            f"Run {run.id} is a run of {run.kind} {run.name!r}, not of {kind} "
            f"{definition.name!r}; pass its own definition (or none).",
            run_id=run.id,
        )
