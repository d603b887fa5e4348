"""The run loop: model step, sequential tool calls, next model step, until an answer.

An execution is an async generator of committed events, so a consumer that stops asking
stops the run (backpressure). The same loop serves ``run_agent``, ``stream_agent`` and
``start_agent``; closing it early, cancelling it or timing out persists ``run.cancelled``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Awaitable
from contextlib import aclosing
from typing import Any, Literal, TypeVar

from fevex._internal.composition import PreparedAgent, PreparedTool
from fevex._internal.event_sink import EventSink
from fevex.errors import FevexError, FevexRunError, RunCancelledError
from fevex.events import RunEvent
from fevex.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from fevex.models import ModelInput, ModelResult, ModelStreamReader, ToolCall, Usage
from fevex.tools import ToolContext
from fevex.tools.context import _Cancellation

T = TypeVar("T")
CancelReason = Literal["aborted", "timeout"]


def _fail(code: str, message: str, **details: Any) -> FevexRunError:
    return FevexRunError(code, message, details=details)


class AgentExecution:
    """One run of one agent in this process."""

    def __init__(
        self,
        agent: PreparedAgent,
        sink: EventSink,
        messages: list[Message],
        transcript: list[Message],
        deadline: float | None,
    ) -> None:
        self.agent = agent
        self.sink = sink
        self.messages = messages
        self.transcript = transcript
        self.deadline = deadline
        self.output: Any = None
        self.usage = Usage()
        self._cancellation = _Cancellation()
        self._cancel_reason: CancelReason | None = None
        self._task: asyncio.Task[Any] | None = None
        self._awaiting = False
        self._parked = False
        self._finished = False
        self.settled = asyncio.Event()

    @property
    def run_id(self) -> str:
        return self.sink.run.id

    @property
    def finished(self) -> bool:
        return self._finished

    # -- cancellation ---------------------------------------------------------------

    async def cancel(self) -> None:
        """Cancel from outside the loop (``cancel_run``)."""
        if self._finished or self._cancel_reason is not None:
            return
        self._cancel_reason = "aborted"
        self._cancellation.cancelled = True
        if self._parked:
            # The loop waits for its consumer to ask for the next event: persist now; when
            # the consumer resumes, the loop stops without writing.
            self._observe(await self._persist_cancelled("aborted"))
        elif self._awaiting and self._task is not None:
            self._task.cancel()
        # Otherwise a store commit is in flight; the next guarded await stops the run.

    async def _guard(self, awaitable: Awaitable[T]) -> T:
        if self._cancel_reason is not None:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise asyncio.CancelledError
        self._task = asyncio.current_task()
        self._awaiting = True
        try:
            if self.deadline is None:
                return await awaitable
            async with asyncio.timeout_at(self.deadline):
                return await awaitable
        finally:
            self._awaiting = False

    async def _persist_cancelled(self, reason: CancelReason) -> RunEvent | None:
        if self._finished:
            return None
        self._finished = True
        self._cancellation.cancelled = True
        try:
            return await self.sink.emit(
                "run.cancelled",
                {"reason": reason},
                status="cancelled",
                release_session=True,
                release_lease=True,
            )
        finally:
            self.settled.set()

    # -- the loop -------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[RunEvent, None]:
        """Committed events, each yielded before observers see it."""
        async with aclosing(self._run()) as inner:
            async for event in inner:
                self._parked = True
                try:
                    yield event
                finally:
                    self._parked = False
                self.sink.observe(event)
                if self._cancel_reason is not None and self._finished:
                    raise RunCancelledError(self.run_id, self._cancel_reason)

    async def _run(self) -> AsyncGenerator[RunEvent, None]:
        sink = self.sink
        try:
            tool_specs, output_schema = self.agent.model_boundary()
            limits = self.agent.definition.limits
            step = 0
            tool_calls = 0
            seen_calls: set[str] = set()
            provider_state: Any = None
            while True:
                if limits.max_steps is not None and step >= limits.max_steps:
                    raise _fail(
                        "MAX_STEPS_EXCEEDED",
                        f"The run needed more than {limits.max_steps} model steps.",
                        limit=limits.max_steps,
                    )
                step += 1
                yield await sink.emit("model.started", {"step": step})
                model_input = ModelInput(
                    tuple(self.messages),
                    tool_specs,
                    output_schema,
                    self._remaining_output_tokens(),
                    self.agent.definition.model_options,
                    provider_state,
                )
                reader = ModelStreamReader()
                async with aclosing(self._stream_model(model_input, step, reader)) as stream:
                    async for event in stream:
                        yield event
                result = reader.finish()
                deltas = reader.deltas
                self.usage = self.usage + result.usage
                provider_state = result.provider_state
                yield await sink.emit(
                    "model.completed",
                    {
                        "step": step,
                        "output": result.output,
                        "tool_calls": [
                            {"id": c.id, "name": c.name, "input": c.input}
                            for c in result.tool_calls
                        ],
                        "usage": result.usage.to_json(),
                        "total_usage": self.usage.to_json(),
                    },
                    usage=self.usage.to_json(),
                )
                self._check_token_budgets(result.usage)
                if not result.tool_calls:
                    break
                assistant = Message("assistant", self._assistant_parts(result, deltas))
                self.messages.append(assistant)
                self.transcript.append(assistant)
                results: list[ToolResultPart] = []
                for call in result.tool_calls:
                    tool_calls += 1
                    tool = self._admit_tool_call(call, tool_calls, seen_calls)
                    base = {"step": step, "tool_call_id": call.id, "tool_name": call.name}
                    yield await sink.emit("tool.started", {**base, "input": call.input})
                    try:
                        output = await self._execute_tool(tool, call)
                    except FevexError as error:
                        yield await sink.emit("tool.failed", {**base, "error": error.to_json()})
                        raise
                    yield await sink.emit("tool.completed", {**base, "output": output})
                    results.append(ToolResultPart(call.id, call.name, output))
                tool_message = Message("tool", tuple(results))
                self.messages.append(tool_message)
                self.transcript.append(tool_message)
            self.output, output_json, text = self._final_output(result, deltas)
            final = Message("assistant", self._assistant_parts(result, [text]))
            self.transcript.append(final)
            self._finished = True
            yield await sink.emit(
                "run.completed",
                {"output": output_json, "usage": self.usage.to_json()},
                status="completed",
                output=output_json,
                history=tuple(message.to_json() for message in self.transcript),
                release_session=True,
                release_lease=True,
            )
        except GeneratorExit:
            # The consumer abandoned the stream: the run is cancelled, durably.
            if self._cancel_reason is None:
                self._cancel_reason = "aborted"
            self._observe(await self._persist_cancelled(self._cancel_reason))
            raise
        except TimeoutError:
            if self._cancel_reason is None:
                self._cancel_reason = "timeout"
            cancelled = await self._persist_cancelled(self._cancel_reason)
            if cancelled is not None:
                yield cancelled
            raise RunCancelledError(self.run_id, self._cancel_reason) from None
        except asyncio.CancelledError:
            if self._cancel_reason is None:
                # Cancelled from outside fevex (task cancellation): record it and let the
                # cancellation propagate untouched.
                self._observe(await self._persist_cancelled("aborted"))
                raise
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                task.uncancel()
            cancelled = await self._persist_cancelled(self._cancel_reason)
            if cancelled is not None:
                yield cancelled
            raise RunCancelledError(self.run_id, self._cancel_reason) from None
        except FevexError as error:
            failed = await self._persist_failed(error)
            if failed is not None:
                yield failed
            raise
        except Exception as error:
            failed = await self._persist_failed(
                FevexRunError(
                    "UNEXPECTED_ERROR", f"The run failed unexpectedly: {type(error).__name__}."
                )
            )
            if failed is not None:
                yield failed
            raise
        finally:
            self.settled.set()

    def _observe(self, event: RunEvent | None) -> None:
        if event is not None:
            self.sink.observe(event)

    async def _persist_failed(self, error: FevexError) -> RunEvent | None:
        if self._finished:
            return None
        self._finished = True
        return await self.sink.emit(
            "run.failed",
            {"error": error.to_json()},
            status="failed",
            error=error.to_json(),
            release_session=True,
            release_lease=True,
        )

    # -- model step -----------------------------------------------------------------

    async def _stream_model(
        self, model_input: ModelInput, step: int, reader: ModelStreamReader
    ) -> AsyncGenerator[RunEvent, None]:
        try:
            iterator = self.agent.model.stream(model_input).__aiter__()
        except FevexError:
            raise
        except Exception as error:
            raise _model_error(error) from error
        try:
            while True:
                try:
                    event = await self._guard(iterator.__anext__())
                except StopAsyncIteration:
                    break
                except (FevexError, asyncio.CancelledError, TimeoutError):
                    raise
                except Exception as error:
                    raise _model_error(error) from error
                delta = reader.accept(event)
                if delta is not None:
                    yield await self.sink.emit("model.output.delta", {"step": step, "delta": delta})
        finally:
            aclose = getattr(iterator, "aclose", None)
            if aclose is not None:
                await aclose()

    def _remaining_output_tokens(self) -> int | None:
        limit = self.agent.definition.limits.max_output_tokens
        if limit is None:
            return None
        remaining = limit - (self.usage.output_tokens or 0)
        if remaining <= 0:
            raise _fail(
                "MAX_OUTPUT_TOKENS_EXCEEDED",
                f"The run used its output token budget of {limit}.",
                limit=limit,
            )
        return remaining

    def _check_token_budgets(self, step_usage: Usage) -> None:
        limits = self.agent.definition.limits
        for limit, reported, total, name in (
            (limits.max_input_tokens, step_usage.input_tokens, self.usage.input_tokens, "input"),
            (
                limits.max_output_tokens,
                step_usage.output_tokens,
                self.usage.output_tokens,
                "output",
            ),
        ):
            if limit is None:
                continue
            if reported is None:
                raise _fail(
                    "USAGE_NOT_REPORTED",
                    f"The agent limits {name} tokens, but the model did not report "
                    f"{name}_tokens usage.",
                )
            if total is not None and total > limit:
                raise _fail(
                    f"MAX_{name.upper()}_TOKENS_EXCEEDED",
                    f"The run used {total} {name} tokens, over its budget of {limit}.",
                    limit=limit,
                    used=total,
                )

    @staticmethod
    def _assistant_parts(
        result: ModelResult, deltas: list[str]
    ) -> tuple[TextPart | ThinkingPart | ToolCallPart, ...]:
        parts: list[TextPart | ThinkingPart | ToolCallPart] = []
        if result.reasoning:
            parts.append(ThinkingPart(result.reasoning))
        text = "".join(deltas)
        if text:
            parts.append(TextPart(text))
        parts.extend(ToolCallPart(c.id, c.name, c.input) for c in result.tool_calls)
        return tuple(parts)

    # -- tools ----------------------------------------------------------------------

    def _admit_tool_call(self, call: ToolCall, count: int, seen: set[str]) -> PreparedTool:
        limit = self.agent.definition.limits.max_tool_calls
        if limit is not None and count > limit:
            raise _fail(
                "MAX_TOOL_CALLS_EXCEEDED",
                f"The run asked for more than {limit} tool calls.",
                limit=limit,
            )
        if call.id in seen:
            raise _fail(
                "DUPLICATE_TOOL_CALL_ID",
                f"The model reused tool call id {call.id!r} within the run.",
                tool_call_id=call.id,
            )
        seen.add(call.id)
        tool = self.agent.tools.get(call.name)
        if tool is None:
            raise _fail(
                "TOOL_NOT_AVAILABLE",
                f"The model asked for tool {call.name!r}, which agent "
                f"{self.agent.definition.name} does not have.",
                tool_name=call.name,
            )
        return tool

    async def _execute_tool(self, tool: PreparedTool, call: ToolCall) -> Any:
        definition = tool.definition
        try:
            value = tool.input_schema.validate(call.input)
        except Exception as error:
            raise FevexRunError(
                "TOOL_INPUT_INVALID",
                f"Input for tool {definition.name} is invalid: {_summary(error)}",
                category="validation",
                details={"tool_name": definition.name},
            ) from None
        args: tuple[Any, ...] = (value,)
        if definition.takes_context:
            run = self.sink.run
            args = (
                value,
                ToolContext(
                    run.id,
                    run.session_id,
                    run.agent_name,
                    call.id,
                    definition.name,
                    None,
                    self._cancellation,
                ),
            )
        try:
            if definition.is_async:
                raw = await self._guard(definition.function(*args))
            else:
                raw = await self._guard(asyncio.to_thread(definition.function, *args))
        except (FevexError, asyncio.CancelledError, TimeoutError):
            raise
        except Exception as error:
            raise FevexRunError(
                "TOOL_FAILED",
                f"Tool {definition.name} failed: {type(error).__name__}: {error}",
                category="tool",
                recoverable=True,
                details={"tool_name": definition.name},
            ) from error
        try:
            if tool.output_schema is not None:
                return tool.output_schema.to_json(tool.output_schema.validate(raw))
            return _plain_json(raw)
        except Exception as error:
            raise FevexRunError(
                "TOOL_OUTPUT_INVALID",
                f"Output of tool {definition.name} is invalid: {_summary(error)}",
                category="validation",
                details={"tool_name": definition.name},
            ) from None

    # -- final output ---------------------------------------------------------------

    def _final_output(self, result: ModelResult, deltas: list[str]) -> tuple[Any, Any, str]:
        """The validated value, its JSON form and the text the conversation keeps."""
        text = "".join(deltas)
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
            return value, schema.to_json(value), text
        except Exception as error:
            raise FevexRunError(
                "OUTPUT_INVALID",
                f"The output of agent {self.agent.definition.name} is invalid: {_summary(error)}",
                category="validation",
            ) from None


def _model_error(error: Exception) -> FevexRunError:
    return FevexRunError(
        "MODEL_ERROR",
        f"The model failed: {type(error).__name__}: {error}",
        category="model",
        recoverable=True,
    )


def _plain_json(value: Any) -> Any:
    from fevex.schemas.schema import ensure_json

    ensure_json(value)
    return value


def _summary(error: Exception) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            items = errors(include_input=False, include_url=False)
            return "; ".join(
                f"{'.'.join(str(p) for p in item['loc']) or 'value'}: {item['msg']}"
                for item in items
            )
        except Exception:
            pass
    return f"{type(error).__name__}: {error}"
