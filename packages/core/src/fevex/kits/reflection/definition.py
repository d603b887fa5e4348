"""``define_reflection``: a question about run history answered by an ordinary agent run.

The reflection's agent (``reflection.agent``) is registered with the app like any agent
(``create_fevex(agents=[..., reflection.agent])``), and carries its one read-only tool,
``history_query``. ``reflection.run(app, question, context=)`` checks the caller, then
streams that agent's run under a run id it chose, so the tool finds the operation's state
(budgets, evidence ids) by the run id its context gives. The run is listed, followed,
cancelled and traced like any other; its model calls are bounded by the kernel
(``Limits.max_steps``), and counted here from the run's own ``model.started`` events.

An operation lives in the process of the ``run`` call that started it: the report is
delivered to that caller. A reflection run continued anywhere else (a recovery after a
crash) finds no operation, and its queries fail the run with
``REFLECTION_OPERATION_UNKNOWN``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from contextlib import aclosing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from fevex._ground.clock import new_id
from fevex._internal.engine.thread_loop import run_sync
from fevex.agents import AgentDefinition, Limits, define_agent
from fevex.errors import FevexConfigurationError, FevexError, FevexRunError
from fevex.kits.callbacks import call_assertion, check_callable, frozen_json
from fevex.kits.reflection.operation import Budget, Operation
from fevex.kits.reflection.report import Limitation, ReflectionReport
from fevex.kits.reflection.sources import HistoryApp, ReflectionSource, SourceScope
from fevex.knowledge.memory_store import namespace_of
from fevex.runtime.context import ExecutionContext
from fevex.tools import ToolContext, define_tool

__all__ = ["Reflection", "define_reflection", "history_query"]

_MAX_QUESTION_CHARS = 4_000
# The bounds that end a run and still leave a report to deliver, with what it had.
_BUDGET_CODES = frozenset(
    {
        "MAX_STEPS_EXCEEDED",
        "MAX_TOOL_CALLS_EXCEEDED",
        "MAX_INPUT_TOKENS_EXCEEDED",
        "MAX_OUTPUT_TOKENS_EXCEEDED",
    }
)
# The operations in progress in this process, by their run's id.
_OPERATIONS: dict[str, Operation] = {}

_INSTRUCTIONS = """\
You answer a question about what happened in an application's runs, from their metadata \
only (ids, kinds, names, statuses, error codes, times, usage, event types). Call the \
history_query tool with one action at a time:
- {"action": "discover", "status"?, "kind"?, "name"?, "cursor"?, "limit"?}: lists runs.
- {"action": "read", "run_id", "cursor"?, "limit"?}: lists the events of a run you \
discovered.
- {"action": "submit", "report": {"observed": [{"statement", "evidence": [ids]}], \
"hypotheses": [{"statement", "evidence": [ids]}], "recommendations": [text], \
"limitations": [text]}}: submits your report.
Every item returned has an evidence_id. An observed finding cites the evidence ids it rests \
on, only ids returned to you here; what you cannot cite is a hypothesis. Results say what \
budget is left; leave calls to submit. Once the report is accepted, end with one short line."""


class HistoryQuery(BaseModel):
    """One ``history_query`` call: an action and its arguments (the report is checked by
    the reflection itself, so that a malformed one is refused with its own code)."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["discover", "read", "submit"]
    run_id: str | None = None
    status: str | None = None
    kind: str | None = None
    name: str | None = None
    cursor: str | None = None
    limit: int | None = None
    report: Any = None


async def _answer_query(request: HistoryQuery, context: ToolContext) -> dict[str, Any]:
    operation = _OPERATIONS.get(context.run_id)
    if operation is None:
        raise FevexRunError(
            "REFLECTION_OPERATION_UNKNOWN",
            f"Run {context.run_id} is a reflection no reflection.run call in this process "
            "started (a recovered or directly started run); its history is not read.",
        )
    return await operation.answer(request.model_dump(exclude_none=True))


history_query = define_tool(
    name="history_query",
    description="Read run history metadata (discover runs, read a run's events) and submit "
    "the report.",
    errors_to_model="input",
)(_answer_query)


