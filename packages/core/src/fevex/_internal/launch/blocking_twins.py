"""The blocking twins of the app's coroutine methods, for scripts: each runs its coroutine on
the thread's reusable event loop (see :mod:`fevex._internal.launch.sync`).

A twin that takes what its coroutine method takes and returns what it returns is derived
from the method (:func:`blocking`, :func:`blocking_iterator`). The twins whose types
differ from their method's (a result typed by the definition passed, no ``wait=``) are
written out once, over the app's launcher.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

from fevex._internal.engine.run_kind import LaunchRequest
from fevex._internal.launch.launcher import Launcher
from fevex._internal.launch.run_arguments import (
    AgentInput,
    AgentReference,
    RunContext,
    TeamReference,
    TypedDefinition,
    WorkflowReference,
)
from fevex._internal.launch.run_kinds import AGENT, TEAM, WORKFLOW
from fevex._internal.launch.sync import iterate_sync, run_sync
from fevex.agents import AgentDefinition, Limits
from fevex.runtime.approval import ApprovalDecision
from fevex.runtime.inputs import InputAnswer, input_answer
from fevex.runtime.records import AgentRun
from fevex.runtime.run_result import RunResult

if TYPE_CHECKING:
    # Named in annotations only: an agent app never loads workflows or teams.
    from fevex.teams import TeamDefinition, TeamLimits
    from fevex.workflows import WorkflowDefinition

__all__ = ["BlockingTwins", "blocking", "blocking_iterator"]

P = ParamSpec("P")
T = TypeVar("T")
AppT = TypeVar("AppT")
TwinT = TypeVar("TwinT", bound=Callable[..., Any])
OutputT = TypeVar("OutputT")


def blocking(
    method: Callable[Concatenate[AppT, P], Coroutine[Any, Any, T]], doc: str | None = None
) -> Callable[Concatenate[AppT, P], T]:
    """``name_sync = blocking(name)`` in a class body: the blocking twin of the coroutine
    method ``name``, with its parameters and its result (and its docstring, or ``doc``)."""

    def twin(app: AppT, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(method(app, *args, **kwargs))

    return _named_after(twin, method, doc)


def blocking_iterator(
    method: Callable[Concatenate[AppT, P], AsyncIterator[T]], doc: str | None = None
) -> Callable[Concatenate[AppT, P], Iterator[T]]:
    """``name_sync = blocking_iterator(name)``: the blocking twin of the method ``name``
    that returns an async iterator, as a plain iterator; closing it closes the method's."""

    def twin(app: AppT, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return iterate_sync(method(app, *args, **kwargs))

    return _named_after(twin, method, doc)


def _named_after(twin: TwinT, method: Callable[..., Any], doc: str | None) -> TwinT:
    """``twin`` as introspection shows it: the method's parameters, its own name."""
    functools.update_wrapper(twin, method)
    twin.__name__ = f"{method.__name__}_sync"
    twin.__qualname__ = f"{method.__qualname__}_sync"
    if doc is not None:
        twin.__doc__ = doc
    return twin


class BlockingTwins:
    """The twins typed otherwise than their coroutine methods: a run's result typed by the
    definition passed (``run_agent_sync(support, ...)`` is a ``RunResult[Answer]``), and a
    continuation that always waits for its run (no ``wait=``)."""

    _launcher: Launcher

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
        request = LaunchRequest(agent, input, context, timeout, session_id, run_id)
        return run_sync(self._launcher.run(AGENT, request))

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
        request = LaunchRequest(workflow, input, context, timeout, limits=limits)
        return run_sync(self._launcher.run(WORKFLOW, request))

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
        request = LaunchRequest(team, input, context, timeout, limits=limits)
        return run_sync(self._launcher.run(TEAM, request))

    @overload
    def resume_run_sync(
        self,
        run_id: str,
        decision: InputAnswer,
        *,
        definition: TypedDefinition[Any] | None = None,
        timeout: float | None = None,
    ) -> AgentRun: ...

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
        decision: ApprovalDecision | InputAnswer | Mapping[str, Any] | None = None,
        *,
        definition: TypedDefinition[Any] | None = None,
        timeout: float | None = None,
    ) -> RunResult[Any] | AgentRun:
        launcher = self._launcher
        answer = input_answer(decision)
        if answer is not None:
            return run_sync(launcher.answer_input(run_id, answer, definition))
        assert not isinstance(decision, InputAnswer)  # always an answer, above
        return run_sync(
            launcher.continued(True, launcher.resume, run_id, decision, definition, timeout)
        )

    def recover_run_sync(
        self, run_id: str, *, actor: Mapping[str, Any], timeout: float | None = None
    ) -> RunResult[Any]:
        launcher = self._launcher
        return run_sync(launcher.continued(True, launcher.recover, run_id, actor, timeout))

    def send_event_sync(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        actor: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> RunResult[Any]:
        launcher = self._launcher
        return run_sync(
            launcher.continued(True, launcher.send_event, run_id, name, payload, actor, timeout)
        )
