"""Tool definitions: a function, its name, and the schemas of its input and output."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, overload

from fevex._ground.names import is_valid_name
from fevex.errors import FevexConfigurationError
from fevex.schemas.schema_check import check_schema
from fevex.tools.context import ToolContext
from fevex.tools.function_schema import Arguments, read_function

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "Approval",
    "ErrorsToModel",
    "Idempotency",
    "RetryPolicy",
    "Risk",
    "ToolDefinition",
    "define_tool",
]

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")
InputT_co = TypeVar("InputT_co", covariant=True)
OutputT_co = TypeVar("OutputT_co", covariant=True)
_ModelT = TypeVar("_ModelT", bound="BaseModel")

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
class ToolDefinition(Generic[InputT_co, OutputT_co]):
    """A tool as fevex runs it, generic in the input it validates and the output its
    function returns.

    ``function`` takes the validated input, plus a :class:`ToolContext` when
    ``takes_context`` is true; it may be sync (run in a worker thread) or async. With
    ``arguments="positional"`` (the default for definitions built by hand) they are passed
    positionally; :func:`define_tool` passes every argument by keyword, naming them in
    ``parameters``: for ``"input"`` the whole value as ``parameters[0]``, for
    ``"keywords"`` each field of the input as its parameter, and the context as
    ``context_parameter``.
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
    arguments: Arguments = "positional"
    parameters: tuple[str, ...] = ()
    context_parameter: str | None = None

    def call_arguments(
        self, value: Any, context: ToolContext | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments of one call of ``function``."""
        if self.arguments == "positional":
            return ((value,) if context is None else (value, context)), {}
        if self.arguments == "keywords":
            keywords = {name: getattr(value, f"p{i}") for i, name in enumerate(self.parameters)}
        else:
            keywords = {self.parameters[0]: value}
        if context is not None and self.context_parameter is not None:
            keywords[self.context_parameter] = context
        return (), keywords

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


class ToolDecorator(Protocol):
    """What ``define_tool(name=...)`` returns: applied to a function, its tool. The input
    type is the pydantic model a function takes whole, or ``dict[str, object]`` for one that
    takes keywords; the output type is what the function returns."""

    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, function: Callable[[_ModelT], Awaitable[OutputT]], /
    ) -> ToolDefinition[_ModelT, OutputT]: ...
    @overload
    def __call__(  # type: ignore[overload-overlap]
        self, function: Callable[[_ModelT, ToolContext], Awaitable[OutputT]], /
    ) -> ToolDefinition[_ModelT, OutputT]: ...
    @overload
    def __call__(
        self, function: Callable[[_ModelT], OutputT], /
    ) -> ToolDefinition[_ModelT, OutputT]: ...
    @overload
    def __call__(
        self, function: Callable[[_ModelT, ToolContext], OutputT], /
    ) -> ToolDefinition[_ModelT, OutputT]: ...
    @overload
    def __call__(
        self, function: Callable[..., Awaitable[OutputT]], /
    ) -> ToolDefinition[dict[str, object], OutputT]: ...
    @overload
    def __call__(
        self, function: Callable[..., OutputT], /
    ) -> ToolDefinition[dict[str, object], OutputT]: ...


@overload
def define_tool(  # type: ignore[overload-overlap]
    function: Callable[[_ModelT], Awaitable[OutputT]], /
) -> ToolDefinition[_ModelT, OutputT]: ...
@overload
def define_tool(  # type: ignore[overload-overlap]
    function: Callable[[_ModelT, ToolContext], Awaitable[OutputT]], /
) -> ToolDefinition[_ModelT, OutputT]: ...
@overload
def define_tool(function: Callable[[_ModelT], OutputT], /) -> ToolDefinition[_ModelT, OutputT]: ...
@overload
def define_tool(
    function: Callable[[_ModelT, ToolContext], OutputT], /
) -> ToolDefinition[_ModelT, OutputT]: ...
@overload
def define_tool(
    function: Callable[..., Awaitable[OutputT]], /
) -> ToolDefinition[dict[str, object], OutputT]: ...
@overload
def define_tool(
    function: Callable[..., OutputT], /
) -> ToolDefinition[dict[str, object], OutputT]: ...
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
) -> ToolDecorator: ...


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
) -> Any:
    """Define a tool from a plain function, as ``@define_tool`` or ``@define_tool(name=...)``.

    The function's parameters are the tool's input: the model is offered one object with a
    property per parameter (its type, its default, its description from ``Annotated[...,
    Field(description=...)]`` or from the docstring's Google, NumPy or Sphinx parameter
    section), and the function receives them as keyword arguments. A function whose one
    input is a pydantic model (or a dataclass, TypedDict or dict) receives that value
    whole. A parameter annotated ``ToolContext`` receives the call's context and is not
    part of the input. A parameter with no annotation or a type with no JSON form is
    refused with ``INVALID_TOOL_PARAMETER``, naming it.

    The output schema comes from the return annotation, unless given; ``input_schema=``
    replaces the signature's schema for a function that takes one input. The name defaults
    to the function's name and the description to its docstring (without its parameter
    sections, cut at 1,024 characters as a remote tool's description is). An annotation
    that cannot be resolved is ``INVALID_TOOL``, naming its parameter and the function.
    """

    if isinstance(credentials, str):
        raise _invalid("credentials must be a list of names, not a string.")
    retry_policy = _retry_policy(retry)
    if errors_to_model is True:
        errors_to_model = "always"
    elif errors_to_model is False:
        errors_to_model = "never"

    def build(target: Callable[..., Any]) -> ToolDefinition[Any, Any]:
        if not callable(target):
            raise _invalid("define_tool needs a function.")
        tool_name = name if name is not None else getattr(target, "__name__", "")
        shape = read_function(target, tool_name, explicit_input=input_schema is not None)
        definition: ToolDefinition[Any, Any] = ToolDefinition(
            name=tool_name,
            description=description if description is not None else shape.description,
            function=target,
            input_schema=input_schema if input_schema is not None else shape.input_hint,
            output_schema=output_schema if output_schema is not None else shape.output_hint,
            takes_context=shape.context_parameter is not None,
            is_async=inspect.iscoroutinefunction(target),
            risk=risk,
            approval=approval,
            idempotency=idempotency,
            credentials=tuple(credentials),
            retry=retry_policy,
            errors_to_model=errors_to_model,
            arguments=shape.arguments,
            parameters=shape.keywords,
            context_parameter=shape.context_parameter,
        )
        definition.check()
        _check_schemas(definition)
        return definition

    return build if function is None else build(function)


def _retry_policy(retry: RetryPolicy | Mapping[str, Any] | None) -> RetryPolicy:
    if retry is None:
        return NO_RETRY
    if isinstance(retry, RetryPolicy):
        return retry
    if isinstance(retry, Mapping):
        try:
            return RetryPolicy(**retry)
        except TypeError as error:
            raise _invalid(f"retry: {error}") from None
    raise _invalid("retry must be a RetryPolicy or a mapping.")


def _check_schemas(definition: ToolDefinition[Any, Any]) -> None:
    """Each schema the tool was given or read from its function is a valid JSON Schema."""
    where = f"Tool {definition.name}"
    check_schema(definition.input_schema, "INVALID_TOOL", f"{where}: input_schema")
    if definition.output_schema is not None:
        check_schema(definition.output_schema, "INVALID_TOOL", f"{where}: output_schema")
