"""Checking what ``create_fevex`` receives and freezing it into a composition.

Every registered entity is checked here, including values built without ``define_*`` or
changed after definition. Every problem found is reported at once, each with the code of
its entity, in one ``FevexConfigurationError`` (its ``problems``). The app keeps shallow
copies, so the caller's containers can change afterwards without reconfiguring it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fevex._ground.names import did_you_mean
from fevex.agents import AgentDefinition
from fevex.errors import FevexConfigurationError
from fevex.events.cost import CostCalculator
from fevex.models import ToolSpec
from fevex.schemas.schema import CompiledSchema, compile_schema
from fevex.schemas.schema_check import schema_problem
from fevex.tools import ToolDefinition
from fevex.tools.connection import SEPARATOR, ConnectionDefinition

if TYPE_CHECKING:
    # Imported when an app has workflows or teams (see _workflows, _teams): an agent app
    # never loads them.
    from fevex.teams.definition import TeamDefinition
    from fevex.workflows.definition import WorkflowDefinition

DEFAULT_MODEL_KEY = "default"


@dataclass(slots=True)
class PreparedTool:
    definition: ToolDefinition[Any, Any]
    input_schema: CompiledSchema
    output_schema: CompiledSchema | None

    def spec(self) -> ToolSpec:
        return ToolSpec(
            self.definition.name, self.definition.description, self.input_schema.json_schema()
        )


@dataclass(slots=True)
class PreparedAgent:
    definition: AgentDefinition[Any]
    model: Any
    tools: dict[str, PreparedTool]
    output_schema: CompiledSchema | None
    # Connection name -> the remote tool names the agent uses (checked against allowlists).
    connection_tools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    input_schema: CompiledSchema | None = None
    # Skills, context providers and memory (an AgentKnowledge, see knowledge_context.py).
    knowledge: Any = None
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


@dataclass(slots=True)
class PreparedWorkflow:
    definition: WorkflowDefinition[Any, Any]
    input_schema: CompiledSchema | None
    output_schema: CompiledSchema | None
    events: dict[str, CompiledSchema | None]


@dataclass(slots=True)
class PreparedTeam:
    definition: TeamDefinition[Any, Any]
    input_schema: CompiledSchema | None
    output_schema: CompiledSchema | None


@dataclass(frozen=True, slots=True)
class Composition:
    agents: Mapping[str, PreparedAgent]
    observers: tuple[Callable[..., Any], ...]
    policies: tuple[Callable[..., Any], ...] = ()
    credentials: Any = None
    connections: Mapping[str, ConnectionDefinition] = field(default_factory=dict)
    # Models built from provider:model references: the app owns and closes them.
    owned_models: tuple[Any, ...] = ()
    tools: Mapping[str, PreparedTool] = field(default_factory=dict)
    # (name, version) -> workflow; several versions of one name may be registered.
    workflows: Mapping[tuple[str, str], PreparedWorkflow] = field(default_factory=dict)
    # (name, version) -> team; its supervisor and members are registered agents.
    teams: Mapping[tuple[str, str], PreparedTeam] = field(default_factory=dict)
    # Prices each model step live (Observability.calculate_cost).
    calculate_cost: CostCalculator | None = None
    # Sees each exception a tool raised as raised (create_fevex(on_tool_exception=...)).
    on_tool_exception: Callable[..., Any] | None = None
    # Every model by its key (those plugins built too): a tool's completion names one.
    models: Mapping[str, Any] = field(default_factory=dict)


def _config_error(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_CONFIG", message)


class Problems:
    """Every problem a composition has, so that one error reports them all."""

    def __init__(self) -> None:
        self.found: list[FevexConfigurationError] = []

    def add(self, error: FevexConfigurationError) -> None:
        # An error that already reports several problems adds each of them.
        self.found.extend(error.problems)

    @contextmanager
    def collect(self) -> Iterator[None]:
        """Record the configuration error the block raises, and go on after it."""
        try:
            yield
        except FevexConfigurationError as error:
            self.add(error)

    def raise_if_any(self) -> None:
        if self.found:
            raise FevexConfigurationError.of(self.found)


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
        raise FevexConfigurationError(code, f"{owner}: {schema_problem(source, error)}") from error


def compose(
    *,
    models: Any,
    agents: Any,
    tools: Any,
    on_event: Any,
    policies: Any = (),
    credentials: Any = None,
    connections: Any = (),
    workflows: Any = (),
    teams: Any = (),
    problems: Problems | None = None,
    on_tool_exception: Any = None,
) -> Composition:
    """Check everything and freeze it; every problem found is raised at once, in one
    ``FevexConfigurationError`` (see ``problems``), or added to ``problems`` when given."""
    own = problems is None
    found = Problems() if problems is None else problems
    model_table = _models(models, found)
    tool_table = _tools(tools, found)
    _agent_tools(agents, tool_table, found)
    connection_table = _connections(connections, tool_table, found)
    agent_table = _agents(agents, model_table, tool_table, connection_table, found)
    workflow_table = _workflows(workflows, found)
    team_table = _teams(teams, agent_table, found)

    observers: tuple[Callable[..., Any], ...] = ()
    with found.collect():
        if callable(on_event):
            observers = (on_event,)
        elif on_event is not None:
            observers = tuple(_as_sequence(on_event, "on_event"))
            if not all(callable(observer) for observer in observers):
                raise _config_error("on_event must be a callable or a list of callables.")
    policy_list: tuple[Any, ...] = ()
    with found.collect():
        policy_list = tuple(_as_sequence(policies, "policies"))
    for policy in policy_list:
        if not callable(policy):
            found.add(
                FevexConfigurationError(
                    "INVALID_POLICY", f"Policy {policy!r} is not callable; a policy is a function."
                )
            )
    if credentials is not None and not (isinstance(credentials, Mapping) or callable(credentials)):
        found.add(
            _config_error("credentials must be a mapping or a function (name, context) -> str.")
        )
    if on_tool_exception is not None and not callable(on_tool_exception):
        found.add(
            _config_error("on_tool_exception must be a function (exception, context) -> None.")
        )
    if own:
        found.raise_if_any()
    if isinstance(credentials, Mapping):
        credentials = dict(credentials)
    given = models if isinstance(models, Mapping) else {}
    owned = tuple(model for key, model in model_table.items() if key not in given)
    return Composition(
        agent_table,
        observers,
        policy_list,
        credentials,
        connection_table,
        owned,
        tool_table,
        workflow_table,
        team_table,
        on_tool_exception=on_tool_exception,
        models=model_table,
    )


def _workflows(workflows: Any, found: Problems) -> dict[tuple[str, str], PreparedWorkflow]:
    table: dict[tuple[str, str], PreparedWorkflow] = {}
    listed: Sequence[Any] = ()
    with found.collect():
        listed = _as_sequence(workflows, "workflows")
    if not listed:
        return table
    from fevex.workflows.definition import WorkflowDefinition

    for workflow in listed:
        with found.collect():
            if not isinstance(workflow, WorkflowDefinition):
                raise FevexConfigurationError(
                    "INVALID_WORKFLOW",
                    f"{workflow!r} is not a workflow; define it with define_workflow.",
                )
            workflow.check()
            if workflow.key in table:
                raise FevexConfigurationError(
                    "DUPLICATE_WORKFLOW",
                    f"Workflow {workflow.name!r} version {workflow.version!r} is defined twice.",
                )
            owner = f"Workflow {workflow.name}"
            table[workflow.key] = PreparedWorkflow(
                workflow,
                _optional_schema(workflow.input_schema, owner, "input_schema"),
                _optional_schema(workflow.output_schema, owner, "output_schema"),
                {
                    name: _optional_schema(source, owner, f"event {name!r}")
                    for name, source in workflow.events.items()
                },
            )
    return table


def _teams(
    teams: Any, agents: Mapping[str, PreparedAgent], found: Problems
) -> dict[tuple[str, str], PreparedTeam]:
    table: dict[tuple[str, str], PreparedTeam] = {}
    listed: Sequence[Any] = ()
    with found.collect():
        listed = _as_sequence(teams, "teams")
    if not listed:
        return table
    from fevex.teams.definition import TeamDefinition

    for team in listed:
        with found.collect():
            if not isinstance(team, TeamDefinition):
                raise FevexConfigurationError(
                    "INVALID_TEAM", f"{team!r} is not a team; define it with define_team."
                )
            team.check()
            unknown = sorted(name for name in team.agents if name not in agents)
            if unknown:
                raise FevexConfigurationError(
                    "INVALID_TEAM",
                    f"Team {team.name}: not registered agents: {', '.join(unknown)}; pass "
                    "its supervisor and every member in create_fevex(agents=[...]).",
                )
            if team.key in table:
                raise FevexConfigurationError(
                    "DUPLICATE_TEAM",
                    f"Team {team.name!r} version {team.version!r} is defined twice.",
                )
            owner = f"Team {team.name}"
            table[team.key] = PreparedTeam(
                team,
                _team_schema(team.input_schema, owner, "input_schema"),
                _team_schema(team.output_schema, owner, "output_schema"),
            )
    return table


def _team_schema(source: Any, owner: str, what: str) -> CompiledSchema | None:
    return None if source is None else _compile(source, "INVALID_TEAM", f"{owner}: {what}")


def _optional_schema(source: Any, owner: str, what: str) -> CompiledSchema | None:
    return None if source is None else _compile(source, "INVALID_WORKFLOW", f"{owner}: {what}")


def _models(models: Any, found: Problems) -> dict[str, Any]:
    if models is None:
        return {}
    if not isinstance(models, Mapping):
        found.add(_config_error(f"models must be a mapping of names to models, not {models!r}."))
        return {}
    model_table: dict[str, Any] = {}
    for key, model in models.items():
        if not isinstance(key, str) or not key:
            found.add(
                FevexConfigurationError("INVALID_MODEL", f"Model key {key!r} must be a string.")
            )
        elif not callable(getattr(model, "stream", None)):
            found.add(
                FevexConfigurationError(
                    "INVALID_MODEL", f"Model {key!r} has no stream(input) method."
                )
            )
        else:
            model_table[key] = model
    return model_table


def _tools(tools: Any, found: Problems) -> dict[str, PreparedTool]:
    tool_table: dict[str, PreparedTool] = {}
    listed: Sequence[Any] = ()
    with found.collect():
        listed = _as_sequence(tools, "tools")
    for tool in listed:
        with found.collect():
            if not isinstance(tool, ToolDefinition):
                raise FevexConfigurationError(
                    "INVALID_TOOL", f"{tool!r} is not a tool; define it with define_tool."
                )
            tool.check()
            if tool.name in tool_table:
                raise FevexConfigurationError(
                    "DUPLICATE_TOOL", f"Tool {tool.name!r} is defined twice."
                )
            tool_table[tool.name] = PreparedTool(
                tool,
                _compile(tool.input_schema, "INVALID_TOOL", f"Tool {tool.name}: input_schema"),
                None
                if tool.output_schema is None
                else _compile(
                    tool.output_schema, "INVALID_TOOL", f"Tool {tool.name}: output_schema"
                ),
            )
    return tool_table


def _agent_tools(agents: Any, tool_table: dict[str, PreparedTool], found: Problems) -> None:
    """Register the tools agents list as objects: the same tool may be listed by several
    agents and by the app, but two different tools of one name cannot both be meant."""
    if not isinstance(agents, Sequence | set) or isinstance(agents, str | bytes):
        return  # refused by _agents
    for agent in agents:
        if not isinstance(agent, AgentDefinition):
            continue
        for tool in agent.tool_definitions:
            with found.collect():
                registered = tool_table.get(tool.name)
                if registered is not None:
                    if registered.definition is tool or registered.definition == tool:
                        continue
                    raise FevexConfigurationError(
                        "DUPLICATE_TOOL",
                        f"Agent {agent.name} lists a tool {tool.name!r}, but another tool of "
                        "that name is already registered; give one of them another name.",
                    )
                tool_table.update(_tools([tool], found))


def _connections(
    connections: Any, tool_table: Mapping[str, PreparedTool], found: Problems
) -> dict[str, ConnectionDefinition]:
    connection_table: dict[str, ConnectionDefinition] = {}
    listed: Sequence[Any] = ()
    with found.collect():
        listed = _as_sequence(connections, "connections")
    for connection in listed:
        with found.collect():
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
                        f"Tool {connection.tool_name(remote_name)!r} is both defined and "
                        f"exposed by connection {connection.name}.",
                    )
            connection_table[connection.name] = connection
    return connection_table


def _agents(
    agents: Any,
    model_table: dict[str, Any],
    tool_table: Mapping[str, PreparedTool],
    connection_table: Mapping[str, ConnectionDefinition],
    found: Problems,
) -> dict[str, PreparedAgent]:
    agent_table: dict[str, PreparedAgent] = {}
    listed: Sequence[Any] = ()
    with found.collect():
        listed = _as_sequence(agents, "agents")
    names: set[str] = set()
    for agent in listed:
        with found.collect():
            if not isinstance(agent, AgentDefinition):
                raise FevexConfigurationError(
                    "INVALID_AGENT", f"{agent!r} is not an agent; define it with define_agent."
                )
            agent.check()
            if agent.name in names:
                raise FevexConfigurationError(
                    "DUPLICATE_AGENT", f"Agent {agent.name!r} is defined twice."
                )
            names.add(agent.name)
            prepared = _agent(agent, model_table, tool_table, connection_table, found)
            if prepared is not None:
                agent_table[agent.name] = prepared
    return agent_table


def _agent(
    agent: AgentDefinition[Any],
    model_table: dict[str, Any],
    tool_table: Mapping[str, PreparedTool],
    connection_table: Mapping[str, ConnectionDefinition],
    found: Problems,
) -> PreparedAgent | None:
    """The agent prepared, or ``None`` after adding each of its problems to ``found``."""
    before = len(found.found)
    agent_tools: dict[str, PreparedTool] = {}
    remote: dict[str, list[str]] = {}
    for name in agent.tools:
        if name in tool_table:
            agent_tools[name] = tool_table[name]
            continue
        connection_name, separator, remote_name = name.partition(SEPARATOR)
        connection = connection_table.get(connection_name)
        if not separator or connection is None or not connection.exposes(remote_name):
            found.add(
                FevexConfigurationError(
                    "MISSING_TOOL",
                    f"Agent {agent.name} uses tool {name!r}, which is not defined."
                    + did_you_mean(name, tool_table),
                )
            )
            continue
        remote.setdefault(connection_name, []).append(remote_name)
    model: Any = None
    output_schema: CompiledSchema | None = None
    input_schema: CompiledSchema | None = None
    with found.collect():
        model = _model_for(agent, model_table)
    with found.collect():
        if agent.output_schema is not None:
            output_schema = _compile(
                agent.output_schema, "INVALID_AGENT", f"Agent {agent.name}: output_schema"
            )
    with found.collect():
        if agent.input_schema is not None:
            input_schema = _compile(
                agent.input_schema, "INVALID_AGENT", f"Agent {agent.name}: input_schema"
            )
    if len(found.found) > before:
        return None
    return PreparedAgent(
        agent,
        model,
        agent_tools,
        output_schema,
        {name: tuple(names) for name, names in remote.items()},
        input_schema,
    )


def _model_for(agent: AgentDefinition[Any], models: dict[str, Any]) -> Any:
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
        "(pass models={...} or name a plugin model as 'provider:model')."
        + did_you_mean(reference, models),
    )
