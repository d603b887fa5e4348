"""The app: a validated composition of agents, tools and models, bound to a run store.

``Fevex`` is the face: every run it starts or continues goes through one private launcher
(:mod:`fevex._internal.launch.launcher`) over the execution kernel, whose run kinds (agent,
workflow, team) are registered when the app is created.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self, TypeVar, overload

from fevex._ground.clock import utc_now
from fevex._ground.storable_text import is_storable
from fevex._internal.agents.checkpoint_signature import (
    CheckpointSigner,
    SecretValue,
    checkpoint_signer,
)
from fevex._internal.composition.registry import Composition, Problems, compose
from fevex._internal.composition.tool_runner import CredentialResolver, ToolExceptionHook
from fevex._internal.engine.event_sink import Observers
from fevex._internal.engine.kernel import Kernel, KindFactory, seconds_of
from fevex._internal.engine.recovery_sweep import sweep_expired_runs, wake_due_runs
from fevex._internal.launch.app_checks import (
    check_lease_seconds,
    check_observability,
    with_tasks,
)
from fevex._internal.launch.app_knowledge import (
    AppMemoryStore,
    attach_app_knowledge,
    open_app_memory_store,
)
from fevex._internal.launch.app_stores import (
    open_app_record_store,
    open_app_run_store,
    run_store_url,
)
from fevex._internal.launch.blocking_twins import BlockingTwins, blocking, blocking_iterator
from fevex._internal.launch.checkpoint_methods import CheckpointMethods
from fevex._internal.launch.launcher import Launcher
from fevex._internal.launch.run_arguments import (
    AgentInput,
    TypedDefinition,
)
from fevex._internal.launch.run_kinds import app_run_kinds
from fevex._internal.launch.run_methods import RunMethods
from fevex._internal.launch.task_methods import TaskMethods
from fevex.agents import AgentDefinition
from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.events import RunEvent
from fevex.models import ModelGateway
from fevex.policies.policy import Policy
from fevex.runtime.approval import ApprovalDecision, check_actor
from fevex.runtime.inputs import InputAnswer, input_answer
from fevex.runtime.record_store import RecordStore
from fevex.runtime.records import AgentRun, RunStatus, Session
from fevex.runtime.recovery import RecoverySweep, WakeSweep
from fevex.runtime.run_result import RunResult
from fevex.runtime.run_store import EventOrder, RunStore
from fevex.runtime.store_rules import RunListing
from fevex.tools import ToolDefinition
from fevex.tools.connection import ConnectionDefinition

if TYPE_CHECKING:
    # Imported when used: an app without observability, knowledge, workflows or teams
    # never loads them.
    from fevex._internal.tracing.trace_pipeline import TracePipeline
    from fevex.knowledge import ContextProviderDefinition, MemoryStore, SkillDefinition
    from fevex.observability.configuration import Observability
    from fevex.observability.report import ObservabilityReport
    from fevex.teams import TeamDefinition
    from fevex.workflows import WorkflowDefinition

__all__ = ["AgentInput", "Fevex", "RunResult", "create_fevex"]

OutputT = TypeVar("OutputT")


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
    tasks: Iterable[Any] = (),
    record_store: RecordStore | str | None = None,
    checkpoint_key: str | bytes | SecretValue | None = None,
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
    (an in-memory store when unset). ``tasks`` are durable tasks
    (:func:`fevex.kits.tasks.define_durable_task`; ``INVALID_TASK`` for a task whose id an
    agent, workflow or team has). ``record_store`` (the kits' records) is a store or a URL;
    ``None`` follows the run store's URL or its ``open_record_store()`` (README, "Records").

    ``on_tool_exception``, for debugging, is called as ``hook(exception, context)`` with
    each exception a tool function raises, as raised, before it is scrubbed of the call's
    credentials: what the hook does with it is the app's to keep safe.

    ``checkpoint_key`` (text, bytes or a secret such as ``SecretStr``, at least 32 bytes;
    ``None`` uses ``FEVEX_CHECKPOINT_KEY``) signs exported checkpoints and verifies restored
    ones (without it, a restore needs ``trusted=True``); the app keeps it nowhere readable.

    Every problem of the composition is reported at once: the ``FevexConfigurationError``
    has the first one's ``code`` and lists each in ``problems``. The app is a context
    manager (``async with create_fevex(...) as app``, or ``with`` in scripts) that closes
    it on exit.
    """
    signer = checkpoint_signer(checkpoint_key)
    # A credential: no frame of a traceback out of here keeps it.
    del checkpoint_key
    return _create_fevex(
        {},
        models=models,
        agents=agents,
        tools=tools,
        run_store=run_store,
        on_event=on_event,
        credentials=credentials,
        policies=policies,
        connections=connections,
        workflows=workflows,
        teams=teams,
        lease_seconds=lease_seconds,
        observability=observability,
        context_providers=context_providers,
        memory_store=memory_store,
        on_tool_exception=on_tool_exception,
        tasks=tasks,
        record_store=record_store,
        checkpoint_signer=signer,
    )


