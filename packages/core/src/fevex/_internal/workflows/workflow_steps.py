"""The steps a workflow function awaits (:class:`~fevex.workflows.WorkflowStep`), each a
journal entry of its run, answered from the journal on a replay. They see their run only
as its :class:`~fevex._internal.workflows.step_host.StepHost`.

``parallel`` runs its branches as tasks and settles every one before it ends; its own
entry only checks its identity and announces its end: on a replay the branches run again
and their steps answer from the journal. Several branches that pause pause the run on
the first, in declaration order; the replay after that wait re-pauses on the next.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fevex._internal.engine.deadline import DeadlineReached
from fevex._internal.workflows.step_host import NO_ANNOUNCEMENT, Announcement, StepHost
from fevex._internal.workflows.workflow_state import Suspended, error_from_json, invalid_step
from fevex.agents import AgentDefinition, Limits
from fevex.errors import FevexError, FevexRunError
from fevex.models import Usage
from fevex.schemas.schema import CompiledSchema, ensure_json
from fevex.tools import ToolDefinition
from fevex.workflows.step import AgentStepResult, EventDelivery

__all__ = ["WorkflowSteps"]


class WorkflowSteps:
    """The :class:`~fevex.workflows.WorkflowStep` a workflow function receives: each step
    a journal entry of the run its :class:`StepHost` is."""

    __slots__ = ("_host",)

    def __init__(self, host: StepHost) -> None:
        self._host = host

    @property
    def host(self) -> StepHost:
        """The run these steps belong to (a team's steps use it too)."""
        return self._host

    async def run(
        self,
        step_id: str,
        function: Callable[..., Any],
        /,
        *args: Any,
        compensate: Callable[[Any], Any] | None = None,
    ) -> Any:
        host = self._host
        if not callable(function):
            raise invalid_step(f"Step {step_id!r}: {function!r} is not callable.")
        _check_compensation(step_id, compensate)
        identity = {"function": _function_name(function), "args": list(args)}
        entry = host.lookup(step_id, "run", identity)
        if entry is not None and entry.status != "started":
            output = await host.replayed(step_id, entry)
            host.remember(step_id, compensate, output)
            return output
        if entry is None:
            await host.start(step_id, "run", identity, durable=False)
        try:
            result = await host.call(function, *args)
        except (asyncio.CancelledError, DeadlineReached):
            raise
        except FevexError as error:
            raise await host.fail(step_id, error) from None
        except Exception as error:
            failure = FevexRunError(
                "WORKFLOW_STEP_FAILED",
                f"Step {step_id!r} failed: {type(error).__name__}: {error}",
                details={"step_id": step_id},
            )
            raise await host.fail(step_id, failure) from error
        try:
            ensure_json(result)
        except TypeError as error:
            raise await host.fail(
                step_id,
                FevexRunError(
                    "WORKFLOW_STEP_OUTPUT_INVALID",
                    f"Step {step_id!r} returned what is not JSON: {error}.",
                    details={"step_id": step_id},
                ),
            ) from None
        host.remember(step_id, compensate, result)
        return await host.complete(step_id, result)

    async def tool(
        self,
        step_id: str,
        tool: str | ToolDefinition[Any, Any],
        input: Any,
        *,
        compensate: Callable[[Any], Any] | None = None,
    ) -> Any:
        host = self._host
        _check_compensation(step_id, compensate)
        name = tool.name if isinstance(tool, ToolDefinition) else tool
        definition = host.tool(name) if isinstance(name, str) else None
        if definition is None or (isinstance(tool, ToolDefinition) and definition is not tool):
            raise FevexRunError(
                "TOOL_NOT_AVAILABLE",
                f"Step {step_id!r}: the app has no tool {name!r}; pass it in "
                "create_fevex(tools=[...]).",
                details={"tool_name": str(name)},
            )
        if definition.approval == "required":
            raise invalid_step(
                f"Step {step_id!r}: tool {name} needs an approval; run it in an agent step."
            )
        identity = {"tool": name, "input": input}
        entry = host.lookup(step_id, "tool", identity)
        if entry is not None and entry.status != "started":
            output = await host.replayed(step_id, entry)
            host.remember(step_id, compensate, output)
            return output
        if entry is not None and definition.idempotency != "keyed":
            raise await host.fail(
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
            await host.start(step_id, "tool", identity, durable=True)
        try:
            output = await host.run_tool(step_id, name, input)
        except FevexError as error:
            raise await host.fail(step_id, error) from None
        host.remember(step_id, compensate, output)
        return await host.complete(step_id, output)

    async def agent(
        self,
        step_id: str,
        agent: str | AgentDefinition[Any],
        *,
        input: Any,
        session_id: str | None = None,
    ) -> AgentStepResult[Any]:
        name = agent.name if isinstance(agent, AgentDefinition) else agent
        return await self.agent_step(step_id, name, input, session_id, NO_ANNOUNCEMENT)

    async def agent_step(
        self,
        step_id: str,
        name: str,
        input: Any,
        session_id: str | None,
        announce: Announcement,
    ) -> AgentStepResult[Any]:
        """The agent step, its events saying what ``announce`` adds (a team's delegation
        names its agent)."""
        host = self._host
        host.agent(name)  # AGENT_NOT_FOUND before anything else is checked
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise invalid_step(f"Step {step_id!r}: session_id must be a non-empty string.")
        child = await host.agent_child(
            name, input, session_id=session_id, limits=_token_budget(host)
        )
        identity = {"agent": name, "input": child.input, "session_id": session_id}
        entry = host.lookup(step_id, "agent", identity, announce)
        if entry is not None and entry.status != "started" and host.child_of(step_id) is None:
            output = await host.replayed(step_id, entry)
            return _agent_result(output, child.output_schema)
        if entry is None:
            _check_tokens(host, exhausted=True)
            host.reserve_child(step_id)
            # Durable before the child exists: a recovery finds its id, never a second child.
            await host.start(step_id, "agent", identity, durable=True)
        ended = await host.run_child(step_id, child)
        if ended.status in ("running", "paused"):
            await host.wait_for_children(step_id, [ended.id])
        if ended.status != "completed":
            error = error_from_json(ended.error)
            if ended.status == "cancelled" and ended.error is None:
                error = FevexRunError("RUN_CANCELLED", f"Child run {ended.id} was cancelled.")
            error.details.setdefault("child_run_id", ended.id)
            raise await host.fail(step_id, error)
        output = {
            "run_id": ended.id,
            "session_id": ended.session_id,
            "output": ended.output,
            "usage": ended.usage,
        }
        await host.complete(step_id, output, child_run_id=ended.id)
        _check_tokens(host)
        return _agent_result(output, child.output_schema)

    async def wait_for_event(self, step_id: str, name: str) -> EventDelivery:
        host = self._host
        if name not in host.declared_events:
            raise FevexRunError(
                "EVENT_NOT_DECLARED",
                f"Workflow {host.workflow_name} waits for the event {name!r}, "
                "which it does not declare in events={...}.",
                details={"event": name},
            )
        identity = {"event": name}
        entry = host.lookup(step_id, "event", identity)
        if entry is not None and entry.status != "started":
            output = await host.replayed(step_id, entry, name)
            schema = host.declared_events[name]
            payload = output.get("payload")
            return EventDelivery(
                payload if schema is None else schema.validate(payload),
                output.get("actor"),
                str(output.get("received_at")),
                payload_json=payload,
            )
        if entry is None:
            await host.start(step_id, "event", identity, durable=False)
        await host.wait_for_event(step_id, name)

    async def sleep(self, step_id: str, seconds: float) -> None:
        host = self._host
        if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
            raise invalid_step(f"Step {step_id!r}: seconds must be a number of 0 or more.")
        identity = {"seconds": seconds}
        entry = host.lookup(step_id, "sleep", identity)
        if entry is not None and entry.status != "started":
            await host.replayed(step_id, entry)
            return
        if entry is None:
            await host.start(step_id, "sleep", identity, durable=False)
        await host.wait_for_timer(step_id, float(seconds))

    async def parallel(
        self, step_id: str, branches: Mapping[str, Callable[[], Awaitable[Any]]]
    ) -> dict[str, Any]:
        return await self.parallel_step(step_id, branches, NO_ANNOUNCEMENT)

    async def parallel_step(
        self,
        step_id: str,
        branches: Mapping[str, Callable[[], Awaitable[Any]]],
        announce: Announcement,
    ) -> dict[str, Any]:
        """The parallel step, its events saying what ``announce`` adds (a team's names
        its branches when it starts)."""
        host = self._host
        if not isinstance(branches, Mapping) or not branches:
            raise invalid_step(f"Step {step_id!r}: parallel needs a mapping of branches.")
        for name, branch in branches.items():
            if not isinstance(name, str) or not name or not callable(branch):
                raise invalid_step(
                    f"Step {step_id!r}: each branch is a name and a function of no arguments."
                )
        names = list(branches)
        identity = {"branches": names}
        entry = host.lookup(step_id, "parallel", identity, announce)
        if entry is None:
            await host.start(step_id, "parallel", identity, durable=False)
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
            raise await host.fail(step_id, _as_fevex(error)) from error
        results = {name: outcomes[name] for name in names}
        if entry is None or entry.status != "completed":
            journalled = _as_json(results)
            try:
                ensure_json(journalled)
            except TypeError as error:
                raise await host.fail(
                    step_id,
                    FevexRunError(
                        "WORKFLOW_STEP_OUTPUT_INVALID",
                        f"A branch of step {step_id!r} returned what is not JSON: {error}.",
                        details={"step_id": step_id},
                    ),
                ) from None
            await host.complete(step_id, journalled)
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
            # Not twice (see WorkflowDriver.steps).
            if not (isinstance(task, asyncio.Task) and task.cancelling()):
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


def _check_compensation(step_id: str, compensate: Any) -> None:
    if compensate is not None and not callable(compensate):
        raise invalid_step(f"Step {step_id!r}: compensate must be a function of the result.")


def _as_json(value: Any) -> Any:
    """Branch results as the journal keeps them: the result of a step (an
    ``AgentStepResult``, an ``EventDelivery``) as the JSON its own entry stores."""
    if isinstance(value, AgentStepResult):
        return {
            "run_id": value.run_id,
            "session_id": value.session_id,
            "output": value.output_json,
            "usage": value.usage.to_json(),
        }
    if isinstance(value, EventDelivery):
        return {
            "payload": value.payload_json,
            "actor": value.actor,
            "received_at": value.received_at,
        }
    if isinstance(value, dict):
        return {key: _as_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_json(item) for item in value]
    return value


def _agent_result(output: Any, schema: CompiledSchema | None) -> AgentStepResult[Any]:
    """The step's result from its journalled JSON: the output validated by the agent's
    output schema, as its run returned it, on the first run and on every replay alike."""
    stored = output.get("output")
    value = stored if schema is None or stored is None else schema.validate(stored)
    return AgentStepResult(
        str(output["run_id"]),
        str(output["session_id"]),
        value,
        Usage.from_json(output.get("usage") or {}),
        output_json=stored,
    )


def _token_budget(host: StepHost) -> Limits:
    """The bounds the workflow's token budgets leave its next agent step, over that
    agent's own limits (a budget used up is refused before the step: ``_check_tokens``)."""
    usage = host.usage
    left: dict[str, int | None] = {}
    for name, used in (("input", usage.input_tokens), ("output", usage.output_tokens)):
        limit = host.limits.get(f"max_{name}_tokens")
        left[f"max_{name}_tokens"] = None if limit is None else max(1, limit - (used or 0))
    return Limits(max_steps=None, max_tool_calls=None, max_tool_retries=None, **left)


def _check_tokens(host: StepHost, *, exhausted: bool = False) -> None:
    """Fail the workflow over a token budget; with ``exhausted``, also at a budget used up
    to its last token (before a new agent step, which would have nothing to spend)."""
    usage = host.usage
    for name, used in (("input", usage.input_tokens), ("output", usage.output_tokens)):
        limit = host.limits.get(f"max_{name}_tokens")
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
