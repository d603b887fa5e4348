"""The agent loop, the step driver of agent runs: model step, the requested tool calls one
after the other, next model step, until an answer.

It starts from a :class:`RunState` (new, resumed or recovered alike), and each step
commits its events together with the checkpoint that lets another process continue after
it. Leases, cancellation, the deadline and the final commits belong to the
:class:`~fevex._internal.engine.execution.Execution` that drives it. When its steps stop
here (an end or a pause), the providers of the connections it used are told
(:meth:`ConnectionResolver.release`), so that none keeps a session for the run.

A failed tool call either fails the run or, when the tool opted in (or raised
``ToolRetry``) and the run has retries left (``Limits.max_tool_retries``), goes back to the
model as an error result: the call is journalled ``failed`` with ``retry: true``, so it is
never run again, and the retries a run used are counted from its journal. Logs go to the
``fevex`` logger with the run id in ``extra`` and never hold inputs, outputs or text.

A tool may ask an app model for a completion (``ToolContext.complete``): a model step of
the run inside the call, with events of its own (see ``tool_completions.py``).

``model.started`` names the model (and its provider, when the agent's model reference
says it); with the app's ``calculate_cost``, ``model.completed`` carries the step's cost
and ``run.completed`` the run's total, kept in the checkpoint across resumes. A price
function that raises or returns something else than a ``Cost`` leaves the step unpriced
(logged at WARNING); it never changes the run.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from fevex._ground.clock import new_id
from fevex._internal.agents.model_cost import (
    add_cost,
    check_token_budgets,
    price,
    remaining_output_tokens,
)
from fevex._internal.agents.model_turns import assistant_parts, model_error, model_identity
from fevex._internal.agents.run_state import PendingCalls, RunState, tool_step_id
from fevex._internal.agents.tool_completions import ToolCompletions
from fevex._internal.composition.connections import ConnectionResolver
from fevex._internal.composition.registry import PreparedAgent, PreparedTool
from fevex._internal.composition.tool_runner import (
    CredentialResolver,
    ToolCallRun,
    ToolExceptionHook,
    summarize,
)
from fevex._internal.engine.deadline import DeadlineReached
from fevex._internal.engine.execution import Execution
from fevex.errors import FevexError, FevexRunError
from fevex.events import RunEvent
from fevex.events.cost import CostCalculator
from fevex.messages import Message, ToolResultPart
from fevex.models import ModelInput, ModelResult, ModelStreamReader, ToolCall, ToolSpec, Usage
from fevex.policies.policy import Policy
from fevex.schemas.schema import ensure_json

# Debug lines are built only when asked for: they sit on every model step and tool call.
logger = logging.getLogger("fevex")

# While the sink batches (nobody streams the run), a step's deltas after its first
# SEPARATE_DELTAS are joined into events of about JOINED_DELTA_CHARS characters: the
# committed text is the same, and a model streaming a long answer a character at a time
# costs a run a few events more, not one event object (and row) per character.
SEPARATE_DELTAS = 1000
JOINED_DELTA_CHARS = 65536


def _fail(code: str, message: str, **details: Any) -> FevexRunError:
    return FevexRunError(code, message, details=details)


class AgentLoop:
    """The steps of one agent run in this process."""

    execution: Execution

    def __init__(
        self,
        agent: PreparedAgent,
        prefix: list[Message],
        state: RunState,
        *,
        policies: tuple[Policy, ...] = (),
        credentials: CredentialResolver = None,
        connections: ConnectionResolver | None = None,
        calculate_cost: CostCalculator | None = None,
        on_tool_exception: ToolExceptionHook | None = None,
        models: Mapping[str, Any] | None = None,
    ) -> None:
        self.agent = agent
        self.prefix = prefix
        self.state = state
        self.policies = policies
        self.credentials = credentials
        self.connections = connections
        self.tools = agent.tools
        self.limits = agent.definition.limits.narrowed(state.limits)
        self.calculate_cost = calculate_cost
        self.on_tool_exception = on_tool_exception
        self.model_name, self.provider = model_identity(agent)
        self._provider_state: Any = None
        self.knowledge_messages: list[Message] = []
        self.completions = ToolCompletions(self, models or {})

    @property
    def usage(self) -> Usage:
        return self.state.usage

    def checkpoint(self) -> dict[str, Any]:
        return self.state.checkpoint()

    async def steps(self, execution: Execution) -> AsyncGenerator[RunEvent, None]:
        self.execution = execution
        try:
            local_specs, output_schema = self.agent.model_boundary()
            tool_specs = await self._with_connection_tools(local_specs)
            if self.agent.knowledge is not None:
                # Imported here: an app without knowledge never loads it (app_knowledge.py).
                from fevex._internal.agents.knowledge_context import start_knowledge

                self.knowledge_messages, bound, loaded = await start_knowledge(
                    self.agent.knowledge, self.state, execution
                )
                self.tools = {**self.tools, **bound}
                if loaded is not None:
                    yield loaded
            provider_state: Any = None
            while True:
                if self.state.pending is None:
                    if self._connection_tools_changed():
                        tool_specs = await self._with_connection_tools(local_specs)
                    # try/finally rather than aclosing, here and below: this runs per step, and
                    # aclosing's own context manager costs a third of relaying a step's events.
                    step_events = self._model_step(tool_specs, output_schema, provider_state)
                    try:
                        async for event in step_events:
                            yield event
                    finally:
                        await step_events.aclose()
                    if execution.finished:
                        return
                    provider_state = self._provider_state
                call_events = self._tool_calls()
                try:
                    async for event in call_events:
                        yield event
                finally:
                    await call_events.aclose()
                if execution.pause is not None:
                    return
        finally:
            # A call stopped by a cancellation or the deadline: its model steps, committed
            # already, reach no consumer, so observers are shown them here.
            for event in self.completions.drain():
                execution.sink.delivered(event)
            if self.agent.connection_tools and self.connections is not None:
                # Paused or ended here: a provider lets go of the run's sessions.
                run_id = execution.sink.run.id
                await self.connections.release(self.agent.connection_tools, run_id)

    async def _with_connection_tools(self, local: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        """``local`` and the agent's connection tools, discovered for the run (again, when a
        provider said they changed)."""
        if not self.agent.connection_tools or self.connections is None:
            return local
        run = self.execution.sink.run
        remote = await self.execution.guard(
            self.connections.resolve(
                self.agent.connection_tools,
                run_id=run.id,
                session_id=run.session_id,
                agent_name=run.agent_name,
                credentials=self.credentials,
            )
        )
        self.tools = {**self.tools, **remote}
        return (*local, *(tool.spec() for tool in remote.values()))

    def _connection_tools_changed(self) -> bool:
        connections = self.connections
        return (
            bool(self.agent.connection_tools)
            and connections is not None
            and (connections.changed(self.agent.connection_tools, self.execution.sink.run.id))
        )

    # -- model step -----------------------------------------------------------------

    async def _model_step(
        self, tool_specs: Any, output_schema: dict[str, Any] | None, provider_state: Any
    ) -> AsyncGenerator[RunEvent, None]:
        state = self.state
        sink = self.execution.sink
        limits = self.limits
        if limits.max_steps is not None and state.step >= limits.max_steps:
            raise _fail(
                "MAX_STEPS_EXCEEDED",
                f"The run needed more than {limits.max_steps} model steps.",
                limit=limits.max_steps,
            )
        step = state.step + 1
        run_id = sink.run.id
        if logger.isEnabledFor(logging.DEBUG):
            extra = {"run_id": run_id, "step": step}
            logger.debug("Run %s: model step %d started", run_id, step, extra=extra)
        started = {"step": step, "model": self.model_name}
        if self.provider is not None:
            started["provider"] = self.provider
        yield await sink.emit("model.started", started)
        model_input = ModelInput(
            (*self.prefix, *self.knowledge_messages, *state.transcript),
            tool_specs,
            output_schema,
            remaining_output_tokens(self.limits, self.state),
            self.agent.definition.model_options,
            provider_state,
        )
        reader = ModelStreamReader()
        # The run tree's gate, while a group of child runs holds one: a slot around the call.
        gate = self.execution.model_calls
        if gate is not None:
            await self.execution.guard(gate.acquire(run_id))
        stream = self._stream_model(model_input, step, reader)
        try:
            async for event in stream:
                yield event
        finally:
            try:
                await stream.aclose()
            finally:
                if gate is not None:
                    gate.release()
        result = reader.finish()
        self._check_call_ids(result.tool_calls)
        state.step = step
        state.usage = state.usage + result.usage
        self._provider_state = result.provider_state
        if logger.isEnabledFor(logging.DEBUG):
            calls = len(result.tool_calls)
            extra = {"run_id": run_id, "step": step, "tool_calls": calls}
            message = "Run %s: model step %d completed with %d tool calls"
            logger.debug(message, run_id, step, calls, extra=extra)
        completed_payload = self._completed_payload(step, result)
        if not result.tool_calls:
            yield await sink.emit("model.completed", completed_payload, usage=state.usage.to_json())
            output, output_json = self._answer(result, reader.text)
            yield await self.execution.complete(
                output,
                output_json,
                state.usage.to_json(),
                tuple(state.transcript_json),
                cost=state.cost,
            )
            return
        state.add(Message("assistant", assistant_parts(result, reader.text)))
        state.pending = PendingCalls(step, list(result.tool_calls))
        yield await sink.emit(
            "model.completed",
            completed_payload,
            usage=state.usage.to_json(),
            checkpoint=state.checkpoint,
        )
        check_token_budgets(self.limits, self.state, result.usage)

    def _completed_payload(self, step: int, result: ModelResult) -> dict[str, Any]:
        """The ``model.completed`` event of ``step``; with the app's ``calculate_cost``,
        the step's cost, which is added to the run's total here."""
        state = self.state
        completed_payload = {
            "step": step,
            "output": result.output,
            "tool_calls": [
                {"id": c.id, "name": c.name, "input": c.input} for c in result.tool_calls
            ],
            "usage": result.usage.to_json(),
            "total_usage": state.usage.to_json(),
        }
        if result.stop_reason is not None:
            completed_payload["stop_reason"] = result.stop_reason
        if result.reasoning:
            # The message layer keeps the step's thinking part, as the transcript does.
            completed_payload["reasoning"] = result.reasoning
        if self.calculate_cost is not None:
            run_id = self.execution.sink.run.id
            cost = price(self.calculate_cost, result.usage, self.model_name, run_id)
            if cost is not None:
                completed_payload["cost"] = cost.to_json()
                add_cost(state, cost, run_id)
        return completed_payload

    def _answer(self, result: ModelResult, text: str) -> tuple[Any, Any]:
        """The run's output and its JSON form, from a step that called no tool; the answer
        joins the conversation. Token budgets are checked first: an answer over budget
        fails the run."""
        check_token_budgets(self.limits, self.state, result.usage)
        output, output_json, kept = self._final_output(result, text)
        self.state.add(Message("assistant", assistant_parts(result, kept)))
        return output, output_json

    async def _stream_model(
        self, model_input: ModelInput, step: int, reader: ModelStreamReader
    ) -> AsyncGenerator[RunEvent, None]:
        try:
            iterator = self.agent.model.stream(model_input).__aiter__()
        except FevexError:
            raise
        except Exception as error:
            raise model_error(error) from error
        sink = self.execution.sink
        separate = 0
        kind_delta = "model.output.delta"
        held = io.StringIO()
        held_chars = 0
        try:
            while True:
                try:
                    event = await self.execution.guard(iterator.__anext__())
                except StopAsyncIteration:
                    break
                except (FevexError, asyncio.CancelledError, DeadlineReached):
                    raise
                except Exception as error:
                    raise model_error(error) from error
                recorded = reader.accept(event)
                if recorded is None:
                    continue
                kind, payload = recorded
                if kind != "model.output.delta":
                    if held_chars:  # what was held comes first: events keep the stream's order
                        yield await sink.emit(kind_delta, {"step": step, "delta": held.getvalue()})
                        held = io.StringIO()
                        held_chars = 0
                    yield await sink.emit(kind, {"step": step, **payload})
                    continue
                delta = payload["delta"]
                if separate < SEPARATE_DELTAS or not sink.batching:
                    separate += 1
                    yield await sink.emit(kind, {"step": step, "delta": delta})
                    continue
                held.write(delta)
                held_chars += len(delta)
                if held_chars >= JOINED_DELTA_CHARS:
                    joined = {"step": step, "delta": held.getvalue()}
                    held = io.StringIO()
                    held_chars = 0
                    yield await sink.emit(kind, joined)
            if held_chars:
                rest = {"step": step, "delta": held.getvalue()}
                yield await sink.emit(kind_delta, rest)
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    def _final_output(self, result: ModelResult, text: str) -> tuple[Any, Any, str]:
        """The validated value, its JSON form and the text the conversation keeps."""
        schema = self.agent.output_schema
        if schema is None:
            if result.output is not None and not isinstance(result.output, str):
                raise _fail(
                    "OUTPUT_INVALID",
                    f"Agent {self.agent.definition.name} has no output schema, so its output "
                    "must be text.",
                )
            return text, text, text
        try:
            raw = json.loads(text) if isinstance(result.output, str) else result.output
            value = schema.validate(raw)
            output_json = schema.to_json(value)
            # Decoded JSON can hold what its text did not (an escaped NUL).
            ensure_json(output_json)
            return value, output_json, text
        except Exception as error:
            raise FevexRunError(
                "OUTPUT_INVALID",
                f"The output of agent {self.agent.definition.name} is invalid: {summarize(error)}",
                category="validation",
            ) from None

    # -- tool calls -----------------------------------------------------------------

    async def _tool_calls(self) -> AsyncGenerator[RunEvent, None]:
        state = self.state
        pending = state.pending
        assert pending is not None
        sink = self.execution.sink
        while (call := pending.next_call) is not None:
            tool = self.tools.get(call.name)
            base = {"step": pending.step, "tool_call_id": call.id, "tool_name": call.name}
            if not pending.is_admitted(call.id):
                tool = self._admit_tool_call(call)
                pending.admit(call.id)
            assert tool is not None
            runner = self._runner(tool, call)
            step_id = tool_step_id(call.id)
            recovered = self._recovered(call, tool, step_id)
            if not recovered and tool.definition.approval == "required":
                decision = pending.decisions.get(call.id)
                # A reviewer is asked only about input the tool would accept: invalid input
                # is refused below, by the call itself, as for any tool.
                if decision is None and runner.input_is_valid():
                    await runner.check_policies("approval")
                    async with aclosing(self._pause_for_approval(call, tool)) as paused:
                        async for event in paused:
                            yield event
                    return
                if decision is not None and decision["decision"] == "reject":
                    rejection = self._reject(call, decision.get("reason"))
                    yield await sink.emit(
                        "tool.failed",
                        {**base, "error": rejection, "actor": decision.get("actor")},
                        durable=True,
                        checkpoint=state.checkpoint,
                    )
                    continue
            state.journal.started(step_id, "tool", call.input)
            pending.approval = None
            # Durable before the effect starts: recovery must know the call may be in flight.
            yield await sink.emit(
                "tool.started",
                {**base, "input": call.input, "recovered": recovered},
                durable=True,
                checkpoint=state.checkpoint,
            )
            where = {"run_id": runner.run_id, "step": pending.step, **base}
            _log_call("started", runner, call, where)
            reports = runner.reporting(sink, base)
            try:
                async for event in reports.relay():
                    yield event
                output = reports.output
            except FevexError as error:
                for event in self.completions.drain():  # the call's own model steps
                    yield event
                retried = self._hand_back(error, runner, step_id, base, where)
                if retried is None:
                    yield await sink.emit(
                        "tool.failed", {**base, "error": error.to_json(), **_retries(runner)}
                    )
                    raise
                yield await sink.emit(
                    "tool.failed", retried, durable=True, checkpoint=state.checkpoint
                )
                continue
            for event in self.completions.drain():
                yield event
            _log_call("completed", runner, call, where)
            pending.add_result(ToolResultPart(call.id, call.name, output, content=runner.content))
            state.journal.completed(step_id, output)
            # Durable as soon as the effect ended: a crash now must not make it look in flight.
            yield await sink.emit(
                "tool.completed",
                {**base, "output": output, **runner.media_summary(), **_retries(runner)},
                durable=True,
                checkpoint=state.checkpoint,
            )
        state.add(Message("tool", tuple(pending.results)))
        state.pending = None

    def _recovered(self, call: ToolCall, tool: PreparedTool, step_id: str) -> bool:
        """Whether an earlier process started ``call`` and stopped before its end (the
        journal says ``started``); a tool that is not idempotent is then never run again."""
        journalled = self.state.journal.lookup(step_id, "tool", call.input)
        recovered = journalled is not None and journalled.status == "started"
        if recovered and tool.definition.idempotency != "keyed":
            raise FevexRunError(
                "TOOL_EFFECT_UNCERTAIN",
                f"The run stopped while tool {call.name} (call {call.id}) was running, and "
                "the tool is not idempotent, so fevex will not repeat it. Check the effect "
                "and start a new run.",
                category="tool",
                details={"tool_name": call.name, "tool_call_id": call.id},
            )
        return recovered

    def _reject(self, call: ToolCall, reason: Any) -> dict[str, Any]:
        """The error result a reviewer's rejection of ``call`` hands the model (``reason``
        is the decision's); the call never runs."""
        pending = self.state.pending
        assert pending is not None
        rejection = {
            "code": "TOOL_REJECTED",
            "message": f"A reviewer rejected this call of {call.name}"
            + (f": {reason}" if isinstance(reason, str) and reason else "."),
        }
        pending.add_result(ToolResultPart(call.id, call.name, rejection, True))
        pending.approval = None
        return rejection

    def _hand_back(
        self,
        error: FevexError,
        runner: ToolCallRun,
        step_id: str,
        base: dict[str, Any],
        where: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Journal the failed call; the ``tool.failed`` payload of a failure that goes back
        to the model as an error result, or ``None`` when it fails the run."""
        state = self.state
        pending = state.pending
        assert pending is not None
        call = runner.call
        message = runner.retry_message(error)
        retries_left = self._retries_left(error) if message is not None else 0
        if message is None or retries_left == 0:
            state.journal.failed(step_id, error.to_json())
            return None
        left = None if retries_left is None else retries_left - 1
        result = {"code": error.code, "message": message}
        pending.add_result(ToolResultPart(call.id, call.name, result, True))
        # Failed, not started: recovery must never run this call again.
        state.journal.failed(step_id, {**error.to_json(), "retry": True})
        logger.warning(
            "Run %s: tool %s failed with %s; the error goes back to the model "
            "(%s tool retries left)",
            runner.run_id,
            call.name,
            error.code,
            "unlimited" if left is None else left,
            extra={**where, "code": error.code, "retries_left": left},
        )
        return {**base, "error": result, "retry": True, "retries_left": left, **_retries(runner)}

    def _retries_left(self, error: FevexError) -> int | None:
        """Retries the run has left before this one (``None``: unlimited); with none left,
        ``error`` says so, keeping its code."""
        limit = self.limits.max_tool_retries
        if limit is None:
            return None
        used = sum(
            1
            for entry in self.state.journal.entries.values()
            if entry.status == "failed" and (entry.error or {}).get("retry") is True
        )
        left = max(limit - used, 0)
        if left == 0:
            error.message = (
                f"{error.message} (not handed back to the model: the run has used its "
                f"{limit} tool retries, Limits.max_tool_retries)"
            )
            error.args = (error.message,)
            error.details["max_tool_retries"] = limit
        return left

    def _runner(self, tool: PreparedTool, call: ToolCall) -> ToolCallRun:
        run = self.execution.sink.run
        return ToolCallRun(
            tool,
            call,
            run_id=run.id,
            session_id=run.session_id,
            agent_name=run.agent_name,
            policies=self.policies,
            credentials=self.credentials,
            cancellation=self.execution.cancellation,
            guard=self.execution.guard,
            on_tool_exception=self.on_tool_exception,
            ask_input=self.execution.ask_input,
            complete=self.completions.complete,
        )

    async def _pause_for_approval(
        self, call: ToolCall, tool: PreparedTool
    ) -> AsyncGenerator[RunEvent, None]:
        pending = self.state.pending
        assert pending is not None
        approval = {
            "id": new_id("apr"),
            "tool_name": call.name,
            "tool_call_id": call.id,
            "input": call.input,
            "risk": tool.definition.risk,
        }
        pending.approval = approval
        yield await self.execution.suspend(
            {"reason": "approval", "approvals": [approval]}, self.state.checkpoint
        )

    def _check_call_ids(self, calls: Sequence[ToolCall]) -> None:
        """Each call id names one effect (and its idempotency key), in the step and in the
        run: a reused id fails the run before anything of the step is committed."""
        state = self.state
        for call in calls:
            if call.id in state.seen_call_ids:
                raise _fail(
                    "DUPLICATE_TOOL_CALL_ID",
                    f"The model reused tool call id {call.id!r}; no tool of this step ran.",
                    tool_call_id=call.id,
                )
            state.see_call_id(call.id)

    def _admit_tool_call(self, call: ToolCall) -> PreparedTool:
        state = self.state
        state.tool_calls += 1
        limit = self.limits.max_tool_calls
        if limit is not None and state.tool_calls > limit:
            raise _fail(
                "MAX_TOOL_CALLS_EXCEEDED",
                f"The run asked for more than {limit} tool calls.",
                limit=limit,
            )
        tool = self.tools.get(call.name)
        if tool is None:
            raise _fail(
                "TOOL_NOT_AVAILABLE",
                f"The model asked for tool {call.name!r}, which agent "
                f"{self.agent.definition.name} does not have.",
                tool_name=call.name,
            )
        return tool


def _log_call(what: str, runner: ToolCallRun, call: ToolCall, where: dict[str, Any]) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        message = f"Run %s: tool %s {what} (call %s)"
        logger.debug(message, runner.run_id, call.name, call.id, extra=where)


def _retries(runner: ToolCallRun) -> dict[str, Any]:
    """The attempts of a tool call that failed and were tried again, for its event."""
    return {"retries": list(runner.retries)} if runner.retries else {}
