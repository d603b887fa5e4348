"""create_fevex validates the whole composition, one stable code per problem."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    FevexConfigurationError,
    Limits,
    ToolContext,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.agents import AgentDefinition
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel


class Query(BaseModel):
    q: str


@define_tool(name="search", description="Search.")
async def search(query: Query) -> str:
    return query.q


def agent(**overrides: Any) -> AgentDefinition:
    fields: dict[str, Any] = {"name": "support", "instructions": "Help.", "tools": ["search"]}
    fields.update(overrides)
    return define_agent(**fields)


def compose(**overrides: Any) -> Any:
    composition: dict[str, Any] = {
        "models": {"default": FakeModel()},
        "agents": [agent()],
        "tools": [search],
    }
    composition.update(overrides)
    return create_fevex(**composition)


def code_of(**overrides: Any) -> str:
    with pytest.raises(FevexConfigurationError) as caught:
        compose(**overrides)
    return caught.value.code


def test_a_valid_composition_builds_an_app() -> None:
    assert compose().agents == ("support",)


@pytest.mark.parametrize(
    "overrides",
    [
        {"models": [FakeModel()]},
        {"agents": "support"},
        {"tools": {"search": search}},
        {"on_event": 42},
        {"on_event": [print, "not callable"]},
        {"run_store": object()},
    ],
)
def test_invalid_config(overrides: dict[str, Any]) -> None:
    assert code_of(**overrides) == "INVALID_CONFIG"


def test_invalid_model() -> None:
    assert code_of(models={"default": object()}) == "INVALID_MODEL"
    assert code_of(models={"": FakeModel()}) == "INVALID_MODEL"


def test_missing_model() -> None:
    assert code_of(agents=[agent(model="fast")]) == "MISSING_MODEL"
    assert code_of(models={"other": FakeModel()}) == "MISSING_MODEL"


def test_invalid_agent() -> None:
    assert code_of(agents=[{"name": "support"}]) == "INVALID_AGENT"
    bypassed = agent()
    object.__setattr__(bypassed, "name", "not a valid name!")
    assert code_of(agents=[bypassed]) == "INVALID_AGENT"
    limited = agent()
    object.__setattr__(limited, "limits", Limits(max_steps=0))
    assert code_of(agents=[limited]) == "INVALID_AGENT"


def test_invalid_agent_from_define_agent() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        define_agent(name="x" * 65, instructions="Help.")
    assert caught.value.code == "INVALID_AGENT"
    with pytest.raises(FevexConfigurationError):
        define_agent(name="ok", instructions="Help.", tools="search")
    with pytest.raises(FevexConfigurationError):
        define_agent(name="ok", instructions="Help.", limits={"max_turns": 3})
    with pytest.raises(FevexConfigurationError):
        define_agent(name="ok", instructions=None)  # type: ignore[arg-type]


def test_invalid_agent_output_schema() -> None:
    with pytest.raises(FevexConfigurationError) as refused:
        agent(output_schema=object())
    assert refused.value.code == "INVALID_AGENT"


def test_duplicate_agent() -> None:
    assert code_of(agents=[agent(), agent()]) == "DUPLICATE_AGENT"


def test_invalid_tool() -> None:
    assert code_of(tools=[search, lambda q: q]) == "INVALID_TOOL"
    bypassed = define_tool(name="other", description="x")(search.function)
    object.__setattr__(bypassed, "name", "has space")
    assert code_of(tools=[search, bypassed]) == "INVALID_TOOL"


def test_invalid_tool_from_define_tool() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        define_tool(name="dots.are.not.allowed")(search.function)
    assert caught.value.code == "INVALID_TOOL"

    def any_inputs(*values: Query) -> str:
        return ""

    with pytest.raises(FevexConfigurationError) as caught:
        define_tool(any_inputs)
    assert caught.value.code == "INVALID_TOOL_PARAMETER"


def test_duplicate_tool() -> None:
    assert code_of(tools=[search, search]) == "DUPLICATE_TOOL"


def test_missing_tool() -> None:
    assert code_of(agents=[agent(tools=["search", "delete"])]) == "MISSING_TOOL"


def test_the_app_keeps_a_snapshot_of_the_callers_containers() -> None:
    agents = [agent()]
    tools = [search]
    models = {"default": FakeModel({"output": "hi"})}
    names = ["search"]
    app = create_fevex(models=models, agents=agents, tools=tools, run_store="memory://")
    agents.append(agent(name="intruder"))
    tools.clear()
    models.clear()
    names.append("delete")
    assert app.agents == ("support",)
    result = app.run_agent_sync("support", "hello")
    assert result.output == "hi"


def test_define_agent_copies_caller_lists() -> None:
    tools = ["search"]
    options = {"temperature": 0.1}
    definition = define_agent(name="a", instructions="i", tools=tools, model_options=options)
    tools.append("delete")
    options["temperature"] = 1.0
    assert definition.tools == ("search",)
    assert definition.model_options == {"temperature": 0.1}


def test_define_tool_reads_names_schemas_and_context_from_the_function() -> None:
    def lookup(query: Query, context: ToolContext) -> Query:
        """Look something up."""
        return query

    tool = define_tool(lookup)
    assert tool.name == "lookup"
    assert tool.description == "Look something up."
    assert tool.input_schema is Query
    assert tool.output_schema is Query
    assert tool.takes_context
    assert not tool.is_async
    assert search.is_async
    assert search.output_schema is str


def test_a_store_missing_a_contract_method_is_refused_when_the_app_is_created() -> None:
    class OldStore(InMemoryRunStore):
        expired_run_ids = None  # written before the method joined the contract

    with pytest.raises(FevexConfigurationError) as caught:
        create_fevex(run_store=OldStore())
    assert caught.value.code == "INVALID_CONFIG"
    assert "expired_run_ids" in caught.value.message
