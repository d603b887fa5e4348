"""Agent definitions: what an agent is, independent of any app that runs it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from fevex._ground.names import did_you_mean, is_valid_name
from fevex.errors import FevexConfigurationError
from fevex.schemas.schema_check import check_schema
from fevex.tools.definition import Approval, ToolDefinition

if TYPE_CHECKING:
    # Imported where a memory= is checked: an agent without memory never loads knowledge.
    from fevex.knowledge.memory_store import MemoryAccess

__all__ = ["AgentDefinition", "Limits", "define_agent"]

OutputT = TypeVar("OutputT")


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds of one agent run; ``None`` leaves a bound unlimited.

    Token budgets are cumulative over the run and checked from the usage models report;
    the remaining output budget is also sent to the model as a preventive cap.
    ``max_tool_retries`` is how many failed tool calls the run may hand back to the model
    for another try (a tool raising ``ToolRetry``, or one defined with
    ``errors_to_model``); 0 hands none back.

    The run-tree bounds are read from the ROOT run of a tree (a workflow's or a team's)
    when a group of child runs starts (:mod:`fevex.kits.children`): ``max_depth`` how
    deep such groups may nest (the root's children are at depth 1), ``max_children`` how
    many runs the whole tree may hold, ``max_concurrent_model_calls`` how many model calls
    the tree may have in flight at once, and ``max_model_calls`` how many model calls the
    tree may make, the budget the groups' reservations are set aside from.
    """

    max_steps: int | None = 8
    max_tool_calls: int | None = 16
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_tool_retries: int | None = 3
    max_depth: int | None = None
    max_children: int | None = None
    max_concurrent_model_calls: int | None = None
    max_model_calls: int | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, agent: str | None = None) -> Limits:
        """Limits from a mapping such as ``{"max_steps": 4}``; ``INVALID_AGENT`` for a key
        that is not a limit (the message names the valid ones) or a value out of range.
        ``agent`` names the agent they are for in the message."""
        where = "" if agent is None else f"Agent {agent!r}: "
        for key in values:
            if key not in Limits.__slots__:
                hint = did_you_mean(key, Limits.__slots__) if isinstance(key, str) else ""
                raise FevexConfigurationError(
                    "INVALID_AGENT",
                    f"{where}{key!r} is not a limit.{hint} The limits are {_LIMIT_NAMES}.",
                )
        limits = cls(**values)
        try:
            limits.check()
        except FevexConfigurationError as error:
            raise FevexConfigurationError(error.code, f"{where}{error.message}") from None
        return limits

    def check(self) -> None:
        for name in Limits.__slots__:
            value = getattr(self, name)
            lowest = 0 if name == "max_tool_retries" else 1
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < lowest
            ):
                kind = "a positive integer" if lowest else "an integer of 0 or more"
                raise FevexConfigurationError(
                    "INVALID_AGENT",
                    f"Limit {name} must be {kind} or None, not {value!r}. "
                    f"The limits are {_LIMIT_NAMES}.",
                )

    def narrowed(self, other: Limits | None) -> Limits:
        """Each bound the smaller of the two (``None``: unbounded): a request, a workflow's
        remaining budget or a stored run can narrow these limits, never widen them."""
        if other is None:
            return self
        values = {}
        for name in Limits.__slots__:
            mine, theirs = getattr(self, name), getattr(other, name)
            values[name] = theirs if mine is None else mine if theirs is None else min(mine, theirs)
        return Limits(**values)

    def to_json(self) -> dict[str, int | None]:
        return {name: getattr(self, name) for name in Limits.__slots__}


