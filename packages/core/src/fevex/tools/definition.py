"""Tool definitions: a function, its name, and the schemas of its input and output."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from fevex._internal.names import is_valid_name
from fevex._internal.schema_check import check_schema
from fevex.errors import FevexConfigurationError
from fevex.tools.context import ToolContext

__all__ = [
    "Approval",
    "ErrorsToModel",
    "Idempotency",
    "RetryPolicy",
    "Risk",
    "ToolDefinition",
    "define_tool",
]

_EMPTY = inspect.Parameter.empty
# The input parameter of a function that has no annotation: refused, since the model would
# be offered a schema that says nothing ({}) and the tool any value at all.
_UNTYPED: Any = object()

Risk = Literal["low", "medium", "high", "sensitive"]
Approval = Literal["never", "required"]
Idempotency = Literal["none", "keyed"]
# Which failures of a call go back to the model as an error result instead of failing the run.
ErrorsToModel = Literal["never", "input", "always"]
_RISKS = ("low", "medium", "high", "sensitive")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of a failing tool function: up to ``max_attempts`` calls in all, waiting
    ``backoff`` seconds before the second, doubling up to ``max_backoff``. Policies run
    again before each retry. Only the function raising is retried, never invalid input or
    output."""

    max_attempts: int = 1
    backoff: float = 0.2
    max_backoff: float = 2.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before ``attempt`` (2 for the first retry)."""
        return float(min(self.backoff * 2.0 ** (attempt - 2), self.max_backoff))


NO_RETRY = RetryPolicy()


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as fevex runs it.

    ``function`` takes the validated input, plus a :class:`ToolContext` when
    ``takes_context`` is true; it may be sync (run in a worker thread) or async.
    ``output_schema`` of ``None`` means any JSON value.

    ``approval="required"`` pauses the run before each call until a person decides.
    ``idempotency="keyed"`` gives each call a stable ``context.idempotency_key`` and lets
    recovery retry a call whose outcome was lost. ``credentials`` names the secrets the
    function may ask for with ``context.get_credential``.

    ``errors_to_model`` hands failures back to the model, within the run's
    ``Limits.max_tool_retries``, instead of failing the run: ``"input"`` when the model's
    arguments fail the input schema (the function never ran), ``"always"`` also when the
    function fails after its ``retry`` policy; ``"always"`` needs ``idempotency="keyed"``,
    since a failed call may have applied its effect and the model will call again. A
    function may raise :class:`~fevex.tools.ToolRetry` whatever this says.
    """

    name: str
    description: str
    function: Callable[..., Any]
    input_schema: Any
    output_schema: Any = None
    takes_context: bool = False
    is_async: bool = False
    risk: Risk = "low"
    approval: Approval = "never"
    idempotency: Idempotency = "none"
    credentials: tuple[str, ...] = ()
    retry: RetryPolicy = NO_RETRY
    errors_to_model: ErrorsToModel = "never"

    def check(self) -> None:
        if not is_valid_name(self.name):
            raise _invalid(f"Tool name {self.name!r} must match [A-Za-z0-9_-]{{1,64}}.")
        if not isinstance(self.description, str):
            raise _invalid(f"Tool {self.name}: description must be a string.")
        if not callable(self.function):
            raise _invalid(f"Tool {self.name}: function must be callable.")
        if self.input_schema is None:
            raise _invalid(f"Tool {self.name}: an input schema is required.")
        if self.risk not in _RISKS:
            raise _invalid(f"Tool {self.name}: risk must be one of {', '.join(_RISKS)}.")
        if self.approval not in ("never", "required"):
            raise _invalid(f"Tool {self.name}: approval must be 'never' or 'required'.")
        if self.idempotency not in ("none", "keyed"):
            raise _invalid(f"Tool {self.name}: idempotency must be 'none' or 'keyed'.")
        if not isinstance(self.credentials, tuple) or not all(
            isinstance(name, str) and name for name in self.credentials
        ):
            raise _invalid(f"Tool {self.name}: credentials must be a list of names.")
        retry = self.retry
        if not (
            isinstance(retry, RetryPolicy)
            and isinstance(retry.max_attempts, int)
            and retry.max_attempts >= 1
            and retry.backoff >= 0
            and retry.max_backoff >= 0
        ):
            raise _invalid(f"Tool {self.name}: retry needs max_attempts >= 1 and delays >= 0.")
        self._check_errors_to_model()

    def _check_errors_to_model(self) -> None:
        if self.errors_to_model not in ("never", "input", "always"):
            raise _invalid(
                f"Tool {self.name}: errors_to_model must be 'never', 'input' or 'always' "
                "(or True for 'always')."
            )
        if self.errors_to_model == "always" and self.idempotency != "keyed":
            raise _invalid(
                f"Tool {self.name}: errors_to_model='always' needs idempotency='keyed': a "
                "call that failed may have applied its effect, and the model would call the "
                "tool again. Use errors_to_model='input' to hand back invalid arguments only, "
                "or raise fevex.ToolRetry where the tool knows no effect was applied."
            )


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_TOOL", message)


