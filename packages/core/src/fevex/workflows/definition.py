"""Workflow definitions: a durable function with its input, output, event and limit
contracts, independent of any app that runs it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from fevex.agents import Limits
from fevex.errors import FevexConfigurationError
from fevex.workflows.durable_function import DurableFunctionKind
from fevex.workflows.step import StepFunction, WorkflowStep

__all__ = ["WorkflowDefinition", "define_workflow"]

# A workflow bounds only what it is given: every limit left out is unlimited.
UNLIMITED = Limits(max_steps=None, max_tool_calls=None, max_tool_retries=None)
# What a workflow counts itself; the rest of Limits bounds agent runs only.
WORKFLOW_LIMITS = (
    "max_steps",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    # Bounds of the run tree a root workflow starts (fevex.kits.children).
    "max_depth",
    "max_children",
    "max_concurrent_model_calls",
    "max_model_calls",
)
WORKFLOW = DurableFunctionKind("INVALID_WORKFLOW", "Workflow", "(step, input)")

InputT = TypeVar("InputT")
OutputT = TypeVar("OutputT")
InputT_co = TypeVar("InputT_co", covariant=True)
OutputT_co = TypeVar("OutputT_co", covariant=True)


@dataclass(frozen=True, slots=True)
class WorkflowDefinition(Generic[InputT_co, OutputT_co]):
    """A workflow, generic in its input and output (the annotations of its function):
    ``run(step, input)`` replayed from the start on every resume and
    recovery. ``version`` names the replay contract: a run started on one version is only
    ever continued by an app that has that version. ``events`` maps each event the
    workflow may wait for to its payload schema (``None``: any JSON);
    ``require_actor`` names the events that must be sent with an actor. ``limits``
    bounds the run's steps (``max_steps``), tool steps (``max_tool_calls``) and the tokens
    its agent steps use (``max_input_tokens``, ``max_output_tokens``); as the root of a
    run tree, the tree's bounds (``max_depth``, ``max_children``,
    ``max_concurrent_model_calls``, ``max_model_calls``: see ``Limits``)."""

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
        WORKFLOW.check_identity(self.name, self.version, self.run)
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
    return WORKFLOW.invalid(message)


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
    run: Callable[[WorkflowStep, InputT], Awaitable[OutputT]],
) -> WorkflowDefinition[InputT, OutputT]: ...


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
) -> Callable[
    [Callable[[WorkflowStep, InputT], Awaitable[OutputT]]], WorkflowDefinition[InputT, OutputT]
]: ...


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
) -> Any:
    """Define a workflow, as ``@define_workflow(name=...)`` on ``async def f(step, input)``
    or as a call with ``run=``. The input and output schemas come from the function's
    annotations unless given (none, or ``Any``: any JSON). Schemas are compiled here: one
    fevex cannot validate with is refused at once with ``INVALID_WORKFLOW``."""
    if isinstance(require_actor, str):
        raise _invalid(f"Workflow {name!r}: require_actor must be a list of event names.")
    resolved_limits = _limits(name, limits)
    declared = dict(events or {})

    def build(function: StepFunction) -> WorkflowDefinition[Any, Any]:
        input_hint, output_hint = WORKFLOW.annotated_schemas(function, name)
        definition: WorkflowDefinition[Any, Any] = WorkflowDefinition(
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
        WORKFLOW.check_schemas(
            name,
            (
                ("input_schema", definition.input_schema),
                ("output_schema", definition.output_schema),
                *((f"event {event!r}", source) for event, source in declared.items()),
            ),
        )
        return definition

    return WORKFLOW.define(run, build)