_LIMIT_NAMES = ", ".join(Limits.__slots__)
DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class AgentDefinition(Generic[OutputT]):
    """An agent: its name, instructions, model reference, tool names, input and output
    schemas, limits and model options. ``model`` is a key of the app's ``models`` mapping
    or a ``provider:model`` string resolved through plugins; ``None`` means ``"default"``.
    With an ``input_schema``, a run's input is a value of that schema (validated and made
    JSON before the run is created) and reaches the model as JSON text.

    ``OutputT`` is the type of a run's validated output: the ``output_schema`` type, or
    ``str`` without one; ``app.run_agent(definition, ...)`` returns a
    ``RunResult[OutputT]``."""

    name: str
    instructions: str
    model: str | None = None
    tools: tuple[str, ...] = ()
    output_schema: Any = None
    limits: Limits = DEFAULT_LIMITS
    model_options: Mapping[str, Any] = field(default_factory=dict)
    description: str | None = None
    input_schema: Any = None
    # Knowledge: skill and context provider names, memory access, and a sandbox whose
    # tools the agent gets (each call subject to sandbox_approval).
    skills: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    memory: MemoryAccess | None = None
    sandbox: Any = None
    sandbox_approval: Approval = "never"
    # Tools listed as objects rather than names (their names are in ``tools`` too): the
    # app registers them as if they were in its own ``tools=``.
    tool_definitions: tuple[ToolDefinition[Any, Any], ...] = ()

    def check(self) -> None:
        """Raise ``INVALID_AGENT`` when a field holds a value its type does not allow."""
        if not is_valid_name(self.name):
            raise _invalid(f"Agent name {self.name!r} must match [A-Za-z0-9_-]{{1,64}}.")
        if not isinstance(self.instructions, str):
            raise _invalid(f"Agent {self.name}: instructions must be a string.")
        if self.model is not None and (not isinstance(self.model, str) or not self.model):
            raise _invalid(f"Agent {self.name}: model must be a non-empty string or None.")
        if not isinstance(self.tools, tuple) or not all(isinstance(t, str) for t in self.tools):
            raise _invalid(f"Agent {self.name}: tools must be tool names.")
        if not all(
            isinstance(tool, ToolDefinition) and tool.name in self.tools
            for tool in self.tool_definitions
        ):
            raise _invalid(f"Agent {self.name}: tool_definitions must be tools it lists.")
        if not isinstance(self.limits, Limits):
            raise _invalid(f"Agent {self.name}: limits must be a Limits value.")
        self.limits.check()
        if not isinstance(self.model_options, Mapping):
            raise _invalid(f"Agent {self.name}: model_options must be a mapping.")
        self._check_knowledge()

    def _check_knowledge(self) -> None:
        for field_name in ("skills", "context"):
            names = getattr(self, field_name)
            if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
                raise _invalid(f"Agent {self.name}: {field_name} must be a list of names.")
        if self.memory is not None:
            from fevex.knowledge.memory_store import MemoryAccess

            if not isinstance(self.memory, MemoryAccess):
                raise _invalid(f"Agent {self.name}: memory must be a MemoryAccess value.")
            try:
                self.memory.check()
            except ValueError as error:
                raise _invalid(f"Agent {self.name}: memory: {error}.") from None
        if self.sandbox is not None and not all(
            callable(getattr(self.sandbox, method, None))
            for method in ("run_command", "read_file", "write_file")
        ):
            raise _invalid(
                f"Agent {self.name}: sandbox must be a Sandbox (run_command, read_file, "
                "write_file)."
            )
        if self.sandbox_approval not in ("never", "required"):
            raise _invalid(f"Agent {self.name}: sandbox_approval must be 'never' or 'required'.")


def _names(names: Iterable[str], agent: str, field_name: str) -> tuple[str, ...]:
    if isinstance(names, str):
        raise _invalid(f"Agent {agent!r}: {field_name} must be a list of names, not a string.")
    try:
        return tuple(names)
    except TypeError:
        raise _invalid(f"Agent {agent!r}: {field_name} must be a list of names.") from None


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_AGENT", message)


@overload
def define_agent(
    *,
    name: str,
    instructions: str,
    model: str | None = None,
    tools: Iterable[str | ToolDefinition[Any, Any]] = (),
    output_schema: type[OutputT],
    limits: Limits | Mapping[str, int | None] | None = None,
    model_options: Mapping[str, Any] | None = None,
    description: str | None = None,
    input_schema: Any = None,
    skills: Iterable[str] = (),
    context: Iterable[str] = (),
    memory: MemoryAccess | None = None,
    sandbox: Any = None,
    sandbox_approval: Approval = "never",
) -> AgentDefinition[OutputT]: ...


