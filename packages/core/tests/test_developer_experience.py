"""What a new user meets first: every configuration problem at once, suggestions for
misspelt names, schemas refused where they are defined, run errors that name their run,
apps and stores as context managers, blocking twins and lifecycle logs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    FevexConfigurationError,
    FevexRunError,
    RunPausedError,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.runtime import InMemoryRunStore
from fevex.runtime.approval import ApprovalDecision
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio


class Query(BaseModel):
    q: str


class Answer(BaseModel):
    answer: str


@define_tool(name="search", description="Search.")
async def search(query: Query) -> str:
    return f"found {query.q}"


@define_tool(name="explode", description="Fails.")
async def explode(query: Query) -> str:
    raise RuntimeError("the tool broke")


@define_tool(name="charge", description="Charge.", approval="required", idempotency="keyed")
async def charge(query: Query) -> str:
    return "charged"


def support(**overrides: Any) -> Any:
    fields: dict[str, Any] = {"name": "support", "instructions": "Help.", "tools": ["search"]}
    fields.update(overrides)
    return define_agent(**fields)


explode_call = {"tool_calls": [{"id": "call-1", "name": "explode", "input": {"q": "x"}}]}


def search_call(q: str = "secret-input") -> dict[str, Any]:
    return {"tool_calls": [{"id": "call-1", "name": "search", "input": {"q": q}}]}


# -- every problem at once, with suggestions ---------------------------------------------


def test_create_fevex_reports_every_problem_at_once() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_fevex(
            models={"default": FakeModel(), "broken": object()},  # type: ignore[dict-item]
            agents=[
                support(tools=["serch"]),
                define_agent(name="billing", instructions="Bill.", model="fats"),
                support(),
            ],
            tools=[search, "not a tool"],  # type: ignore[list-item]
            lease_seconds=0,
        )
    error = caught.value
    codes = [problem.code for problem in error.problems]
    assert codes == [
        "INVALID_MODEL",
        "INVALID_TOOL",
        "MISSING_TOOL",
        "MISSING_MODEL",
        "DUPLICATE_AGENT",
        "INVALID_CONFIG",
    ]
    assert error.code == "INVALID_MODEL"
    assert all(problem.message in error.message for problem in error.problems)
    assert "Did you mean 'search'?" in error.problems[2].message
    assert error.to_json()["problems"][3]["code"] == "MISSING_MODEL"


def test_a_single_problem_is_its_own_only_problem() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_fevex(models={"default": FakeModel()}, agents=[support()], tools=[])
    assert caught.value.code == "MISSING_TOOL"
    assert caught.value.problems == (caught.value,)
    assert "problems" not in caught.value.to_json()


async def test_an_unknown_agent_gets_a_suggestion() -> None:
    app = create_fevex(models={"default": FakeModel()}, agents=[support()], tools=[search])
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("suport", input="hi")
    assert caught.value.code == "AGENT_NOT_FOUND"
    assert "Did you mean 'support'?" in caught.value.message


async def test_a_definition_the_app_was_not_created_with_is_refused() -> None:
    app = create_fevex(models={"default": FakeModel()}, agents=[support()], tools=[search])
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent(support(instructions="Something else."), input="hi")
    assert caught.value.code == "AGENT_NOT_FOUND"
    other = define_agent(name="other", instructions="Help.")
    with pytest.raises(FevexRunError):
        await app.run_agent(other, input="hi")


# -- schemas refused where they are defined ----------------------------------------------


class NotASchema:
    pass


@pytest.mark.parametrize("schema", [42, NotASchema, {"type": "object"}])
def test_an_agent_schema_fevex_cannot_validate_with_is_refused_at_definition(
    schema: Any,
) -> None:
    for field in ("output_schema", "input_schema"):
        with pytest.raises(FevexConfigurationError) as caught:
            define_agent(name="support", instructions="Help.", **{field: schema})
        assert caught.value.code == "INVALID_AGENT"
        assert field in caught.value.message
        assert "arbitrary_types_allowed" not in caught.value.message


def test_a_tool_schema_fevex_cannot_validate_with_is_refused_at_definition() -> None:
    async def lookup(query: Query) -> NotASchema:
        return NotASchema()

    with pytest.raises(FevexConfigurationError) as caught:
        define_tool(lookup)
    assert caught.value.code == "INVALID_TOOL"
    assert "output_schema" in caught.value.message
    assert "arbitrary_types_allowed" not in caught.value.message
    with pytest.raises(FevexConfigurationError) as caught:
        define_tool(name="lookup", input_schema=42)(search.function)
    assert caught.value.code == "INVALID_TOOL"


def test_an_untyped_tool_is_refused_instead_of_offering_an_empty_schema() -> None:
    async def untyped(query):  # type: ignore[no-untyped-def]
        return query

    with pytest.raises(FevexConfigurationError) as caught:
        define_tool(untyped)
    assert caught.value.code == "INVALID_TOOL_PARAMETER"
    assert caught.value.details["parameter"] == "query"
    assert "'query'" in caught.value.message
    assert "annotation" in caught.value.message

    async def anything(value: Any) -> Any:
        return value

    schema = define_tool(anything).input_schema.model_json_schema()
    assert schema["type"] == "object"
    assert schema["required"] == ["value"]
    assert define_tool(name="explicit", input_schema=Query)(untyped).input_schema is Query


# -- run errors name their run -----------------------------------------------------------


async def test_a_failed_run_raises_an_error_that_names_it() -> None:
    store = InMemoryRunStore()
    app = create_fevex(
        models={"default": FakeModel(explode_call)},
        agents=[support(tools=["explode"])],
        tools=[explode],
        run_store=store,
    )
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("support", input="hi")
    error = caught.value
    assert error.code == "TOOL_FAILED"
    (run,) = await app.list_runs()
    assert run.status == "failed"
    assert error.run_id == run.id
    assert error.details["run_id"] == run.id


async def test_errors_of_taking_a_run_over_name_it() -> None:
    app = create_fevex(
        models={
            "default": FakeModel(
                {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"q": "x"}}]}
            )
        },
        agents=[support(tools=["charge"])],
        tools=[charge],
    )
    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("support", input="hi")
    run_id = paused.value.run_id
    with pytest.raises(FevexRunError) as caught:
        await app.resume_run(run_id, ApprovalDecision("apr_forged", "approve", {"id": "x"}))
    assert caught.value.code == "APPROVAL_NOT_FOUND"
    assert caught.value.run_id == run_id
    await app.cancel_run(run_id)
    with pytest.raises(FevexRunError) as caught:
        await app.resume_run(run_id, ApprovalDecision("apr_any", "approve", {"id": "x"}))
    assert caught.value.code == "RUN_NOT_PAUSED"
    assert caught.value.run_id == run_id


# -- context managers and blocking twins -------------------------------------------------


class CountingStore(InMemoryRunStore):
    """An in-memory store that counts how often it was closed."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