def _create_fevex(
    run_kinds: Mapping[str, KindFactory],
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
    tasks: Iterable[Any] = (),
    record_store: RecordStore | str | None = None,
    checkpoint_signer: CheckpointSigner | FevexConfigurationError | None = None,
) -> Fevex:
    """:func:`create_fevex`, with ``run_kinds`` registered besides the app's own: the
    private hook through which a test brings a kind of run of its own. It takes the
    checkpoint key as its signer, or the problem of the key given."""
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
    check_lease_seconds(lease_seconds, problems)
    run_kinds = with_tasks(run_kinds, tasks, composition, problems)
    check_observability(observability, problems)
    knowledge = attach_app_knowledge(composition, context_providers, problems)
    if isinstance(checkpoint_signer, FevexConfigurationError):
        problems.add(checkpoint_signer)
    # The store is opened only for a valid composition: opening one can create it.
    problems.raise_if_any()
    opened_memory_store = open_app_memory_store(memory_store)
    tracing = None
    if observability is not None or os.environ.get("FEVEX_TRACE_EXPORTERS"):
        from fevex._internal.tracing.trace_pipeline import open_pipeline

        tracing = open_pipeline(observability)
    if observability is not None and observability.calculate_cost is not None:
        composition = dataclasses.replace(composition, calculate_cost=observability.calculate_cost)
    opened_run_store = open_app_run_store(run_store)
    app = Fevex(
        composition,
        opened_run_store,
        lease_seconds=float(lease_seconds),
        tracing=tracing,
        run_kinds=run_kinds,
    )
    app._memory_store = opened_memory_store
    if isinstance(checkpoint_signer, CheckpointSigner):
        app._checkpoint_signer = checkpoint_signer
    app._run_store_url = run_store_url(run_store)
    app.record_store = open_app_record_store(record_store, run_store, opened_run_store)
    app._kernel.inputs.records = lambda: app.record_store
    if knowledge is not None:
        knowledge.app_memory_store = lambda: app.memory_store
        knowledge.app_record_store = lambda: app.record_store
    return app


class Fevex(RunMethods, TaskMethods, CheckpointMethods, AppMemoryStore, BlockingTwins):
    """Runs agents and answers questions about runs and sessions.

    Every coroutine method has a blocking twin with a ``_sync`` suffix for scripts. Use it
    as ``async with`` (or ``with`` in scripts): it is closed on exit.
    """

    # The store the family and publication kits keep their records in; closed with the app.
    record_store: RecordStore
    # The URL its run store was opened from (given, or FEVEX_RUN_STORE), None for a store
    # object or the default in-memory store: what a command's --store is checked against.
    _run_store_url: str | None = None

    def __init__(
        self,
        composition: Composition,
        store: RunStore,
        *,
        lease_seconds: float = 30.0,
        tracing: TracePipeline | None = None,
        run_kinds: Mapping[str, KindFactory] | None = None,
    ) -> None:
        self._composition = composition
        self.run_store = store
        self.lease_seconds = lease_seconds
        self._tracing = tracing
        self._kernel = Kernel(
            store,
            {**app_run_kinds(composition), **(run_kinds or {})},
            Observers(composition.observers, tracing),
            lease_seconds=lease_seconds,
        )
        self._launcher = Launcher(self._kernel)

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

    # -- durable continuation -------------------------------------------------------

    @overload
    async def resume_run(
        self,
        run_id: str,
        decision: InputAnswer,
        *,
        definition: TypedDefinition[Any] | None = None,
        timeout: float | None = None,
        wait: bool = True,
    ) -> AgentRun: ...

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
        decision: ApprovalDecision | InputAnswer | Mapping[str, Any] | None = None,
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
        before anything changes.

        An answer to a pending input (an :class:`~fevex.runtime.InputAnswer`, or a mapping
        with ``"type": "input"``) goes to the tool call of the running run that waits for
        it, in whichever process executes the run, and this returns the run's snapshot
        once that call has taken it (whatever ``wait`` says): the run goes on where it
        runs. ``INPUT_NOT_PENDING`` when nobody waits for it any more, ``INPUT_INVALID``
        when the content does not match the request's schema; nothing changes then."""
        launcher = self._launcher
        answer = input_answer(decision)
        if answer is not None:
            return await launcher.answer_input(run_id, answer, definition)
        assert not isinstance(decision, InputAnswer)  # always an answer, above
        return await launcher.continued(
            wait, launcher.resume, run_id, decision, definition, timeout
        )

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
        launcher = self._launcher
        return await launcher.continued(
            wait, launcher.send_event, run_id, name, payload, actor, timeout
        )

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
        launcher = self._launcher
        return await launcher.continued(wait, launcher.recover, run_id, actor, timeout)

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
        return await sweep_expired_runs(self._kernel, actor, limit)

    async def wake_due_runs(self, *, limit: int | None = None) -> WakeSweep:
        """Claim the paused runs this app can continue whose wake-up is due (a timer that
        elapsed, an event's deadline, the end of a child run; at most ``limit``) and
        continue each whose wait is over; one that woke early pauses again. Several
        processes may call this at once: a store never lets two claim one run, and a
        claimer that dies leaves the run due again once its lease lapses."""
        return await wake_due_runs(self._kernel, limit)

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
        return await self._kernel.list_events(run_id, after=after, limit=limit, order=order)

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
        await self._launcher.close()
        if self._tracing is not None:
            await self._tracing.close()
        for model in self._composition.owned_models:
            aclose = getattr(model, "aclose", None)
            if callable(aclose):
                await aclose()
        await self.run_store.close()
        if self._memory_store is not None:
            await self._memory_store.close()
        await self.record_store.close()

    # -- blocking twins -------------------------------------------------------------
    # (Those of run_*, stream_* and start_* are RunMethods'; those typed otherwise than
    # their coroutine method, BlockingTwins'.)

    recover_expired_runs_sync = blocking(recover_expired_runs)
    wake_due_runs_sync = blocking(wake_due_runs)
    get_run_sync = blocking(get_run)
    list_events_sync = blocking(list_events)
    follow_events_sync = blocking_iterator(follow_events)
    follow_event_pages_sync = blocking_iterator(follow_event_pages)
    list_runs_sync = blocking(list_runs)
    cancel_run_sync = blocking(cancel_run)
    get_session_sync = blocking(get_session)
    compact_session_sync = blocking(compact_session)
    flush_observability_sync = blocking(flush_observability)
    close_sync = blocking(close)
