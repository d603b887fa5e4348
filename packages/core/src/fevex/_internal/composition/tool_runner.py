"""One tool call: input validation, policies, credentials, the effect with its retries,
and output validation.

Credentials are resolved inside the call, only for names the tool declared, and kept
nowhere but in this call's memory: an output that contains one is rejected, and error
messages are scrubbed of them before they reach events, stores or logs.

A function that raises fails the call with ``TOOL_FAILED``, which keeps the exception as
its ``__cause__`` (in memory only: what is stored is the scrubbed message) and logs its
traceback at WARNING on the ``fevex`` logger. Once the call has resolved a credential, the
error the caller gets carries no exception of the tool's at all (no ``__cause__``, no
``__context__``): any message, note or attribute in that chain may hold the credential, and
the error travels to tracebacks, ``logging.exception`` and error trackers that fevex cannot
scrub. The exception as raised goes to the app's ``on_tool_exception`` hook, when it has one,
before anything is scrubbed. Each retry the tool's ``retry`` policy makes
is logged at WARNING too, and kept in :attr:`ToolCallRun.retries` for the call's event.
Whether a failure goes back to the model instead of failing the run is decided by
:meth:`ToolCallRun.retry_message` and the agent loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fevex._ground.clock import utc_now
from fevex._ground.storable_text import UNSTORABLE_TEXT
from fevex._ground.worker_threads import in_worker_thread
from fevex._internal.composition.registry import PreparedTool
from fevex._internal.composition.tool_reports import CallReports
from fevex._internal.engine.deadline import DeadlineReached
from fevex._internal.engine.event_sink import EventSink
from fevex.errors import FevexError, FevexRunError
from fevex.messages import FilePart, ImagePart
from fevex.models import ToolCall
from fevex.policies.policy import Policy, PolicyRequest, enforce_policies
from fevex.schemas.schema import ensure_json
from fevex.tools.completion import Completion, CompletionRequest
from fevex.tools.context import AskInput, ToolContext, _Cancellation
from fevex.tools.output import ToolOutput, checked_media, media_summary
from fevex.tools.redaction import redact_secrets, secret_spellings
from fevex.tools.retry import ToolRetry

CredentialResolver = Mapping[str, str] | Callable[[str, ToolContext], str | Awaitable[str]] | None
# Sees each exception a tool function raised, exactly as raised (credentials and all).
ToolExceptionHook = Callable[[Exception, ToolContext], Any]
# Answers a completion one attempt of a call asks for (the agent loop's ToolCompletions).
CompletionHook = Callable[["ToolCallRun", CompletionRequest, int], Awaitable[Completion]]

logger = logging.getLogger("fevex")


class ToolCallRun:
    """Everything one call needs from its run."""

    __slots__ = (
        "agent_name",
        "ask_input",
        "asked_retry",
        "call",
        "cancellation",
        "complete",
        "content",
        "credentials",
        "guard",
        "halted",
        "input_rejected",
        "on_tool_exception",
        "policies",
        "reports",
        "retries",
        "run_id",
        "secrets",
        "session_id",
        "tool",
    )

    def __init__(
        self,
        tool: PreparedTool,
        call: ToolCall,
        *,
        run_id: str,
        session_id: str,
        agent_name: str,
        policies: tuple[Policy, ...],
        credentials: CredentialResolver,
        cancellation: _Cancellation,
        guard: Callable[[Awaitable[Any]], Awaitable[Any]],
        on_tool_exception: ToolExceptionHook | None = None,
        ask_input: AskInput | None = None,
        complete: CompletionHook | None = None,
    ) -> None:
        self.tool = tool
        self.ask_input = ask_input
        self.call = call
        self.run_id = run_id
        self.session_id = session_id
        self.agent_name = agent_name
        self.policies = policies
        self.credentials = credentials
        self.cancellation = cancellation
        self.guard = guard
        self.on_tool_exception = on_tool_exception
        self.secrets: set[str] = set()
        # The attempts that failed and were tried again: attempt number, code and time.
        self.retries: list[dict[str, Any]] = []
        # The model's arguments failed the input schema: the function never ran.
        self.input_rejected = False
        # The function raised ToolRetry: it asks the model for another call (its message,
        # scrubbed). Kept here, not only as the error's cause, which a call that resolved a
        # credential does not keep.
        self.asked_retry: str | None = None
        # Where the call's context sends its progress and trace events (see reporting).
        self.reports: CallReports | None = None
        self.complete = complete
        # A completion the call asked for failed on the run's rules (a policy, a limit):
        # the call fails with it, whatever the tool made of it.
        self.halted: FevexError | None = None
        # The images and files the tool returned beside its value (a ToolOutput's parts).
        self.content: tuple[ImagePart | FilePart, ...] = ()

    @property
    def idempotency_key(self) -> str | None:
        if self.tool.definition.idempotency != "keyed":
            return None
        return f"fevex:{self.run_id}:{self.call.id}"

    def policy_request(
        self, stage: Any, attempt: int = 1, credential: str | None = None
    ) -> PolicyRequest:
        definition = self.tool.definition
        return PolicyRequest(
            stage,
            self.run_id,
            self.session_id,
            self.agent_name,
            definition.name,
            self.call.id,
            self.call.input,
            definition.risk,
            attempt,
            credential,
        )

    async def check_policies(self, stage: Any, attempt: int = 1) -> None:
        if self.policies:
            await enforce_policies(self.policies, self.policy_request(stage, attempt))

    def input_is_valid(self) -> bool:
        """Whether the model's arguments pass the tool's input schema."""
        try:
            self.tool.input_schema.validate(self.call.input)
        except Exception:
            return False
        return True

    def reporting(self, sink: EventSink, base: Mapping[str, Any]) -> CallReports:
        """The call's reports to the run (``base``: what names the call in its events);
        ``relay()`` on them runs :meth:`execute` and yields its ``tool.progress`` events."""
        takes_context = self.tool.definition.takes_context
        reports = self.reports = CallReports(sink, base, self.execute, takes_context)
        return reports

    async def execute(self) -> Any:
        """Run the call to its validated JSON output, or raise its ``FevexRunError``."""
        definition = self.tool.definition
        try:
            value = self.tool.input_schema.validate(self.call.input)
        except Exception as error:
            self.input_rejected = True
            raise FevexRunError(
                "TOOL_INPUT_INVALID",
                f"Input for tool {definition.name} is invalid: {summarize(error)}",
                category="validation",
                details={"tool_name": definition.name},
            ) from None
        retry = definition.retry
        attempt = 1
        while True:
            await self.check_policies("effect" if attempt == 1 else "retry", attempt)
            try:
                raw = await self._call(value, attempt)
                break
            except FevexRunError as error:
                if (
                    error.code != "TOOL_FAILED"
                    or attempt >= retry.max_attempts
                    or self.asked_retry is not None
                ):
                    raise
                self.retries.append({"attempt": attempt, "code": error.code, "at": utc_now()})
            attempt += 1
            delay = retry.delay(attempt)
            logger.warning(
                "Run %s: tool %s (call %s) failed on attempt %d; retrying in %.3g s",
                self.run_id,
                definition.name,
                self.call.id,
                attempt - 1,
                delay,
                extra={
                    "run_id": self.run_id,
                    "tool_name": definition.name,
                    "tool_call_id": self.call.id,
                    "attempt": attempt,
                    "retry": True,
                },
            )
            await self.guard(asyncio.sleep(delay))
        return self._validated_output(raw)

    async def _call(self, value: Any, attempt: int) -> Any:
        definition = self.tool.definition
        context = self._context(attempt) if definition.takes_context else None
        args, keywords = definition.call_arguments(value, context)
        try:
            if definition.is_async:
                raw = await self.guard(definition.function(*args, **keywords))
            else:
                call = functools.partial(definition.function, *args, **keywords)
                raw = await self.guard(in_worker_thread(call))
        except (asyncio.CancelledError, DeadlineReached):
            raise
        except Exception as error:
            raised = error
        else:
            if self.halted is None:
                return raw
        # A completion the call asked for was refused by the run's rules: that is why the
        # call ends, whatever the tool returned or raised after it.
        if self.halted is not None:
            raised = self.halted
        # Raised outside the handler, so that the error has no __context__ it did not choose.
        raise self._failure(raised, attempt, context)

    def _failure(self, error: Exception, attempt: int, context: ToolContext | None) -> FevexError:
        """The error the call fails with, for an exception its function raised."""
        if self.on_tool_exception is not None:
            self._show_hook(error, context or self._context(attempt))
        definition = self.tool.definition
        failure: FevexError
        if isinstance(error, FevexError):
            # A provider's own error may quote what it sent, credentials included.
            failure = self._scrubbed_copy(error) if self.secrets else error
        elif isinstance(error, ToolRetry):
            # The tool decided: it asks the model for another call and applied no effect.
            self.asked_retry = self.scrub(error.message)
            failure = FevexRunError(
                "TOOL_FAILED",
                self.scrub(f"Tool {definition.name} asked the model to try again: {error.message}"),
                category="tool",
                details={"tool_name": definition.name},
            )
        else:
            self._log_failure(error, attempt)
            failure = FevexRunError(
                "TOOL_FAILED",
                self.scrub(f"Tool {definition.name} failed: {type(error).__name__}: {error}"),
                category="tool",
                recoverable=True,
                details={"tool_name": definition.name},
            )
        if failure is not error:
            failure.__cause__ = None if self.secrets else error
            failure.__suppress_context__ = True
        return failure

    def _scrubbed_copy(self, error: FevexError) -> FevexError:
        """``error`` without the call's credentials, and without the exceptions it chains
        (which may hold them in ways no scrub reaches); the original stays as it was, for
        the hook."""
        copied = type(error).__new__(type(error))
        copied.__dict__.update(vars(error))
        copied.message = self.scrub(error.message)
        copied.args = (copied.message,)
        copied.details = _scrubbed_json(error.details, self.scrub)
        notes = getattr(error, "__notes__", None)
        if notes is not None:
            copied.__notes__ = [self.scrub(str(note)) for note in notes]
        copied.__traceback__ = error.__traceback__
        return copied

    def _show_hook(self, error: Exception, context: ToolContext) -> None:
        hook = self.on_tool_exception
        assert hook is not None
        try:
            hook(error, context)
        except Exception as failed:
            # Its exception may quote the tool's, credential included: its type only.
            logger.warning(
                "on_tool_exception raised %s for tool %s (run %s, call %s)",
                type(failed).__name__,
                self.tool.definition.name,
                self.run_id,
                self.call.id,
                extra={"run_id": self.run_id, "tool_name": self.tool.definition.name},
            )

    def _log_failure(self, error: Exception, attempt: int) -> None:
        extra = {
            "run_id": self.run_id,
            "tool_name": self.tool.definition.name,
            "tool_call_id": self.call.id,
            "attempt": attempt,
        }
        if not self.secrets:
            logger.warning(
                "Tool %s failed (run %s, call %s, attempt %d)",
                self.tool.definition.name,
                self.run_id,
                self.call.id,
                attempt,
                exc_info=error,
                extra=extra,
            )
            return
        # A resolved credential can sit in any message of the chain: log the traceback as
        # scrubbed text rather than the exception objects a handler would print as they are.
        text = "".join(traceback.format_exception(error))
        logger.warning(
            "Tool %s failed (run %s, call %s, attempt %d)\n%s",
            self.tool.definition.name,
            self.run_id,
            self.call.id,
            attempt,
            self.scrub(text).rstrip(),
            extra=extra,
        )

    def _context(self, attempt: int) -> ToolContext:
        context = ToolContext(
            self.run_id,
            self.session_id,
            self.agent_name,
            self.call.id,
            self.tool.definition.name,
            self.idempotency_key,
            attempt,
            self.cancellation,
        )
        context._reports = self.reports

        async def resolve(name: str) -> str:
            return await self.resolve_credential(name, context)

        context._credentials = resolve
        context._ask_input = self.ask_input
        if self.complete is not None:
            complete = self.complete

            async def ask(request: CompletionRequest) -> Completion:
                return await complete(self, request, attempt)

            context._complete = ask
        return context

    async def resolve_credential(self, name: str, context: ToolContext) -> str:
        definition = self.tool.definition
        if name not in definition.credentials:
            raise FevexRunError(
                "CREDENTIAL_NOT_DECLARED",
                f"Tool {definition.name} asked for credential {name!r}, which it did not declare.",
                category="tool",
            )
        if self.policies:
            await enforce_policies(
                self.policies, self.policy_request("credentials", context.attempt, name)
            )
        value = await resolve_credential_value(self.credentials, name, context)
        self.secrets.add(value)
        return value

    def retry_message(self, error: FevexError) -> str | None:
        """What the model reads when ``error`` may go back to it, or ``None`` when the
        error fails the run.

        A function that raised :class:`ToolRetry` decided so itself; invalid arguments go
        back for ``errors_to_model="input"`` or ``"always"`` (the function never ran); any
        other failure of the function only for ``"always"``, which definitions allow for
        keyed tools alone. Policy denials, credentials, invalid output and provider errors
        never go back.
        """
        mode = self.tool.definition.errors_to_model
        if error.code == "TOOL_FAILED" and self.asked_retry is not None:
            text = self.asked_retry
        elif (self.input_rejected and mode != "never") or (
            error.code == "TOOL_FAILED" and mode == "always"
        ):
            text = error.message
        else:
            return None
        return UNSTORABLE_TEXT.sub("\ufffd", text)

    def scrub(self, text: str) -> str:
        return redact_secrets(text, self.secrets) if self.secrets else text

    def media_summary(self) -> dict[str, Any]:
        """What ``tool.completed`` says of the call's media parts: nothing without any."""
        return {"content": media_summary(self.content)} if self.content else {}

    def _validated_output(self, raw: Any) -> Any:
        tool = self.tool
        names: list[str] = []
        try:
            if isinstance(raw, ToolOutput):
                self.content = checked_media(raw.parts)
                names = [p.name for p in self.content if isinstance(p, FilePart) and p.name]
                raw = raw.value
            output = (
                tool.output_schema.to_json(tool.output_schema.validate(raw))
                if tool.output_schema is not None
                else jsonable(raw)
            )
            # Also after a schema's dump: text can still hold what no store keeps (NUL).
            ensure_json(output)
        except Exception as error:
            raise FevexRunError(
                "TOOL_OUTPUT_INVALID",
                self.scrub(f"Output of tool {tool.definition.name} is invalid: {summarize(error)}"),
                category="validation",
                details={"tool_name": tool.definition.name},
            ) from None
        if self.secrets:
            text = json.dumps([output, names])
            if any(
                spelling in text for secret in self.secrets for spelling in secret_spellings(secret)
            ):
                raise FevexRunError(
                    "TOOL_OUTPUT_CONTAINS_CREDENTIAL",
                    f"The output of tool {tool.definition.name} contains a credential it "
                    "resolved; it was not stored or sent to the model.",
                    category="tool",
                    details={"tool_name": tool.definition.name},
                )
        return output


