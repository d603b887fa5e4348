"""Checking what ``create_fevex`` receives and freezing it into a composition.

Every registered entity is checked here, including values built without ``define_*`` or
changed after definition, and each problem raises ``FevexConfigurationError`` with the
code of its entity. The app keeps shallow copies, so the caller's containers can change
afterwards without reconfiguring it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fevex.agents import AgentDefinition
from fevex.errors import FevexConfigurationError
from fevex.models import ToolSpec
from fevex.schemas.schema import CompiledSchema, compile_schema
from fevex.tools import ToolDefinition
from fevex.tools.connection import SEPARATOR, ConnectionDefinition

DEFAULT_MODEL_KEY = "default"


@dataclass(slots=True)
class PreparedTool:
    definition: ToolDefinition
    input_schema: CompiledSchema
    output_schema: CompiledSchema | None

    def spec(self) -> ToolSpec:
        return ToolSpec(
            self.definition.name, self.definition.description, self.input_schema.json_schema()
        )


@dataclass(slots=True)
class PreparedAgent:
    definition: AgentDefinition
    model: Any
    tools: dict[str, PreparedTool]
    output_schema: CompiledSchema | None
    # Connection name -> the remote tool names the agent uses (checked against allowlists).
    connection_tools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    input_schema: CompiledSchema | None = None
    _specs: tuple[ToolSpec, ...] | None = None
    _output_json_schema: dict[str, Any] | None = None

    def model_boundary(self) -> tuple[tuple[ToolSpec, ...], dict[str, Any] | None]:
        """Specs of the agent's own tools and the output JSON Schema;
        ``SCHEMA_NOT_TRANSPORTABLE`` when one cannot be described. Built once and kept."""
        if self._specs is None:
            specs = tuple(tool.spec() for tool in self.tools.values())
            if self.output_schema is not None:
                self._output_json_schema = self.output_schema.json_schema()
            self._specs = specs
        return self._specs, self._output_json_schema


@dataclass(frozen=True, slots=True)
class Composition:
    agents: Mapping[str, PreparedAgent]
    observers: tuple[Callable[..., Any], ...]
    policies: tuple[Callable[..., Any], ...] = ()
    credentials: Any = None
    connections: Mapping[str, ConnectionDefinition] = field(default_factory=dict)
    # Models built from provider:model references: the app owns and closes them.
    owned_models: tuple[Any, ...] = ()


def _config_error(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_CONFIG", message)


def _as_sequence(value: Any, what: str) -> Sequence[Any]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence | set):
        raise _config_error(f"{what} must be a list, not {type(value).__name__}.")
    return tuple(value)


def _compile(source: Any, code: str, owner: str) -> CompiledSchema:
    try:
        return compile_schema(source)
    except Exception as error:
        raise FevexConfigurationError(code, f"{owner}: invalid schema: {error}") from error


def compose(
    *,
    models: Any,
    agents: Any,
    tools: Any,
    on_event: Any,
    policies: Any = (),
    credentials: Any = None,
    connections: Any = (),
) -> Composition:
    if models is None:
        models = {}
    if not isinstance(models, Mapping):
        raise _config_error(f"models must be a mapping of names to models, not {models!r}.")
    model_table: dict[str, Any] = {}
    for key, model in models.items():
        if not isinstance(key, str) or not key:
            raise FevexConfigurationError("INVALID_MODEL", f"Model key {key!r} must be a string.")
        if not callable(getattr(model, "stream", None)):
            raise FevexConfigurationError(
                "INVALID_MODEL", f"Model {key!r} has no stream(input) method."
            )
        model_table[key] = model

    tool_table: dict[str, PreparedTool] = {}
    for tool in _as_sequence(tools, "tools"):
        if not isinstance(tool, ToolDefinition):
            raise FevexConfigurationError(
                "INVALID_TOOL", f"{tool!r} is not a tool; define it with define_tool."
            )
        tool.check()
        if tool.name in tool_table:
            raise FevexConfigurationError("DUPLICATE_TOOL", f"Tool {tool.name!r} is defined twice.")
        tool_table[tool.name] = PreparedTool(
            tool,
            _compile(tool.input_schema, "INVALID_TOOL", f"Tool {tool.name}"),
            None
            if tool.output_schema is None
            else _compile(tool.output_schema, "INVALID_TOOL", f"Tool {tool.name}"),
        )

    connection_table: dict[str, ConnectionDefinition] = {}
    for connection in _as_sequence(connections, "connections"):
        if not isinstance(connection, ConnectionDefinition):
            raise FevexConfigurationError(
                "INVALID_CONNECTION",
                f"{connection!r} is not a connection; define it with define_connection.",
            )
        connection.check()
        if connection.name in connection_table:
            # Two connections of one name expose colliding <connection>__<tool> names.
            raise FevexConfigurationError(
                "DUPLICATE_TOOL", f"Connection {connection.name!r} is defined twice."
            )
        for remote_name in connection.allowlist or ():
            if connection.tool_name(remote_name) in tool_table:
                raise FevexConfigurationError(
                    "DUPLICATE_TOOL",
                    f"Tool {connection.tool_name(remote_name)!r} is both defined and exposed "
                    f"by connection {connection.name}.",
                )
        connection_table[connection.name] = connection

    agent_table: dict[str, PreparedAgent] = {}
    for agent in _as_sequence(agents, "agents"):
        if not isinstance(agent, AgentDefinition):
            raise FevexConfigurationError(
                "INVALID_AGENT", f"{agent!r} is not an agent; define it with define_agent."
            )
        agent.check()
        if agent.name in agent_table:
            raise FevexConfigurationError(
                "DUPLICATE_AGENT", f"Agent {agent.name!r} is defined twice."
            )
        agent_tools = {}
        remote: dict[str, list[str]] = {}
        for name in agent.tools:
            if name in tool_table:
                agent_tools[name] = tool_table[name]
                continue
            connection_name, separator, remote_name = name.partition(SEPARATOR)
            connection = connection_table.get(connection_name)
            if not separator or connection is None or not connection.exposes(remote_name):
                raise FevexConfigurationError(
                    "MISSING_TOOL", f"Agent {agent.name} uses tool {name!r}, which is not defined."
                )
            remote.setdefault(connection_name, []).append(remote_name)
        agent_table[agent.name] = PreparedAgent(
            agent,
            _model_for(agent, model_table),
            agent_tools,
            None
            if agent.output_schema is None
            else _compile(agent.output_schema, "INVALID_AGENT", f"Agent {agent.name}"),
            {name: tuple(names) for name, names in remote.items()},
            None
            if agent.input_schema is None
            else _compile(agent.input_schema, "INVALID_AGENT", f"Agent {agent.name}"),
        )

    if on_event is None:
        observers: tuple[Callable[..., Any], ...] = ()
    elif callable(on_event):
        observers = (on_event,)
    else:
        observers = tuple(_as_sequence(on_event, "on_event"))
        if not all(callable(observer) for observer in observers):
            raise _config_error("on_event must be a callable or a list of callables.")
    policy_list = tuple(_as_sequence(policies, "policies"))
    for policy in policy_list:
        if not callable(policy):
            raise FevexConfigurationError(
                "INVALID_POLICY", f"Policy {policy!r} is not callable; a policy is a function."
            )
    if credentials is not None and not (isinstance(credentials, Mapping) or callable(credentials)):
        raise _config_error("credentials must be a mapping or a function (name, context) -> str.")
    if isinstance(credentials, Mapping):
        credentials = dict(credentials)
    owned = tuple(model for key, model in model_table.items() if key not in models)
    return Composition(agent_table, observers, policy_list, credentials, connection_table, owned)


def _model_for(agent: AgentDefinition, models: dict[str, Any]) -> Any:
    reference = agent.model or DEFAULT_MODEL_KEY
    if reference in models:
        return models[reference]
    if ":" in reference:
        # Imported here: plugin discovery (pluggy, entry points) is paid only when used.
        from fevex.plugins.discovery import resolve_model

        model = resolve_model(reference)
        if not callable(getattr(model, "stream", None)):
            raise FevexConfigurationError(
                "INVALID_MODEL", f"The plugin model {reference!r} has no stream(input) method."
            )
        models[reference] = model
        return model
    raise FevexConfigurationError(
        "MISSING_MODEL",
        f"Agent {agent.name} uses model {reference!r}, which is not in models "
        "(pass models={...} or name a plugin model as 'provider:model').",
    )