@overload
def define_agent(
    *,
    name: str,
    instructions: str,
    model: str | None = None,
    tools: Iterable[str | ToolDefinition[Any, Any]] = (),
    output_schema: None = None,
    limits: Limits | Mapping[str, int | None] | None = None,
    model_options: Mapping[str, Any] | None = None,
    description: str | None = None,
    input_schema: Any = None,
    skills: Iterable[str] = (),
    context: Iterable[str] = (),
    memory: MemoryAccess | None = None,
    sandbox: Any = None,
    sandbox_approval: Approval = "never",
) -> AgentDefinition[str]: ...


@overload
def define_agent(
    *,
    name: str,
    instructions: str,
    model: str | None = None,
    tools: Iterable[str | ToolDefinition[Any, Any]] = (),
    output_schema: Any = None,
    limits: Limits | Mapping[str, int | None] | None = None,
    model_options: Mapping[str, Any] | None = None,
    description: str | None = None,
    input_schema: Any = None,
    skills: Iterable[str] = (),
    context: Iterable[str] = (),
    memory: MemoryAccess | None = None,
    sandbox: Any = None,
    sandbox_approval: Approval = "never",
) -> AgentDefinition[Any]: ...


def define_agent(
    *,
    name: str,
    instructions: str,
    model: str | None = None,
    tools: Iterable[str | ToolDefinition[Any, Any]] = (),
    output_schema: Any = None,
    limits: Limits | Mapping[str, int | None] | None = None,
    model_options: Mapping[str, Any] | None = None,
    description: str | None = None,
    input_schema: Any = None,
    skills: Iterable[str] = (),
    context: Iterable[str] = (),
    memory: MemoryAccess | None = None,
    sandbox: Any = None,
    sandbox_approval: Approval = "never",
) -> AgentDefinition[Any]:
    """Define an agent. Lists and mappings are copied, so later changes by the caller do
    not change the definition. ``tools`` lists tool names or the tools themselves
    (``tools=[get_account]``), which the app then registers: the same tool may be listed by
    several agents and the app, but two different tools of one name are
    ``DUPLICATE_TOOL``. ``output_schema`` and ``input_schema`` are compiled here:
    one fevex cannot validate with is refused at once with ``INVALID_AGENT``.

    The definition is typed by its output: ``define_agent(..., output_schema=Answer)`` is an
    ``AgentDefinition[Answer]``, one without an output schema an ``AgentDefinition[str]``."""
    if isinstance(tools, str):
        raise _invalid(f"Agent {name!r}: tools must be a list of tool names, not a string.")
    if limits is None:
        resolved_limits = DEFAULT_LIMITS
    elif isinstance(limits, Limits):
        resolved_limits = limits
    elif isinstance(limits, Mapping):
        resolved_limits = Limits.from_mapping(limits, agent=name)
    else:
        raise _invalid(f"Agent {name!r}: limits must be Limits or a mapping.")
    try:
        listed_tools = tuple(tools)
    except TypeError:
        raise _invalid(f"Agent {name!r}: tools must be a list of tool names.") from None
    tool_names: list[str] = []
    tool_definitions: list[ToolDefinition[Any, Any]] = []
    for tool in listed_tools:
        if isinstance(tool, ToolDefinition):
            tool_definitions.append(tool)
            tool_names.append(tool.name)
        elif isinstance(tool, str):
            tool_names.append(tool)
        else:
            raise _invalid(
                f"Agent {name!r}: tools must be tool names or tools (define_tool), not {tool!r}."
            )
    definition: AgentDefinition[Any] = AgentDefinition(
        name=name,
        instructions=instructions,
        model=model,
        tools=tuple(tool_names),
        output_schema=output_schema,
        limits=resolved_limits,
        model_options=dict(model_options) if model_options else {},
        description=description,
        input_schema=input_schema,
        skills=_names(skills, name, "skills"),
        context=_names(context, name, "context"),
        memory=memory,
        sandbox=sandbox,
        sandbox_approval=sandbox_approval,
        tool_definitions=tuple(tool_definitions),
    )
    definition.check()
    if output_schema is not None:
        check_schema(output_schema, "INVALID_AGENT", f"Agent {name}: output_schema")
    if input_schema is not None:
        check_schema(input_schema, "INVALID_AGENT", f"Agent {name}: input_schema")
    return definition