def _scrubbed_json(value: Any, scrub: Callable[[str], str]) -> Any:
    """``value`` with every text in it, keys included, passed through ``scrub``."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {
            _scrubbed_json(key, scrub): _scrubbed_json(item, scrub) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_scrubbed_json(item, scrub) for item in value]
    return value


def jsonable(value: Any) -> Any:
    """An untyped tool output as JSON, the way pydantic dumps values: ``datetime``,
    ``date`` and ``time`` as ISO 8601 strings, ``UUID`` as a string, enums as their value,
    sets, frozensets and tuples as lists, models and dataclasses as their JSON; ``Decimal``
    as a number (an integer when it has no fraction). Anything else raises."""
    if value is None or type(value) in (str, bool, int, float):  # not enums of them
        return value
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(_decimals_as_numbers(value))


def _decimals_as_numbers(value: Any) -> Any:
    """Decimals, also inside plain containers, as numbers: pydantic would write them as
    strings, which a model reads as text. A model's or dataclass's own fields follow its
    own serialization."""
    from decimal import Decimal

    if isinstance(value, Decimal):
        if not value.is_finite():
            return float(value)  # refused later, like any NaN or infinity
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {key: _decimals_as_numbers(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_decimals_as_numbers(item) for item in value]
    return value


async def resolve_credential_value(
    resolver: CredentialResolver, name: str, context: ToolContext
) -> str:
    value: Any = None
    if isinstance(resolver, Mapping):
        value = resolver.get(name)
    elif resolver is not None:
        value = resolver(name, context)
        if inspect.isawaitable(value):
            value = await value
    if not isinstance(value, str) or not value:
        raise FevexRunError(
            "CREDENTIAL_NOT_FOUND",
            f"No value for credential {name!r} (tool {context.tool_name}).",
            category="tool",
        )
    return value


def summarize(error: Exception) -> str:
    """A validation error as short text, without echoing the rejected input."""
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
