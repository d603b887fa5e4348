"""A tool's input schema and description read from a plain function.

A function whose one input is already an object type (a pydantic model, a dataclass, a
TypedDict or a dict) receives the validated value whole, as it always has. Any other
function receives its arguments as keywords: its parameters become the properties of one
object schema (names, types, defaults, ``Annotated``/``Field`` descriptions, and the
descriptions its docstring gives in Google, NumPy or Sphinx style), so the model is always
offered an object with named fields, which strict provider modes require. The rest of the
docstring is the tool's description, cut at 1,024 characters as a remote tool's is: the
model reads it at every step.

The generated model names its fields by position and the parameters by alias: a parameter
may be called ``json`` or ``schema`` without shadowing pydantic's own attributes.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fevex._ground.descriptions import bounded_description
from fevex.errors import FevexConfigurationError
from fevex.tools.context import ToolContext
from fevex.tools.output import ToolOutput

__all__ = ["Arguments", "FunctionShape", "read_function"]

_EMPTY = inspect.Parameter.empty

Arguments = Literal["positional", "input", "keywords"]


@dataclass(frozen=True, slots=True)
class FunctionShape:
    """How a tool function takes its input.

    Every argument is passed by keyword. ``arguments="input"``: the function takes the
    validated value whole, as its one keyword in ``keywords`` (``input_hint`` is its
    annotation, ``None`` with an explicit schema). ``"keywords"``: it takes one keyword per
    property of ``input_hint``, a generated pydantic model whose fields are ``p0``, ``p1``,
    ... for ``keywords`` in order. ``context_parameter`` names the parameter that receives
    the :class:`ToolContext`, if any.
    """

    arguments: Arguments
    input_hint: Any
    output_hint: Any
    context_parameter: str | None
    description: str
    keywords: tuple[str, ...] = ()


def read_function(
    target: Callable[..., Any], tool_name: str, *, explicit_input: bool = False
) -> FunctionShape:
    """Read ``target``'s signature and docstring; ``INVALID_TOOL`` when it cannot be read
    (naming the parameter whose annotation cannot be resolved, if that is why),
    ``INVALID_TOOL_PARAMETER`` (naming the parameter) when a parameter has no annotation,
    a type with no JSON form, or a kind keywords cannot fill.

    With ``explicit_input`` (an ``input_schema=`` given), the function takes one input
    whole, whatever its annotation, and an optional context.
    """
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError) as error:
        raise _unreadable(target, error) from None
    hints = _type_hints(target, tool_name)
    function_name = getattr(target, "__name__", repr(target))
    docstring, parameter_docs = _read_docstring(target)
    description = bounded_description(docstring)  # the model reads it at every step
    output_hint = hints.get("return")
    # A ToolOutput is a value and its media parts: the value is any JSON.
    if output_hint in (None, type(None), Any, ToolOutput):
        output_hint = None
    inputs: list[inspect.Parameter] = []
    context_parameter: str | None = None
    for position, parameter in enumerate(signature.parameters.values()):
        hint = hints.get(parameter.name, _EMPTY)
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise _parameter_error(
                tool_name,
                parameter.name,
                f"*{parameter.name} or **{parameter.name} gives the model no schema; name "
                "each argument the tool takes.",
            )
        # Unannotated ``context`` after the input is the older spelling of the context.
        if _is_context(hint) or (hint is _EMPTY and parameter.name == "context" and position):
            if parameter.kind is parameter.POSITIONAL_ONLY:
                raise _parameter_error(
                    tool_name, parameter.name, "the context cannot be positional-only."
                )
            context_parameter = parameter.name
        else:
            inputs.append(parameter)
    for parameter in inputs:
        if parameter.kind is parameter.POSITIONAL_ONLY:
            raise _parameter_error(
                tool_name,
                parameter.name,
                "a tool receives its arguments as keywords, so none can be positional-only.",
            )
    whole = len(inputs) == 1 and (
        explicit_input or _is_whole_input(hints.get(inputs[0].name, _EMPTY))
    )
    if whole:
        hint = None if explicit_input else hints[inputs[0].name]
        return FunctionShape(
            "input", hint, output_hint, context_parameter, description, (inputs[0].name,)
        )
    if explicit_input:
        raise FevexConfigurationError(
            "INVALID_TOOL",
            f"Tool {tool_name}: with input_schema=, the function takes one input (and "
            f"optionally a context), not {len(inputs)}.",
        )
    model = _input_model(function_name, tool_name, inputs, hints, parameter_docs)
    keywords = tuple(parameter.name for parameter in inputs)
    return FunctionShape("keywords", model, output_hint, context_parameter, description, keywords)


def _type_hints(target: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    """``target``'s annotations, resolved; ``INVALID_TOOL`` naming the first parameter (or
    ``return``) whose annotation cannot be."""
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as error:  # resolving an annotation runs its code
        failure = error
    # Each annotation alone, in the function's namespace, to find the one that fails.
    namespace = getattr(inspect.unwrap(target), "__globals__", None)
    for name, annotation in inspect.get_annotations(target).items():
        alone = types.SimpleNamespace(__annotations__={name: annotation})
        try:
            typing.get_type_hints(alone, namespace, include_extras=True)
        except Exception as error:
            raise _unresolved(target, tool_name, name, error) from None
    raise _unreadable(target, failure) from None


def _unresolved(
    target: Callable[..., Any], tool_name: str, name: str, error: Exception
) -> FevexConfigurationError:
    function = getattr(target, "__qualname__", repr(target))
    which = "the return annotation" if name == "return" else f"parameter {name!r}"
    hint = (
        " A name in an annotation must exist in the function's module: under `from __future__ "
        "import annotations`, a type defined inside a function does not, so define it at "
        "module level."
        if isinstance(error, NameError)
        else ""
    )
    return FevexConfigurationError(
        "INVALID_TOOL",
        f"Tool {tool_name}: {which} of function {function} cannot be resolved "
        f"({type(error).__name__}: {error}).{hint}",
        details={"tool_name": tool_name, "function": function, "parameter": name},
    )


def _unreadable(target: Callable[..., Any], error: Exception) -> FevexConfigurationError:
    return FevexConfigurationError(
        "INVALID_TOOL", f"Cannot read the signature of {target!r}: {error}"
    )


def _is_context(hint: Any) -> bool:
    return hint is ToolContext or (
        typing.get_origin(hint) is typing.Annotated and typing.get_args(hint)[0] is ToolContext
    )


def _is_whole_input(hint: Any) -> bool:
    """Types whose schema is already an object: the function takes the value whole."""
    from pydantic import BaseModel

    base = typing.get_origin(hint) or hint
    if not isinstance(base, type):
        return False
    return (
        issubclass(base, BaseModel)
        or dataclasses.is_dataclass(base)
        or typing.is_typeddict(base)
        or issubclass(base, Mapping)
        or base is dict
    )


def _input_model(
    function_name: str,
    tool_name: str,
    parameters: list[inspect.Parameter],
    hints: Mapping[str, Any],
    parameter_docs: Mapping[str, str],
) -> Any:
    from pydantic import ConfigDict, Field, TypeAdapter, create_model
    from pydantic.errors import PydanticUserError
    from pydantic.fields import FieldInfo
    from pydantic_core import PydanticUndefined

    fields: dict[str, Any] = {}
    for index, parameter in enumerate(parameters):
        hint = hints.get(parameter.name, _EMPTY)
        if hint is _EMPTY:
            raise _parameter_error(
                tool_name,
                parameter.name,
                "it has no type annotation, so the model would be offered no schema for it; "
                "annotate it (`Any` accepts any JSON value).",
            )
        try:
            TypeAdapter(hint).json_schema()
        except (PydanticUserError, TypeError, ValueError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise _parameter_error(
                tool_name,
                parameter.name,
                f"its type {_type_name(hint)} has no JSON form the model could send"
                + (f" ({reason})" if reason else "")
                + "; use a JSON type (str, int, float, bool, None, lists, dicts, pydantic "
                "models, dataclasses, TypedDicts, enums, dates).",
            ) from None
        default = ... if parameter.default is _EMPTY else parameter.default
        described = FieldInfo.from_annotated_attribute(
            hint, PydanticUndefined if default is ... else default
        ).description
        extra: dict[str, Any] = {"alias": parameter.name}
        if described is None and parameter.name in parameter_docs:
            extra["description"] = parameter_docs[parameter.name]
        fields[f"p{index}"] = (Annotated[hint, Field(**extra)], default)
    return create_model(
        f"{function_name}_input",
        __config__=ConfigDict(extra="forbid", title=tool_name),
        **fields,
    )


def _read_docstring(target: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The description (the docstring without its sections) and each parameter's text."""
    text = inspect.cleandoc(target.__doc__ or "")
    if not text:
        return "", {}
    import docstring_parser

    try:
        parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:
        return text, {}
    if not parsed.meta:
        return text, {}
    documented = {
        param.arg_name: inspect.cleandoc(param.description)
        for param in parsed.params
        if param.description
    }
    parts = [part for part in (parsed.short_description, parsed.long_description) if part]
    return "\n\n".join(parts), documented


def _type_name(hint: Any) -> str:
    return hint.__qualname__ if isinstance(hint, type) else repr(hint)


def _parameter_error(tool_name: str, parameter: str, reason: str) -> FevexConfigurationError:
    return FevexConfigurationError(
        "INVALID_TOOL_PARAMETER",
        f"Tool {tool_name}: parameter {parameter!r} is refused: {reason}",
        details={"tool_name": tool_name, "parameter": parameter},
    )
