"""Spans from a run's committed events, as this process sees them.

The builder reads each committed event once, with the snapshot of the run it belongs to,
and returns the spans that event finished. It keeps only what open spans need, and it
derives every id instead of storing one, so that whatever process sees a run's events
continues the same trace:

- a trace per run tree: the first 16 bytes of the SHA-256 of the root run's id;
- a ``run`` span per execution of a run in one process (``run.started``, ``run.resumed``
  or ``run.recovered`` to ``run.paused``, ``run.completed``, ``run.failed`` or
  ``run.cancelled``); the first one's id is derived from the run id, a later one's from its
  opening event, and a later one is the first one's child;
- the first execution of a child run is the child of the step that started it (the
  workflow step or team delegation named by ``parent_step_id`` in its ``run.started``),
  or of its parent's first execution when the step is not known;
- ``model``, ``tool``, ``workflow_step`` and ``team_delegation`` spans are children of the
  execution they ran in; their ids are derived from the run id and the step number, the
  tool call id or the step id.

A workflow step can end in another execution than the one it started in (a timer, an
event, a paused child): the span is finished by the process that sees its end, from its
start when this process saw it, else from the start of the execution that ended it
(``fevex.workflow.step.continued``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from fevex.events import RunEvent
from fevex.events.cost import Cost, total_cost
from fevex.observability.content import ContentKind, ContentPolicy, redact_sensitive_keys
from fevex.observability.spans import AttributeValue, Span, SpanEvent, SpanKind
from fevex.runtime.records import AgentRun

__all__ = ["SpanBuilder", "span_id_of", "trace_id_of"]

_OPENINGS = {"run.started": "started", "run.resumed": "resumed", "run.recovered": "recovered"}
_ENDINGS = {
    "run.paused": "paused",
    "run.completed": "completed",
    "run.failed": "failed",
    "run.cancelled": "cancelled",
}
# Team runs name their workflow steps by what they do.
_STEP_OPENINGS: dict[str, SpanKind] = {
    "workflow.step.started": "workflow_step",
    "team.delegation.started": "team_delegation",
    "team.parallel.started": "workflow_step",
    # A durable task's steps (fevex.kits.tasks) are steps of its run too.
    "task.step.started": "workflow_step",
}
_STEP_ENDINGS = {
    "workflow.step.completed": "ok",
    "workflow.step.failed": "error",
    "workflow.event.received": "ok",
    "team.delegation.completed": "ok",
    "team.delegation.failed": "error",
    "team.parallel.completed": "ok",
    "team.parallel.failed": "error",
    "task.step.completed": "ok",
    "task.step.failed": "error",
}
_STEP_NAMES = {
    "workflow.step": "fevex.workflow.step",
    "workflow.event": "fevex.workflow.step",
    "team.delegation": "fevex.team.delegation",
    "team.parallel": "fevex.team.parallel",
    "task.step": "fevex.task.step",
}
# Open steps of paused runs wait here for their end; the oldest go past this many.
_MAX_OPEN_STEPS = 10_000
_MAX_OPEN_RUNS = 10_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Payloads are JSON: plain types, checked with plain isinstance (no ABCs) on this hot path.
_SCALARS = (str, bool, int, float)
# Payload keys copied to attributes, by handler: payload key -> attribute name.
_OPENING_FIELDS = {"generation": "fevex.lease.generation", "reason": "fevex.execution.reason"}
_PAUSE_FIELDS = {"reason": "fevex.pause.reason"}
_TOOL_FIELDS = {
    "tool_name": "gen_ai.tool.name",
    "tool_call_id": "gen_ai.tool.call.id",
    "step": "fevex.model.step",
    "recovered": "fevex.tool.recovered",
}
_HANDED_BACK_FIELDS = {
    "retry": "fevex.tool.handed_to_model",
    "retries_left": "fevex.tool.retries_left",
}
_STEP_START_FIELDS = {"kind": "fevex.workflow.step.kind", "agent": "gen_ai.agent.name"}
_STEP_END_FIELDS = {
    "kind": "fevex.workflow.step.kind",
    "agent": "gen_ai.agent.name",
    "child_run_id": "fevex.child_run.id",
    "event": "fevex.workflow.event",
}
_HANDOFF_FIELDS = {"from_agent": "fevex.team.from_agent", "to_agent": "fevex.team.to_agent"}
_WAIT_FIELDS = {"reason": "fevex.pause.reason", "step_id": "fevex.workflow.step.id"}
_COMPENSATION_FIELDS = {"step_id": "fevex.workflow.step.id"}
_RETRY_FIELDS = {"attempt": "fevex.tool.attempt", "code": "error.type"}


def trace_id_of(root_run_id: str) -> str:
    """The trace of a run tree: the first 16 bytes of the SHA-256 of its root run's id, as
    32 hexadecimal digits."""
    return hashlib.sha256(root_run_id.encode()).hexdigest()[:32]


def span_id_of(run_id: str, *parts: str) -> str:
    """The span of one operation of a run: an 8-byte BLAKE2b digest of the run id and what
    names the operation within the run (joined by ``\\x1f``), as 16 hexadecimal digits.
    (BLAKE2b: a fraction of the cost of OpenSSL's SHA-256 for inputs this short.)"""
    return hashlib.blake2b("\x1f".join((run_id, *parts)).encode(), digest_size=8).hexdigest()


def nanoseconds(occurred_at: str) -> int:
    """An event's ``occurred_at`` (ISO 8601 with a zone) as nanoseconds since the epoch."""
    delta = datetime.fromisoformat(occurred_at) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


class _Open:
    """A span that has started and not ended yet."""

    __slots__ = ("attributes", "events", "kind", "name", "parent_span_id", "span_id", "start_ns")

    def __init__(
        self,
        span_id: str,
        parent_span_id: str | None,
        name: str,
        kind: SpanKind,
        start_ns: int,
        attributes: dict[str, AttributeValue],
    ) -> None:
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.name = name
        self.kind = kind
        self.start_ns = start_ns
        self.attributes = attributes
        self.events: list[SpanEvent] = []


class _Execution:
    """One run executing in this process: its span, and the model steps and tool calls
    open in it."""

    __slots__ = ("costs", "input_tokens", "models", "output_tokens", "span", "tools", "trace_id")

    def __init__(self, trace_id: str, span: _Open) -> None:
        self.trace_id = trace_id
        self.span = span
        self.models: dict[Any, _Open] = {}
        self.tools: dict[Any, _Open] = {}
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.costs: list[Cost] = []


class SpanBuilder:
    """Turns committed events into finished spans (see the module's docstring)."""

    def __init__(self, content: ContentPolicy, redact: Callable[[Any], Any] | None) -> None:
        self.content = content
        self.redact = redact
        self._inputs = "input" in content.include
        self._outputs = "output" in content.include
        # Pieces of content left out because ``redact`` raised, since last taken.
        self.content_dropped = 0
        self._executions: dict[str, _Execution] = {}
        self._steps: dict[tuple[str, str], _Open] = {}
        # The second of the last time stamp read, and its nanoseconds since the epoch.
        self._second = ""
        self._second_ns = 0
        self._handlers: dict[str, Callable[[AgentRun, RunEvent, int], Span | None]] = {
            "model.started": self._model_started,
            "model.completed": self._model_completed,
            "tool.started": self._tool_started,
            "tool.completed": self._tool_ended,
            "tool.failed": self._tool_ended,
            # Not a run event: what a running call added with ToolContext.add_trace_event.
            "fevex.tool.trace_event": self._tool_trace_event,
            "workflow.waiting": self._waiting,
            "team.waiting": self._waiting,
            "team.handoff": self._handoff,
            "workflow.compensation.started": self._compensation,
            "workflow.compensation.completed": self._compensation,
            "workflow.compensation.failed": self._compensation,
        }
        for opening in _STEP_OPENINGS:
            self._handlers[opening] = self._step_started
        for ending in _STEP_ENDINGS:
            self._handlers[ending] = self._step_ended

    def add(self, run: AgentRun, event: RunEvent) -> Sequence[Span]:
        """The spans ``event`` of ``run`` finished."""
        kind = event.type
        handler = self._handlers.get(kind)
        if handler is not None:
            span = handler(run, event, self._nanoseconds(event.occurred_at))
            return () if span is None else (span,)
        if kind in _OPENINGS:
            self._open_execution(run, event, self._nanoseconds(event.occurred_at))
            return ()
        if kind in _ENDINGS:
            return self._end_execution(run, event, self._nanoseconds(event.occurred_at))
        return ()

    def _nanoseconds(self, occurred_at: str) -> int:
        """``nanoseconds``, reading the date and time of day once per second for the time
        stamps fevex writes (``2026-11-30T07:12:27.541473Z``): this runs for every event."""
        if len(occurred_at) == 27 and occurred_at[:19] == self._second:
            return self._second_ns + int(occurred_at[20:26]) * 1_000
        if occurred_at[19:20] != "." or occurred_at[26:] != "Z":
            return nanoseconds(occurred_at)
        self._second = occurred_at[:19]
        self._second_ns = nanoseconds(self._second + "Z")
        return self._second_ns + int(occurred_at[20:26]) * 1_000

    def open_spans(self, now_ns: int) -> list[Span]:
        """The spans started and not ended yet, as if they ended at ``now_ns``: what a
        live view draws while a run goes on (a paused run's open steps included)."""
        spans: list[Span] = []
        for execution in self._executions.values():
            trace_id = execution.trace_id
            for opened in (execution.span, *execution.models.values(), *execution.tools.values()):
                spans.append(_snapshot(trace_id, opened, now_ns))
        for (run_id, _), opened in self._steps.items():
            running = self._executions.get(run_id)
            trace = running.trace_id if running is not None else ""
            spans.append(_snapshot(trace, opened, now_ns))
        return spans

    # -- executions -----------------------------------------------------------------

    def _open_execution(self, run: AgentRun, event: RunEvent, now: int) -> None:
        payload = event.payload
        opening = _OPENINGS[event.type]
        first = span_id_of(run.id, "run")
        if opening == "started":
            span_id = first
            parent = None
            if run.parent_run_id is not None:
                step_id = payload.get("parent_step_id")
                parent = (
                    span_id_of(run.parent_run_id, "step", step_id)
                    if isinstance(step_id, str)
                    else span_id_of(run.parent_run_id, "run")
                )
        else:
            span_id = span_id_of(run.id, "run", event.id)
            parent = first
        attributes: dict[str, AttributeValue] = {
            "fevex.run.id": run.id,
            "fevex.run.kind": run.kind,
            "fevex.run.name": run.name,
            "fevex.root_run.id": run.root_run_id,
            "fevex.session.id": run.session_id,
            "fevex.execution.opening": opening,
        }
        if run.kind == "agent":
            attributes["gen_ai.operation.name"] = "invoke_agent"
            attributes["gen_ai.agent.name"] = run.name
            attributes["gen_ai.conversation.id"] = run.session_id
            name = f"invoke_agent {run.name}"
        else:
            name = f"{run.kind} {run.name}"
        if run.version is not None:
            attributes["fevex.run.version"] = run.version
        if run.parent_run_id is not None:
            attributes["fevex.parent_run.id"] = run.parent_run_id
        _copy_scalars(attributes, payload, _OPENING_FIELDS)
        if opening == "started":
            self._add_content(attributes, "input", "fevex.input", payload.get("input", run.input))
        executions = self._executions
        if len(executions) >= _MAX_OPEN_RUNS and run.id not in executions:
            # Executions whose end was dropped with a full queue: forget the oldest.
            del executions[next(iter(executions))]
        span = _Open(span_id, parent, name, "run", now, attributes)
        executions[run.id] = _Execution(trace_id_of(run.root_run_id), span)

    def _execution(self, run: AgentRun, now: int) -> _Execution:
        """The execution of ``run`` that this process saw open; one it did not see (its
        opening was dropped) gets a span of its own from now on."""
        execution = self._executions.get(run.id)
        if execution is None:
            span = _Open(
                span_id_of(run.id, "run", str(now)),
                span_id_of(run.id, "run"),
                f"{run.kind} {run.name}",
                "run",
                now,
                {"fevex.run.id": run.id, "fevex.run.kind": run.kind, "fevex.run.name": run.name},
            )
            execution = self._executions[run.id] = _Execution(trace_id_of(run.root_run_id), span)
        return execution

    def _end_execution(self, run: AgentRun, event: RunEvent, now: int) -> list[Span]:
        execution = self._execution(run, now)
        del self._executions[run.id]
        payload = event.payload
        ending = _ENDINGS[event.type]
        span = execution.span
        attributes = span.attributes
        attributes["fevex.execution.end"] = ending
        attributes["fevex.run.status"] = ending
        error_code: str | None = None
        if ending == "failed":
            error = payload.get("error")
            error_code = _error_code(error)
            self._add_error_message(attributes, error)
        elif ending == "cancelled":
            error_code = "RUN_TIMEOUT" if payload.get("reason") == "timeout" else "RUN_CANCELLED"
        elif ending == "paused":
            _copy_scalars(attributes, payload, _PAUSE_FIELDS)
        elif ending == "completed":
            _set_usage(attributes, "fevex.run.usage.", payload.get("usage"))
            run_cost = Cost.from_json(payload.get("cost"))
            if run_cost is not None:
                attributes["fevex.run.cost.amount"] = run_cost.amount
                attributes["fevex.run.cost.currency"] = run_cost.currency
            self._add_content(attributes, "output", "fevex.output", payload.get("output"))
        if error_code is not None:
            attributes["error.type"] = error_code
        if execution.input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = execution.input_tokens
        if execution.output_tokens is not None:
            attributes["gen_ai.usage.output_tokens"] = execution.output_tokens
        if execution.costs:
            _set_cost(attributes, total_cost(execution.costs))
        trace_id = execution.trace_id
        # What was still open ended with the execution (a failure, a cancellation).
        finished = [
            _finish(trace_id, opened, now, error_code, interrupted=True)
            for opened in (*execution.models.values(), *execution.tools.values())
        ]
        if ending != "paused":
            for key in [key for key in self._steps if key[0] == run.id]:
                opened = self._steps.pop(key)
                finished.append(_finish(trace_id, opened, now, error_code, interrupted=True))
        finished.append(_finish(trace_id, span, now, error_code))
        return finished

    # -- model steps and tool calls -------------------------------------------------

    def _model_started(self, run: AgentRun, event: RunEvent, now: int) -> None:
        execution = self._execution(run, now)
        payload = event.payload
        step = payload.get("step")
        model = payload.get("model")
        attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
        if type(step) is int:
            attributes["fevex.model.step"] = step
        if type(model) is str:
            attributes["gen_ai.request.model"] = model
            name = f"chat {model}"
            execution.span.attributes["gen_ai.request.model"] = model
        else:
            name = "chat"
        provider = payload.get("provider")
        if type(provider) is str:
            attributes["gen_ai.provider.name"] = provider
        # A completion a tool asked for is a child of that tool's span.
        asking = execution.tools.get(payload.get("tool_call_id"))
        execution.models[step] = _Open(
            span_id_of(run.id, "model", str(step)),
            execution.span.span_id if asking is None else asking.span_id,
            name,
            "model",
            now,
            attributes,
        )

    def _model_completed(self, run: AgentRun, event: RunEvent, now: int) -> Span | None:
        execution = self._execution(run, now)
        payload = event.payload
        opened = execution.models.pop(payload.get("step"), None)
        if opened is None:
            return None
        attributes = opened.attributes
        usage = payload.get("usage")
        if type(usage) is dict:
            tokens = usage.get("input_tokens")
            if type(tokens) is int:
                attributes["gen_ai.usage.input_tokens"] = tokens
                execution.input_tokens = (execution.input_tokens or 0) + tokens
            tokens = usage.get("output_tokens")
            if type(tokens) is int:
                attributes["gen_ai.usage.output_tokens"] = tokens
                execution.output_tokens = (execution.output_tokens or 0) + tokens
        calls = payload.get("tool_calls")
        if type(calls) is list:
            attributes["fevex.model.tool_calls"] = len(calls)
        if self._outputs:
            if calls:
                self._add_content(attributes, "output", "fevex.tool_calls", calls)
            self._add_content(attributes, "output", "fevex.output", payload.get("output"))
        priced = payload.get("cost")
        if priced is not None:
            cost = Cost.from_json(priced)
            if cost is not None:
                execution.costs.append(cost)
                _set_cost(attributes, cost)
        return _finish(execution.trace_id, opened, now, None)

    def _tool_started(self, run: AgentRun, event: RunEvent, now: int) -> None:
        execution = self._execution(run, now)
        payload = event.payload
        execution.tools[payload.get("tool_call_id")] = self._tool_span(run, execution, payload, now)

    def _tool_span(
        self, run: AgentRun, execution: _Execution, payload: Mapping[str, Any], now: int
    ) -> _Open:
        tool_name = payload.get("tool_name")
        attributes: dict[str, AttributeValue] = {"gen_ai.operation.name": "execute_tool"}
        _copy_scalars(attributes, payload, _TOOL_FIELDS)
        if self._inputs and "input" in payload:
            self._add_content(attributes, "input", "fevex.input", payload["input"])
        return _Open(
            span_id_of(run.id, "tool", str(payload.get("tool_call_id"))),
            execution.span.span_id,
            f"execute_tool {tool_name}" if isinstance(tool_name, str) else "execute_tool",
            "tool",
            now,
            attributes,
        )

    def _tool_ended(self, run: AgentRun, event: RunEvent, now: int) -> Span:
        execution = self._execution(run, now)
        payload = event.payload
        opened = execution.tools.pop(payload.get("tool_call_id"), None)
        if opened is None:
            # Ended without starting: an approval the reviewer rejected.
            opened = self._tool_span(run, execution, payload, now)
        attributes = opened.attributes
        retries = payload.get("retries")
        if retries:
            for retry in retries:
                if isinstance(retry, dict):
                    opened.events.append(_retry_event(retry, now))
        error_code: str | None = None
        if event.type == "tool.failed":
            error = payload.get("error")
            error_code = _error_code(error)
            attributes["error.type"] = error_code
            self._add_error_message(attributes, error)
            _copy_scalars(attributes, payload, _HANDED_BACK_FIELDS)
        elif self._outputs:
            self._add_content(attributes, "output", "fevex.output", payload.get("output"))
        return _finish(execution.trace_id, opened, now, error_code)

    def _tool_trace_event(self, run: AgentRun, event: RunEvent, now: int) -> None:
        """A running call's trace event goes on its span (on the execution's when this
        process did not see the call start)."""
        execution = self._execution(run, now)
        payload = event.payload
        opened = execution.tools.get(payload.get("tool_call_id")) or execution.span
        attributes: dict[str, AttributeValue] = {}
        given = payload.get("attributes")
        if isinstance(given, dict):
            _copy_scalars(attributes, given, {key: key for key in given})
        opened.events.append(SpanEvent(str(payload.get("name")), now, attributes))

    # -- workflow steps and team delegations ----------------------------------------

    def _step(self, run: AgentRun, step_id: str, kind: SpanKind, family: str, now: int) -> _Open:
        execution = self._execution(run, now)
        attributes: dict[str, AttributeValue] = {"fevex.workflow.step.id": step_id}
        return _Open(
            span_id_of(run.id, "step", step_id),
            execution.span.span_id,
            f"{_STEP_NAMES[family]} {step_id}",
            kind,
            now,
            attributes,
        )

    def _step_started(self, run: AgentRun, event: RunEvent, now: int) -> None:
        payload = event.payload
        step_id = payload.get("step_id")
        if not isinstance(step_id, str):
            return
        family = event.type.rpartition(".")[0]
        key = (run.id, step_id)
        opened = self._steps.pop(key, None)
        if opened is None:
            opened = self._step(run, step_id, _STEP_OPENINGS[event.type], family, now)
        else:
            opened.start_ns = now  # opened by its handoff, just before
        _copy_scalars(opened.attributes, payload, _STEP_START_FIELDS)
        if family == "team.parallel":
            opened.attributes["fevex.workflow.step.kind"] = "parallel"
        elif family == "team.delegation":
            opened.attributes["fevex.workflow.step.kind"] = "agent"
        self._keep_step(key, opened)

    def _keep_step(self, key: tuple[str, str], opened: _Open) -> None:
        steps = self._steps
        if len(steps) >= _MAX_OPEN_STEPS:
            del steps[next(iter(steps))]
        steps[key] = opened

    def _step_ended(self, run: AgentRun, event: RunEvent, now: int) -> Span | None:
        payload = event.payload
        step_id = payload.get("step_id")
        if not isinstance(step_id, str):
            return None
        execution = self._execution(run, now)
        opened = self._steps.pop((run.id, step_id), None)
        if opened is None:
            family = event.type.rpartition(".")[0]
            kind: SpanKind = "team_delegation" if family == "team.delegation" else "workflow_step"
            opened = self._step(run, step_id, kind, family, execution.span.start_ns)
            opened.attributes["fevex.workflow.step.continued"] = True
        attributes = opened.attributes
        _copy_scalars(attributes, payload, _STEP_END_FIELDS)
        error_code: str | None = None
        if _STEP_ENDINGS[event.type] == "error":
            error = payload.get("error")
            error_code = _error_code(error)
            attributes["error.type"] = error_code
            self._add_error_message(attributes, error)
        elif "output" in payload:
            self._add_content(attributes, "output", "fevex.output", payload["output"])
        return _finish(execution.trace_id, opened, now, error_code)

    def _handoff(self, run: AgentRun, event: RunEvent, now: int) -> None:
        payload = event.payload
        step_id = payload.get("step_id")
        if not isinstance(step_id, str):
            return
        key = (run.id, step_id)
        opened = self._steps.get(key) or self._step(
            run, step_id, "team_delegation", "team.delegation", now
        )
        attributes: dict[str, AttributeValue] = {}
        _copy_scalars(attributes, payload, _HANDOFF_FIELDS)
        opened.events.append(SpanEvent("fevex.team.handoff", now, attributes))
        self._keep_step(key, opened)

    def _waiting(self, run: AgentRun, event: RunEvent, now: int) -> None:
        attributes: dict[str, AttributeValue] = {}
        _copy_scalars(attributes, event.payload, _WAIT_FIELDS)
        self._execution(run, now).span.events.append(
            SpanEvent("fevex.workflow.waiting", now, attributes)
        )

    def _compensation(self, run: AgentRun, event: RunEvent, now: int) -> None:
        attributes: dict[str, AttributeValue] = {}
        _copy_scalars(attributes, event.payload, _COMPENSATION_FIELDS)
        error_code = event.payload.get("error")
        if error_code is not None:
            attributes["error.type"] = _error_code(error_code)
        self._execution(run, now).span.events.append(
            SpanEvent(f"fevex.{event.type}", now, attributes)
        )

    # -- content --------------------------------------------------------------------

    def _add_content(
        self, attributes: dict[str, AttributeValue], kind: ContentKind, key: str, value: Any
    ) -> None:
        """Set ``key`` to ``value``, redacted, as JSON text, when the policy includes
        ``kind``; nothing when the application's ``redact`` raises."""
        policy = self.content
        if kind not in policy.include or value is None:
            return
        try:
            redacted = redact_sensitive_keys(value, policy)
            if self.redact is not None:
                redacted = self.redact(redacted)
            text = (
                redacted
                if isinstance(redacted, str)
                else json.dumps(redacted, ensure_ascii=False, default=str)
            )
        except Exception:
            # Fail closed: content the application could not redact is not exported.
            self.content_dropped += 1
            return
        if len(text) > policy.max_length:
            text = text[: policy.max_length - 12] + "…[truncated]"
        attributes[key] = text

    def _add_error_message(self, attributes: dict[str, AttributeValue], error: Any) -> None:
        if isinstance(error, dict):
            message = error.get("message")
            if isinstance(message, str):
                self._add_content(attributes, "error_message", "fevex.error.message", message)


def _finish(
    trace_id: str, opened: _Open, end_ns: int, error_code: str | None, *, interrupted: bool = False
) -> Span:
    if interrupted:
        opened.attributes["fevex.interrupted"] = True
    return Span(
        trace_id,
        opened.span_id,
        opened.parent_span_id,
        opened.name,
        opened.kind,
        opened.start_ns,
        max(end_ns, opened.start_ns),
        "ok" if error_code is None else "error",
        error_code,
        opened.attributes,
        tuple(opened.events),
    )


def _snapshot(trace_id: str, opened: _Open, now_ns: int) -> Span:
    return Span(
        trace_id,
        opened.span_id,
        opened.parent_span_id,
        opened.name,
        opened.kind,
        opened.start_ns,
        max(now_ns, opened.start_ns),
        attributes=dict(opened.attributes),
        events=tuple(opened.events),
    )


def _copy_scalars(
    attributes: dict[str, AttributeValue],
    payload: Mapping[str, Any],
    names: Mapping[str, str],
) -> None:
    """Copy the payload's scalar values under ``names``' keys to their attribute names."""
    for key, attribute in names.items():
        value = payload.get(key)
        if isinstance(value, _SCALARS):
            attributes[attribute] = value


def _error_code(error: Any) -> str:
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and code else "UNEXPECTED_ERROR"


def _set_usage(attributes: dict[str, AttributeValue], prefix: str, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    for name in ("input_tokens", "output_tokens"):
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            attributes[prefix + name] = value


def _set_cost(attributes: dict[str, AttributeValue], cost: Cost | None) -> None:
    if cost is not None:
        attributes["fevex.cost.amount"] = cost.amount
        attributes["fevex.cost.currency"] = cost.currency


def _retry_event(retry: Mapping[str, Any], now: int) -> SpanEvent:
    at = retry.get("at")
    try:
        time_ns = nanoseconds(at) if isinstance(at, str) else now
    except ValueError:
        time_ns = now
    attributes: dict[str, AttributeValue] = {}
    _copy_scalars(attributes, retry, _RETRY_FIELDS)
    return SpanEvent("fevex.tool.retry", time_ns, attributes)
