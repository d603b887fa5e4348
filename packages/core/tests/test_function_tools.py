"""Tools from plain functions: the schema from the signature and docstring, the arguments
as keywords, the context injected, and tools listed on agents as objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from fevex import FevexConfigurationError, ToolContext, create_fevex, define_agent, define_tool
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


async def schema_of(tool: Any) -> dict[str, Any]:
    """The input schema the model is offered for ``tool``."""
    model = FakeModel({"output": "ok"})
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="a", instructions="i", tools=[tool])],
    )
    await app.run_agent("a", "hi")
    (spec,) = model.calls[0].tools
    return spec.input_schema


async def test_the_schema_is_an_object_of_the_parameters_with_types_defaults_and_descriptions() -> (
    None
):
    @define_tool
    async def find_orders(
        customer_id: int,
        status: Annotated[str, Field(description="Only orders in this state.")] = "open",
        limit: int = Field(10, description="At most this many."),
        tags: list[str] | None = None,
    ) -> list[int]:
        """Find a customer's orders.

        Newest first.

        Args:
            customer_id: The customer's number.
            status: Ignored: the annotation's description wins.
            tags: Orders carrying every one of these.
        """
        return []

    schema = await schema_of(find_orders)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["customer_id"]
    properties = schema["properties"]
    assert list(properties) == ["customer_id", "status", "limit", "tags"]
    assert properties["customer_id"]["type"] == "integer"
    assert properties["customer_id"]["description"] == "The customer's number."
    assert properties["status"]["description"] == "Only orders in this state."
    assert properties["status"]["default"] == "open"
    assert properties["limit"] == {
        "default": 10,
        "description": "At most this many.",
        "title": "Limit",
        "type": "integer",
    }
    assert properties["tags"]["description"] == "Orders carrying every one of these."
    assert find_orders.description == "Find a customer's orders.\n\nNewest first."


def numpy_style(account_id: int, reason: str) -> str:
    """Close an account.

    Parameters
    ----------
    account_id : int
        The account to close.
    reason : str
        Why, for the audit log.
    """
    return reason


def sphinx_style(account_id: int, reason: str) -> str:
    """Close an account.

    :param account_id: The account to close.
    :param reason: Why, for the audit log.
    :returns: the reason.
    """
    return reason


def google_style(account_id: int, reason: str) -> str:
    """Close an account.

    Args:
        account_id: The account to close.
        reason: Why, for the
            audit log.
    """
    return reason


@pytest.mark.parametrize("function", [numpy_style, sphinx_style, google_style])
async def test_parameter_descriptions_come_from_any_docstring_style(
    function: Callable[..., str],
) -> None:
    tool = define_tool(function)
    properties = (await schema_of(tool))["properties"]
    assert properties["account_id"]["description"] == "The account to close."
    assert " ".join(properties["reason"]["description"].split()) == "Why, for the audit log."
    assert tool.description == "Close an account."


def accounts_app(tool: Any, *calls: dict[str, Any]) -> Any:
    model = FakeModel(
        {"tool_calls": [{"id": f"c{i}", **call} for i, call in enumerate(calls)]},
        {"output": "done"},
    )
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="support", instructions="Help.", tools=[tool])],
    )


def tool_outputs(result: Any) -> list[Any]:
    return [event.payload["output"] for event in result.events if event.type == "tool.completed"]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_the_function_receives_its_arguments_as_keywords_and_the_context(
    asynchronous: bool,
) -> None:
    seen: list[tuple[Any, ...]] = []

    def record(context: ToolContext, account_id: int, *, note: str = "none") -> dict[str, Any]:
        seen.append((account_id, note, context.tool_name, context.tool_call_id))
        return {"id": account_id, "note": note}

    async def record_async(
        context: ToolContext, account_id: int, *, note: str = "none"
    ) -> dict[str, Any]:
        return record(context, account_id, note=note)

    tool = define_tool(name="accounts_get")(record_async if asynchronous else record)
    assert tool.is_async is asynchronous
    assert set((await schema_of(tool))["properties"]) == {"account_id", "note"}  # no context

    app = accounts_app(
        tool,
        {"name": "accounts_get", "input": {"account_id": 42}},
        {"name": "accounts_get", "input": {"note": "vip", "account_id": 7}},
    )
    result = await app.run_agent("support", "Look up 42 and 7.")

    assert tool_outputs(result) == [{"id": 42, "note": "none"}, {"id": 7, "note": "vip"}]
    assert seen == [(42, "none", "accounts_get", "c0"), (7, "vip", "accounts_get", "c1")]


async def test_parameters_named_like_pydantic_attributes_reach_the_function() -> None:
    @define_tool
    def dump(json: str, schema: int, model_config: bool) -> list[Any]:
        """Echo."""
        return [json, schema, model_config]

    app = accounts_app(
        dump, {"name": "dump", "input": {"json": "j", "schema": 1, "model_config": True}}
    )
    result = await app.run_agent("support", "Echo.")
    assert tool_outputs(result) == [["j", 1, True]]


class AccountQuery(BaseModel):
    account_id: int


async def test_a_single_pydantic_model_parameter_still_receives_the_whole_input() -> None:
    @define_tool
    async def get_account(query: AccountQuery) -> dict[str, Any]:
        """Get an account."""
        assert isinstance(query, AccountQuery)
        return {"id": query.account_id}

    assert get_account.input_schema is AccountQuery
    assert (await schema_of(get_account))["required"] == ["account_id"]
    app = accounts_app(get_account, {"name": "get_account", "input": {"account_id": 3}})
    assert tool_outputs(await app.run_agent("support", "3?")) == [{"id": 3}]


async def test_arguments_that_fail_the_signature_go_back_as_invalid_input() -> None:
    @define_tool(errors_to_model="input")
    def get_account(account_id: int) -> int:
        """Get."""
        return account_id

    app = accounts_app(get_account, {"name": "get_account", "input": {"account": "x"}})
    result = await app.run_agent("support", "?")
    (failed,) = [event for event in result.events if event.type == "tool.failed"]
    assert failed.payload["error"]["code"] == "TOOL_INPUT_INVALID"
    assert "account_id" in failed.payload["error"]["message"]


class Opaque:
    pass


def test_unannotated_parameters_and_non_json_types_are_refused_naming_the_parameter() -> None:
    def untyped(account_id: int, reason):  # type: ignore[no-untyped-def]
        return reason

    def opaque(account_id: int, handle: Opaque) -> None:
        return None

    def callback(account_id: int, then: Callable[[], None]) -> None:
        return None

    def variadic(account_id: int, **rest: int) -> None:
        return None

    for function, parameter in (
        (untyped, "reason"),
        (opaque, "handle"),
        (callback, "then"),
        (variadic, "rest"),
    ):
        with pytest.raises(FevexConfigurationError) as caught:
            define_tool(function)
        assert caught.value.code == "INVALID_TOOL_PARAMETER", function
        assert caught.value.details == {"tool_name": function.__name__, "parameter": parameter}
        assert repr(parameter) in caught.value.message


async def test_an_agent_lists_tool_objects_and_the_app_registers_them() -> None:
    @define_tool
    def get_account(account_id: int) -> int:
        """Get."""
        return account_id

    @define_tool(name="get_account")
    def impostor(account_id: int) -> int:
        """Another."""
        return -account_id

    first = define_agent(name="first", instructions="i", tools=[get_account])
    second = define_agent(name="second", instructions="i", tools=[get_account, "get_account"])
    assert first.tools == ("get_account",)
    model = FakeModel({"output": "ok"}, {"output": "ok"})
    app = create_fevex(models={"default": model}, agents=[first, second], tools=[get_account])
    await app.run_agent("first", "hi")
    await app.run_agent("second", "hi")
    assert [[spec.name for spec in call.tools] for call in model.calls] == [
        ["get_account"],
        ["get_account"],
    ]

    with pytest.raises(FevexConfigurationError) as caught:
        create_fevex(
            models={"default": FakeModel()},
            agents=[first, define_agent(name="third", instructions="i", tools=[impostor])],
        )
    assert caught.value.code == "DUPLICATE_TOOL"
    assert "third" in caught.value.message

    with pytest.raises(FevexConfigurationError) as caught:
        define_agent(name="bad", instructions="i", tools=[42])  # type: ignore[list-item]
    assert caught.value.code == "INVALID_AGENT"


def test_an_annotation_that_cannot_be_resolved_is_refused_naming_the_parameter_and_function() -> (
    None
):
    class Query(BaseModel):  # local: this module's postponed annotations cannot see it
        text: str

    def lookup(account_id: int, query: Query) -> None:
        return None

    def answer(account_id: int) -> Query:
        return Query(text=str(account_id))

    for function, parameter, named in (
        (lookup, "query", "parameter 'query'"),
        (answer, "return", "the return annotation"),
    ):
        with pytest.raises(FevexConfigurationError) as caught:
            define_tool(name="accounts_lookup")(function)
        error = caught.value
        assert error.code == "INVALID_TOOL"
        assert error.details == {
            "tool_name": "accounts_lookup",
            "function": function.__qualname__,
            "parameter": parameter,
        }
        assert named in error.message
        assert function.__qualname__ in error.message
        assert "name 'Query' is not defined" in error.message


@pytest.mark.parametrize("length", [1023, 1024, 1025, 1_000_000])
async def test_a_docstring_description_is_cut_at_1024_characters_as_a_remote_one_is(
    length: int,
) -> None:
    def lookup(account_id: int) -> int:
        return account_id

    text = ("Look the account up. " * (length // 21 + 1))[: length - 1] + "."
    lookup.__doc__ = text + "\n\nArgs:\n    account_id: The account's number.\n"
    model = FakeModel({"output": "ok"})
    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="a", instructions="i", tools=[define_tool(lookup)])],
    )
    await app.run_agent("a", "hi")

    (spec,) = model.calls[0].tools
    if len(text) <= 1024:
        assert spec.description == text
    else:
        assert spec.description == text[:1023] + "…"
    assert spec.input_schema["properties"]["account_id"]["description"] == "The account's number."


async def test_a_description_given_explicitly_is_not_cut() -> None:
    text = "Look the account up. " * 100

    @define_tool(description=text)
    def lookup(account_id: int) -> int:
        return account_id

    assert lookup.description == text