class Reflection:
    """A defined reflection: register :attr:`agent` with the app, then :meth:`run` it."""

    def __init__(
        self,
        agent: AgentDefinition[str],
        source: ReflectionSource,
        authorize: Callable[..., Any],
        budget: Budget,
    ) -> None:
        self.agent = agent
        self.source = source
        self.budget = budget
        self._authorize = authorize

    async def run(
        self,
        app: HistoryApp,
        question: str,
        *,
        context: ExecutionContext | dict[str, Any] | None = None,
        persist: bool = False,
        timeout: float | None = None,
    ) -> ReflectionReport:
        """Answer ``question`` from the history the source shows the caller.

        ``authorize(question, context)`` is asked first (``REFLECTION_UNAUTHORIZED`` when
        it raises); then the reflection's agent runs, under ``context``, within the
        budgets. With ``persist=True`` the delivered report (its JSON: statements,
        evidence ids, limitations, coverage; never run content) is added to the app's
        memory store in the caller's namespace, and ``persisted`` says so."""
        asked = frozen_json(question, "question")
        if not isinstance(asked, str) or not asked.strip() or len(asked) > _MAX_QUESTION_CHARS:
            raise FevexRunError(
                "KIT_REQUEST_INVALID",
                f"question must be text of 1 to {_MAX_QUESTION_CHARS} characters.",
                details={"field": "question"},
            )
        if self.agent.name not in app.agents:
            raise FevexConfigurationError(
                "REFLECTION_NOT_REGISTERED",
                f"The app has no agent {self.agent.name!r}: pass reflection.agent in "
                "create_fevex(agents=[...]).",
            )
        caller = ExecutionContext.of(context)
        frozen_context = frozen_json(caller.to_json(), "context")
        await call_assertion(
            "authorize",
            self._authorize,
            asked,
            ExecutionContext.of(frozen_context),
            rejected="REFLECTION_UNAUTHORIZED",
        )
        run_id = new_id("run")
        scope = SourceScope(app, ExecutionContext.of(frozen_context), run_id)
        operation = Operation(asked, self.source, scope, self.budget)
        _OPERATIONS[run_id] = operation
        try:
            failure = await self._drive(app, operation, run_id, frozen_context, timeout)
        finally:
            del _OPERATIONS[run_id]
        if operation.fatal is not None:
            raise operation.fatal
        if failure is not None:
            if failure.code not in _BUDGET_CODES:
                raise failure
            operation.note("budget", f"the run ended at a bound of its budget ({failure.code}).")
        report = operation.report(run_id)
        return await _persisted(app, report, frozen_context) if persist else report

    def run_sync(
        self,
        app: HistoryApp,
        question: str,
        *,
        context: ExecutionContext | dict[str, Any] | None = None,
        persist: bool = False,
        timeout: float | None = None,
    ) -> ReflectionReport:
        """The blocking twin of :meth:`run`, on the thread's loop the app's twins use."""
        return run_sync(self.run(app, question, context=context, persist=persist, timeout=timeout))

    async def _drive(
        self,
        app: HistoryApp,
        operation: Operation,
        run_id: str,
        context: dict[str, Any],
        timeout: float | None,
    ) -> FevexError | None:
        """Stream the agent run to its end, counting its model calls; the error it ended
        with, if it failed (a stream ends by raising it, after ``run.failed``)."""
        budget = self.budget
        prompt = (
            f"Question: {operation.question}\n"
            f"Budget: {budget.max_calls} model calls ({budget.reserve_calls} kept for the "
            f"report), {budget.max_pages} pages, {budget.max_events} events, "
            f"{budget.max_evidence_chars} evidence characters."
        )
        stream = app.stream_agent(
            self.agent, prompt, context=context, run_id=run_id, timeout=timeout
        )
        try:
            async with aclosing(stream) as events:
                async for event in events:
                    if event.type == "model.started":
                        operation.calls = int(event.payload["step"])
        except FevexError as error:
            return error
        return None


async def _persisted(
    app: HistoryApp, report: ReflectionReport, context: dict[str, Any]
) -> ReflectionReport:
    """``report`` added to the app's memory store in the caller's namespace; one the store
    refuses (a report longer than a memory may be) is delivered unkept, and says so."""
    content = json.dumps(report.to_json() | {"persisted": True}, sort_keys=True)
    store = app.memory_store
    if store is None:
        kept = Limitation("persistence", "the app has no memory store to keep the report in.")
        return dataclasses.replace(report, limitations=(*report.limitations, kept))
    try:
        await store.add(
            namespace_of(context),
            content,
            metadata={"kind": "fevex.reflection", "run_id": report.run_id},
        )
    except FevexError as error:
        kept = Limitation("persistence", f"the report could not be kept ({error.code}).")
        return dataclasses.replace(report, limitations=(*report.limitations, kept))
    return dataclasses.replace(report, persisted=True)


def define_reflection(
    *,
    model: str | None,
    source: ReflectionSource,
    authorize: Callable[..., Any],
    max_calls: int = 4,
    reserve_calls: int = 1,
    max_pages: int = 4,
    max_events: int = 64,
    max_evidence_chars: int = 12_000,
    name: str = "reflection",
) -> Reflection:
    """A reflection over ``source``, answered by ``model`` (an app model key or a
    ``provider:model`` reference) in an agent run named ``name``.

    ``max_calls`` bounds the run's model calls. Discovery and reads stop while
    ``reserve_calls`` or fewer calls are left, which are kept for submitting (and
    correcting) the report; the call that ends the run after the report is accepted is
    the last of them, so ``max_calls`` is at least ``reserve_calls + 2``. ``max_pages``
    bounds the queries answered, ``max_events`` the events read, ``max_evidence_chars``
    the characters of evidence returned to the model. ``INVALID_REFLECTION`` for a value
    out of range."""
    check_callable("authorize", authorize, required=True)
    bounds = {
        "max_calls": max_calls,
        "reserve_calls": reserve_calls,
        "max_pages": max_pages,
        "max_events": max_events,
        "max_evidence_chars": max_evidence_chars,
    }
    for key, value in bounds.items():
        lowest = 0 if key == "reserve_calls" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < lowest:
            raise _invalid(f"{key} must be an integer of {lowest} or more, not {value!r}.")
    if max_calls < reserve_calls + 2:
        raise _invalid(
            f"max_calls ({max_calls}) must leave a call to read and one to end the run besides "
            f"reserve_calls ({reserve_calls}): at least {reserve_calls + 2}."
        )
    if not isinstance(source, ReflectionSource) or not isinstance(source.id, str):
        raise _invalid("source must be a ReflectionSource (run_history_source, log_source).")
    agent = define_agent(
        name=name,
        instructions=_INSTRUCTIONS,
        model=model,
        tools=[history_query],
        limits=Limits(
            max_steps=max_calls,
            # Every page, plus room for refused calls: the pages bound the reading.
            max_tool_calls=max_pages + 4 * max_calls,
            max_tool_retries=None,
        ),
        description="Answers questions about run history from its metadata.",
    )
    return Reflection(agent, source, authorize, Budget(**bounds))


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_REFLECTION", message)