@overload
def define_tool(function: Callable[..., Any], /) -> ToolDefinition: ...


@overload
def define_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Any = None,
    output_schema: Any = None,
    risk: Risk = "low",
    approval: Approval = "never",
    idempotency: Idempotency = "none",
    credentials: Iterable[str] = (),
    retry: RetryPolicy | Mapping[str, Any] | None = None,
    errors_to_model: ErrorsToModel | bool = "never",
) -> Callable[[Callable[..., Any]], ToolDefinition]: ...


def define_tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: Any = None,
    output_schema: Any = None,
    risk: Risk = "low",
    approval: Approval = "never",
    idempotency: Idempotency = "none",
    credentials: Iterable[str] = (),
    retry: RetryPolicy | Mapping[str, Any] | None = None,
    errors_to_model: ErrorsToModel | bool = "never",
) -> ToolDefinition | Callable[[Callable[..., Any]], ToolDefinition]:
    """Define a tool from a function, as ``@define_tool`` or ``@define_tool(name=...)``.

    The input schema comes from the annotation of the function's first parameter and the
    output schema from its return annotation, unless given explicitly; an input parameter
    without an annotation, or a schema fevex cannot validate with, is refused with
    ``INVALID_TOOL``. A parameter
    annotated ``ToolContext`` (or named ``context``) receives the call's context. The name
    defaults to the function's name and the description to its docstring.
    """

    if isinstance(credentials, str):
        raise _invalid("credentials must be a list of names, not a string.")
    if retry is None:
        retry_policy = NO_RETRY
    elif isinstance(retry, RetryPolicy):
        retry_policy = retry
    elif isinstance(retry, Mapping):
        try:
            retry_policy = RetryPolicy(**retry)
        except TypeError as error:
            raise _invalid(f"retry: {error}") from None
    else:
        raise _invalid("retry must be a RetryPolicy or a mapping.")
    if errors_to_model is True:
        errors_to_model = "always"
    elif errors_to_model is False:
        errors_to_model = "never"

    def build(target: Callable[..., Any]) -> ToolDefinition:
        if not callable(target):
            raise _invalid("define_tool needs a function.")
        input_hint, output_hint, takes_context = _read_signature(target)
        tool_name = name if name is not None else getattr(target, "__name__", "")
        if input_schema is None and input_hint is _UNTYPED:
            raise _invalid(
                f"Tool {tool_name}: the input parameter of {target.__name__} has no type "
                "annotation, so the model would be offered no schema; annotate it (for "
                "example `query: AccountQuery`, or `value: Any` to accept any JSON) or "
                "pass input_schema=."
            )
        tool_description = description
        if tool_description is None:
            tool_description = inspect.cleandoc(target.__doc__ or "")
        definition = ToolDefinition(
            name=tool_name,
            description=tool_description,
            function=target,
            input_schema=input_schema if input_schema is not None else input_hint,
            output_schema=output_schema if output_schema is not None else output_hint,
            takes_context=takes_context,
            is_async=inspect.iscoroutinefunction(target),
            risk=risk,
            approval=approval,
            idempotency=idempotency,
            credentials=tuple(credentials),
            retry=retry_policy,
            errors_to_model=errors_to_model,
        )
        definition.check()
        check_schema(definition.input_schema, "INVALID_TOOL", f"Tool {tool_name}: input_schema")
        if definition.output_schema is not None:
            check_schema(
                definition.output_schema, "INVALID_TOOL", f"Tool {tool_name}: output_schema"
            )
        return definition

    return build if function is None else build(function)


def _read_signature(target: Callable[..., Any]) -> tuple[Any, Any, bool]:
    try:
        signature = inspect.signature(target)
        hints = typing.get_type_hints(target, include_extras=True)
    except (TypeError, ValueError, NameError) as error:
        raise _invalid(f"Cannot read the signature of {target!r}: {error}") from None
    input_hint: Any = None
    takes_context = False
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    for index, parameter in enumerate(positional):
        hint = hints.get(parameter.name, _EMPTY)
        if hint is ToolContext or (parameter.name == "context" and index > 0):
            takes_context = True
        elif input_hint is None and index == 0:
            input_hint = _UNTYPED if hint is _EMPTY else hint
        else:
            raise _invalid(
                f"Tool function {target.__name__} takes one input and an optional "
                f"context; unexpected parameter {parameter.name!r}."
            )
    output_hint = hints.get("return")
    if output_hint in (None, type(None), Any):
        output_hint = None
    return input_hint, output_hint, takes_context