async def test_async_with_closes_the_app_and_its_store() -> None:
    store = CountingStore()
    async with create_fevex(
        models={"default": FakeModel({"output": "hello"})},
        agents=[support(tools=[])],
        run_store=store,
    ) as app:
        assert (await app.run_agent("support", input="hi")).output == "hello"
        assert store.closed == 0
    assert store.closed == 1


def test_with_closes_the_app_in_scripts() -> None:
    store = CountingStore()
    with create_fevex(
        models={"default": FakeModel({"output": "hello"})},
        agents=[support(tools=[])],
        run_store=store,
    ) as app:
        assert app.run_agent_sync("support", input="hi").output == "hello"
    assert store.closed == 1


async def test_the_in_memory_store_is_an_async_context_manager() -> None:
    store = CountingStore()
    async with store as entered:
        assert entered is store
    assert store.closed == 1


def test_start_agent_sync_runs_in_the_background_of_later_blocking_calls() -> None:
    with create_fevex(
        models={"default": FakeModel(search_call(), {"output": "done"})},
        agents=[support()],
        tools=[search],
    ) as app:
        started = app.start_agent_sync("support", input="hi")
        assert started.status == "running"
        events = [event.type for event in app.follow_events_sync(started.id)]
        assert events[-1] == "run.completed"
        assert app.get_run_sync(started.id).output == "done"


# -- lifecycle logs ------------------------------------------------------------------------


def lifecycle(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    return [
        (record.lifecycle, record.run_id, record.agent)
        for record in caplog.records
        if record.name == "fevex" and hasattr(record, "lifecycle")
    ]


async def test_the_run_lifecycle_is_logged_without_user_content(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="fevex")
    app = create_fevex(
        models={"default": FakeModel(search_call("secret-input"), {"output": "secret-output"})},
        agents=[support()],
        tools=[search],
    )
    result = await app.run_agent("support", input="secret-question")
    assert lifecycle(caplog) == [
        ("started", result.run_id, "support"),
        ("completed", result.run_id, "support"),
    ]
    assert all(
        record.levelno == logging.INFO for record in caplog.records if hasattr(record, "lifecycle")
    )
    text = caplog.text + "".join(str(record.__dict__) for record in caplog.records)
    assert "secret" not in text


async def test_pauses_resumes_failures_and_cancellations_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="fevex")
    model = FakeModel(
        {"tool_calls": [{"id": "call-1", "name": "charge", "input": {"q": "x"}}]},
        {"output": "charged"},
        {"tool_calls": [{"id": "call-2", "name": "explode", "input": {"q": "x"}}]},
    )
    app = create_fevex(
        models={"default": model},
        agents=[support(tools=["charge", "explode"])],
        tools=[charge, explode],
    )
    with pytest.raises(RunPausedError) as paused:
        await app.run_agent("support", input="hi")
    run_id = paused.value.run_id
    approval = paused.value.pause["approvals"][0]["id"]
    await app.resume_run(run_id, ApprovalDecision(approval, "approve", {"id": "ops"}))
    with pytest.raises(FevexRunError) as failed:
        await app.run_agent("support", input="hi")
    stream = app.stream_agent("support", input="hi")
    first = await anext(stream)
    await stream.aclose()
    assert [(what, run) for what, run, _ in lifecycle(caplog)] == [
        ("started", run_id),
        ("paused", run_id),
        ("resumed", run_id),
        ("completed", run_id),
        ("started", failed.value.run_id),
        ("failed", failed.value.run_id),
        ("started", first.run_id),
        ("cancelled", first.run_id),
    ]
    messages = [record.getMessage() for record in caplog.records]
    assert any("paused reason=approval" in m for m in messages)
    assert any("failed code=TOOL_FAILED" in m for m in messages)
