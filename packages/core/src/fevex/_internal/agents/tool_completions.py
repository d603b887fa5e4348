"""The completions the tools of one agent run ask of the app's models
(:meth:`fevex.ToolContext.complete`): each is a model step of the run, inside a tool call.

A completion is checked as the loop checks its own model steps: the app's policies first
(stage ``"completion"``), then ``Limits.max_steps`` (it takes the run's next step number),
the output token budget (whose remainder caps it) and a slot of the run tree's model-call
gate when a group of child runs holds one. Its usage and cost join the run's and are
checked against the token budgets afterwards. Its ``model.started`` and ``model.completed``
events carry the ``tool_call_id`` of the call that asked, and no deltas: they are held
here while the call runs and the loop yields them before the call's own ``tool.completed``
or ``tool.failed``, so a stream carries every event in sequence order.

An error raised once the request was accepted (a policy's denial, a limit, the model's
failure) *halts* the call: it fails with that error even if the tool catches it, and any
later completion of the call raises it again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol

from fevex._internal.agents.model_cost import (
    add_cost,
    check_token_budgets,
    price,
    remaining_output_tokens,
)
from fevex._internal.agents.run_state import RunState
from fevex._internal.composition.registry import DEFAULT_MODEL_KEY, PreparedAgent
from fevex._internal.composition.tool_runner import ToolCallRun
from fevex._internal.engine.deadline import DeadlineReached
from fevex._internal.engine.execution import Execution
from fevex.agents import Limits
from fevex.errors import FevexError, FevexRunError
from fevex.events import RunEvent
from fevex.events.cost import CostCalculator
from fevex.messages import Message
from fevex.models import ModelInput, ModelResult, ModelStreamReader
from fevex.policies.policy import Policy, enforce_policies
from fevex.tools.completion import Completion, CompletionRequest

__all__ = ["CompletingRun", "ToolCompletions"]


class CompletingRun(Protocol):
    """What a completion takes from the agent run whose tool asks (the agent loop)."""

    agent: PreparedAgent
    state: RunState
    limits: Limits
    execution: Execution
    policies: tuple[Policy, ...]
    calculate_cost: CostCalculator | None


class ToolCompletions:
    """The completions of one agent run's tool calls, in this process."""

    def __init__(self, loop: CompletingRun, models: Mapping[str, Any]) -> None:
        self.loop = loop
        self.models = models
        # Emitted during the call in flight; the loop yields them once it ends.
        self.events: list[RunEvent] = []

    def drain(self) -> list[RunEvent]:
        """The events emitted since the last drain, in order."""
        events, self.events = self.events, []
        return events

    async def complete(
        self, runner: ToolCallRun, request: CompletionRequest, attempt: int
    ) -> Completion:
        """One completion for attempt ``attempt`` of the call ``runner`` runs (see the
        module's description)."""
        if runner.halted is not None:
            raise runner.halted
        key, gateway = self._model(request.model, runner)
        try:
            return await self._complete(runner, request, key, gateway, attempt)
        except FevexError as error:
            if runner.halted is None:
                runner.halted = error
            raise

    def _model(self, name: str | None, runner: ToolCallRun) -> tuple[str, Any]:
        agent = self.loop.agent
        own = agent.definition.model or DEFAULT_MODEL_KEY
        key = own if name is None else name
        gateway = agent.model if key == own else self.models.get(key)
        if gateway is None:
            raise FevexRunError(
                "MISSING_MODEL",
                f"Tool {runner.tool.definition.name} asked model {key!r} for a completion, "
                "which is not in the app's models.",
                category="configuration",
                details={"model": key},
            )
        return key, gateway

    async def _complete(
        self, runner: ToolCallRun, request: CompletionRequest, key: str, gateway: Any, attempt: int
    ) -> Completion:
        loop = self.loop
        state, limits, execution = loop.state, loop.limits, loop.execution
        sink = execution.sink
        if loop.policies:
            asked = runner.policy_request("completion", attempt)
            asked = dataclasses.replace(asked, input=request.to_json(), model=key)
            await enforce_policies(loop.policies, asked)
        if limits.max_steps is not None and state.step >= limits.max_steps:
            raise FevexRunError(
                "MAX_STEPS_EXCEEDED",
                f"The run needed more than {limits.max_steps} model steps.",
                details={"limit": limits.max_steps},
            )
        remaining = remaining_output_tokens(limits, state)
        wanted = request.max_output_tokens
        cap = (
            wanted if remaining is None else remaining if wanted is None else min(wanted, remaining)
        )
        # Taken before anything is awaited: completions asked at once get steps of their own.
        state.step += 1
        step = state.step
        model_name = _model_name(gateway, key)
        where = {"tool_call_id": runner.call.id, "tool_name": runner.tool.definition.name}
        started = {"step": step, "model": model_name, **where}
        self.events.append(await sink.emit("model.started", started))
        system = () if request.system is None else (Message.system(request.system),)
        model_input = ModelInput((*system, *request.messages), (), None, cap, request.options, None)
        gate = execution.model_calls
        if gate is not None:
            await execution.guard(gate.acquire(sink.run.id))
        try:
            result, text = await self._stream(gateway, model_input)
        finally:
            if gate is not None:
                gate.release()
        state.usage = state.usage + result.usage
        completed: dict[str, Any] = {
            "step": step,
            **where,
            "output": text,
            "tool_calls": [],
            "usage": result.usage.to_json(),
            "total_usage": state.usage.to_json(),
        }
        if result.stop_reason is not None:
            completed["stop_reason"] = result.stop_reason
        if loop.calculate_cost is not None:
            cost = price(loop.calculate_cost, result.usage, model_name, sink.run.id)
            if cost is not None:
                completed["cost"] = cost.to_json()
                add_cost(state, cost, sink.run.id)
        event = await sink.emit("model.completed", completed, usage=state.usage.to_json())
        self.events.append(event)
        check_token_budgets(limits, state, result.usage)
        return Completion(text, model_name, result.stop_reason, result.usage)

    async def _stream(self, gateway: Any, model_input: ModelInput) -> tuple[ModelResult, str]:
        """The model's result and its text; no delta becomes an event."""
        guard = self.loop.execution.guard
        reader = ModelStreamReader()
        try:
            iterator = gateway.stream(model_input).__aiter__()
        except FevexError:
            raise
        except Exception as error:
            raise _model_error(error) from None
        try:
            while True:
                try:
                    event = await guard(iterator.__anext__())
                except StopAsyncIteration:
                    break
                except (FevexError, asyncio.CancelledError, DeadlineReached):
                    raise
                except Exception as error:
                    raise _model_error(error) from None
                reader.accept(event)
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()
        result = reader.finish()
        if result.tool_calls:
            raise FevexRunError(
                "OUTPUT_INVALID",
                "The model asked for tools in a completion that offered none.",
                category="validation",
            )
        text = result.output if isinstance(result.output, str) else reader.text
        return result, text


def _model_name(gateway: Any, key: str) -> str:
    """The gateway's ``model_name``, else the model part of the app's key for it."""
    named = getattr(gateway, "model_name", None)
    if isinstance(named, str) and named:
        return named
    return key.partition(":")[2] or key


def _model_error(error: Exception) -> FevexRunError:
    # Not chained: a gateway's exception may quote the request, and the request the server.
    return FevexRunError(
        "MODEL_ERROR",
        f"The model failed: {type(error).__name__}.",
        category="model",
        recoverable=True,
    )
