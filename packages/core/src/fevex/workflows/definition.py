"""Workflow definitions: a durable function with its input, output, event and limit
contracts, independent of any app that runs it."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from fevex._internal.names import is_valid_name
from fevex._internal.schema_check import check_schema
from fevex.agents import Limits
from fevex.errors import FevexConfigurationError
from fevex.workflows.step import StepFunction

__all__ = ["WorkflowDefinition", "define_workflow"]

# A workflow bounds only what it is given: every limit left out is unlimited.
UNLIMITED = Limits(max_steps=None, max_tool_calls=None, max_tool_retries=None)
# What a workflow counts itself; the rest of Limits bounds agent runs only.
WORKFLOW_LIMITS = ("max_steps", "max_tool_calls", "max_input_tokens", "max_output_tokens")


@dataclass(frozen=True, slots=True)
class WorkflowDefinition:
    """A workflow: ``run(step, input)`` replayed from the start on every resume and
    recovery. ``version`` names the replay contract: a run started on one version is only
    ever continued by an app that has that version. ``events`` maps each event the
    workflow may wait for to its payload schema (``None``: any JSON);
    ``require_actor`` names the events that must be sent with an actor. ``limits``
    bounds the run's steps (``max_steps``), tool steps (``max_tool_calls``) and the tokens
    its agent steps use (``max_input_tokens``, ``max_output_tokens``)."""

    name: str
    version: str
    run: StepFunction
    input_schema: Any = None
    output_schema: Any = None
    events: Mapping[str, Any] = field(default_factory=dict)
    require_actor: frozenset[str] = frozenset()
    limits: Limits = UNLIMITED

    def check(self) -> None:
        """Raise ``INVALID_WORKFLOW`` when a field holds a value its type does not allow."""
        if not is_valid_name(self.name):
            raise _invalid(f"Workflow name {self.name!r} must match [A-Za-z0-9_-]{{1,64}}.")
        if not isinstance(self.version, str) or not self.version:
            raise _invalid(f"Workflow {self.name}: version must be a non-empty string.")
        if not callable(self.run) or not inspect.iscoroutinefunction(self.run):
            raise _invalid(f"Workflow {self.name}: run must be an async function (step, input).")
        if not isinstance(self.events, Mapping) or not all(
            isinstance(name, str) and name for name in self.events
        ):
            raise _invalid(f"Workflow {self.name}: events must map event names to schemas.")
        unknown = sorted(set(self.require_actor) - set(self.events))
        if unknown:
            raise _invalid(
                f"Workflow {self.name}: require_actor names undeclared events: "
                f"{', '.join(unknown)}."
            )
        if not isinstance(self.limits, Limits):
            raise _invalid(f"Workflow {self.name}: limits must be Limits or a mapping.")
        try:
            self.limits.check()
        except FevexConfigurationError as error:
            raise _invalid(f"Workflow {self.name}: {error.message}") from None

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.version


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_WORKFLOW", message)


def _limits(name: str, limits: Limits | Mapping[str, int | None] | None) -> Limits:
    if limits is None:
        return UNLIMITED
    if isinstance(limits, Limits):
        return limits
    if not isinstance(limits, Mapping):
        raise _invalid(f"Workflow {name}: limits must be Limits or a mapping.")
    for key in limits:
        if key not in WORKFLOW_LIMITS:
            raise _invalid(
                f"Workflow {name}: {key!r} is not a workflow limit; the limits are "
                f"{', '.join(WORKFLOW_LIMITS)}."
            )
    try:
        return Limits(**{**{key: None for key in Limits.__slots__}, **limits})
    except TypeError as error:
        raise _invalid(f"Workflow {name}: {error}") from None


def _hints(function: Callable[..., Any], name: str) -> tuple[Any, Any]:
    """The input and output schemas the annotations give (``None``: any JSON)."""
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function, include_extras=True)
    except (TypeError, ValueError, NameError) as error:
        raise _invalid(f"Workflow {name}: cannot read the signature: {error}") from None
    positional = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) != 2:
        raise _invalid(
            f"Workflow {name}: the function takes (step, input), not "
            f"{len(positional)} positional parameters."
        )
    input_hint = hints.get(positional[1].name)
    output_hint = hints.get("return")
    return (
        None if input_hint is Any else input_hint,
        None if output_hint in (None, type(None), Any) else output_hint,
    )


@overload
def define_workflow(
    *,
    name: str,
    version: str = "1",
    input_schema: Any = None,
    output_schema: Any = None,
    events: Mapping[str, Any] | None = None,
    require_actor: Iterable[str] = (),
    limits: Limits | Mapping[str, int | None] | None = None,
    run: StepFunction,
) -> WorkflowDefinition: ...


@overload
def define_workflow(
    *,
    name: str,
    version: str = "1",
    input_schema: Any = None,
    output_schema: Any = None,
    events: Mapping[str, Any] | None = None,
    require_actor: Iterable[str] = (),
    limits: Limits | Mapping[str, int | None] | None = None,
    run: None = None,
) -> Callable[[StepFunction], WorkflowDefinition]: ...


def define_workflow(
    *,
    name: str,
    version: str = "1",
    input_schema: Any = None,
    output_schema: Any = None,
    events: Mapping[str, Any] | None = None,
    require_actor: Iterable[str] = (),
    limits: Limits | Mapping[str, int | None] | None = None,
    run: StepFunction | None = None,
) -> WorkflowDefinition | Callable[[StepFunction], WorkflowDefinition]:
    """Define a workflow, as ``@define_workflow(name=...)`` on ``async def f(step, input)``
    or as a call with ``run=``. The input and output schemas come from the function's
    annotations unless given (none, or ``Any``: any JSON). Schemas are compiled here: one
    fevex cannot validate with is refused at once with ``INVALID_WORKFLOW``."""
    if isinstance(require_actor, str):
        raise _invalid(f"Workflow {name!r}: require_actor must be a list of event names.")
    resolved_limits = _limits(name, limits)
    declared = dict(events or {})

    def build(function: StepFunction) -> WorkflowDefinition:
        if not callable(function):
            raise _invalid(f"Workflow {name!r}: define_workflow needs an async function.")
        input_hint, output_hint = _hints(function, name)
        definition = WorkflowDefinition(
            name=name,
            version=version,
            run=function,
            input_schema=input_schema if input_schema is not None else input_hint,
            output_schema=output_schema if output_schema is not None else output_hint,
            events=declared,
            require_actor=frozenset(require_actor),
            limits=resolved_limits,
        )
        definition.check()
        for what, schema in (
            ("input_schema", definition.input_schema),
            ("output_schema", definition.output_schema),
            *((f"event {event!r}", source) for event, source in declared.items()),
        ):
            if schema is not None:
                check_schema(schema, "INVALID_WORKFLOW", f"Workflow {name}: {what}")
        return definition

    return build if run is None else build(run)
