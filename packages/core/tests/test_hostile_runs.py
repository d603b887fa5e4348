"""What a hostile model, a hostile tool or server and an unlucky store do to a run: each
attack ends in a stable code, never a stuck run, a secret in storage or a frozen loop."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any
from unittest.mock import ANY

import pytest
from pydantic import BaseModel

from fevex import (
    Fevex,
    FevexRunError,
    RunCancelledError,
    ToolContext,
    create_fevex,
    define_agent,
    define_connection,
    define_tool,
)
from fevex.runtime import InMemoryRunStore, RecoverySweep, RunLease, SkippedRun
from fevex.schemas import JsonSchema, linear_pattern
from fevex.testing import FakeModel
from fevex.tools import ConnectionContext, RemoteTool

pytestmark = pytest.mark.anyio

# A credential with a backslash and both quote kinds: its repr and JSON forms differ from it.
SECRET = "sk-\\q'u\"ote-5e1f0a9b"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Query(BaseModel):
    q: str


def calls(*pairs: tuple[str, str], input: Any = None) -> dict[str, Any]:
    return {
        "tool_calls": [
            {"id": call_id, "name": name, "input": {"q": "x"} if input is None else input}
            for call_id, name in pairs
        ]
    }


def make_app(model: Any, tools: Sequence[Any], store: Any = None, **options: Any) -> Fevex:
    return create_fevex(
        models={"default": model},
        agents=[define_agent(name="worker", instructions="Work.", tools=[t.name for t in tools])],
        tools=tools,
        run_store=store or InMemoryRunStore(),
        **options,
    )


async def failure(app: Fevex, *, timeout: float | None = None) -> tuple[FevexRunError, Any]:
    with pytest.raises(FevexRunError) as caught:
        await asyncio.wait_for(app.run_agent("worker", "go", timeout=timeout), 30)
    (run_id,) = app.run_store._runs  # type: ignore[attr-defined]
    return caught.value, await app.get_run(run_id)


# -- a TimeoutError inside user code is that code's failure ---------------------------


async def test_a_tool_raising_timeout_error_fails_as_a_tool_and_is_retried() -> None:
    attempts: list[int] = []

    @define_tool(name="lookup", description="Look up.", retry={"max_attempts": 3, "backoff": 0})
    async def lookup(query: Query, context: ToolContext) -> dict[str, Any]:
        attempts.append(context.attempt)
        raise TimeoutError("the upstream API timed out")

    error, run = await failure(make_app(FakeModel(calls(("c1", "lookup"))), [lookup]))
    assert error.code == "TOOL_FAILED"
    assert not isinstance(error, RunCancelledError)
    assert attempts == [1, 2, 3]
    assert run.status == "failed"


async def test_a_tool_timeout_error_is_not_the_run_timeout_when_one_is_set() -> None:
    @define_tool(name="lookup", description="Look up.")
    def lookup(query: Query) -> dict[str, Any]:
        raise TimeoutError

    error, run = await failure(make_app(FakeModel(calls(("c1", "lookup"))), [lookup]), timeout=60)
    assert error.code == "TOOL_FAILED"
    assert run.status == "failed"


async def test_a_model_raising_timeout_error_is_a_model_error() -> None:
    error, run = await failure(make_app(FakeModel(TimeoutError("read timeout")), []))
    assert error.code == "MODEL_ERROR"
    assert run.status == "failed"


async def test_only_the_runs_own_deadline_is_run_timeout() -> None:
    @define_tool(name="lookup", description="Look up.")
    async def lookup(query: Query) -> dict[str, Any]:
        await asyncio.sleep(30)
        return {}

    app = make_app(FakeModel(calls(("c1", "lookup"))), [lookup])
    with pytest.raises(RunCancelledError) as caught:
        await asyncio.wait_for(app.run_agent("worker", "go", timeout=0.2), 30)
    assert caught.value.code == "RUN_TIMEOUT"


# -- a repeated tool call id ----------------------------------------------------------


@pytest.mark.parametrize(
    "responses",
    [
        [calls(("same", "effect"), ("same", "effect"))],
        [calls(("same", "effect")), calls(("same", "effect"))],
    ],
    ids=["within-one-step", "across-steps"],
)
async def test_a_repeated_call_id_fails_the_run_before_its_effect(
    responses: list[dict[str, Any]],
) -> None:
    effects: list[str | None] = []

    @define_tool(name="effect", description="Do it.", idempotency="keyed")
    async def effect(query: Query, context: ToolContext) -> dict[str, Any]:
        effects.append(context.idempotency_key)
        return {"ok": True}

    app = make_app(FakeModel(*responses, {"output": "done"}), [effect])
    error, run = await failure(app)
    assert error.code == "DUPLICATE_TOOL_CALL_ID"
    assert run.status == "failed"
    assert len(effects) == len(responses) - 1
    started = [e for e in await app.list_events(run.id) if e.type == "tool.started"]
    assert len(started) == len(effects)


# -- values no store can keep ---------------------------------------------------------


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"q": value}
    return value


@pytest.mark.parametrize(
    ("response", "code"),
    [
        ({"output": "a NUL \x00 in the answer"}, "MODEL_OUTPUT_UNSTORABLE"),
        ({"output": "a lone surrogate \ud800"}, "MODEL_OUTPUT_UNSTORABLE"),
        ({"output": "fine", "reasoning": "\x00"}, "MODEL_OUTPUT_UNSTORABLE"),
        (calls(("c1", "lookup"), input={"q": float("nan")}), "TOOL_INPUT_INVALID"),
        (calls(("c1", "lookup"), input={"q": float("inf")}), "TOOL_INPUT_INVALID"),
        (calls(("c1", "lookup"), input={"q": "x\x00"}), "TOOL_INPUT_INVALID"),
        (calls(("c1", "lookup"), input={"q": {1, 2}}), "TOOL_INPUT_INVALID"),
        (calls(("c1", "lookup"), input=nested(10_000)), "TOOL_INPUT_INVALID"),
        (calls(("c1", "lookup"), input={"q": 10**5000}), "TOOL_INPUT_INVALID"),
        (calls(("c1\x00", "lookup")), "MODEL_OUTPUT_UNSTORABLE"),
    ],
    ids=[
        "nul-text",
        "surrogate-text",
        "nul-reasoning",
        "nan-input",
        "infinity-input",
        "nul-input",
        "set-input",
        "deep-input",
        "huge-int-input",
        "nul-call-id",
    ],
)
async def test_unstorable_model_output_fails_the_run_before_anything_runs(
    response: dict[str, Any], code: str
) -> None:
    ran: list[Any] = []

    @define_tool(name="lookup", description="Look up.")
    def lookup(query: dict[str, Any]) -> dict[str, Any]:
        ran.append(query)
        return {}

    app = make_app(FakeModel(response), [lookup])
    error, run = await failure(app)
    assert error.code == code
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["code"] == code
    assert ran == []
    events = await app.list_events(run.id)
    assert "tool.started" not in [e.type for e in events]
    # Whatever was stored is plain JSON that any store can keep.
    json.dumps([e.payload for e in events], allow_nan=False).encode()


@pytest.mark.parametrize(
    "output",
    # A set is made a list, as pydantic dumps it (test_tool_outputs.py).
    [{"text": "NUL \x00"}, {"n": float("nan")}, {"k\ud800": 1}, nested(500), {"o": object()}],
    ids=["nul", "nan", "surrogate-key", "deep", "object"],
)
async def test_unstorable_tool_output_fails_the_run(output: Any) -> None:
    @define_tool(name="lookup", description="Look up.")
    def lookup(query: Query) -> Any:
        return output

    app = make_app(FakeModel(calls(("c1", "lookup"))), [lookup])
    error, run = await failure(app)
    assert error.code == "TOOL_OUTPUT_INVALID"
    assert run.status == "failed"


async def test_a_schema_output_with_an_escaped_nul_is_refused() -> None:
    class Answer(BaseModel):
        text: str

    app = create_fevex(
        models={"default": FakeModel({"output": '{"text": "a \\u0000 b"}'})},
        agents=[define_agent(name="worker", instructions="Work.", output_schema=Answer)],
        run_store=InMemoryRunStore(),
    )
    error, run = await failure(app)
    assert error.code == "OUTPUT_INVALID"
    assert run.status == "failed"


async def test_unstorable_run_input_is_refused_before_the_run_exists() -> None:
    store = InMemoryRunStore()
    app = make_app(FakeModel({"output": "x"}), [], store)
    with pytest.raises(FevexRunError) as caught:
        await app.run_agent("worker", "hello \x00")
    assert caught.value.code == "INVALID_INPUT"
    assert store._runs == {}


async def test_an_error_message_with_a_nul_is_stored_without_it() -> None:
    @define_tool(name="lookup", description="Look up.")
    def lookup(query: Query) -> Any:
        raise ValueError("bad byte \x00 and \udc80 here")

    error, run = await failure(make_app(FakeModel(calls(("c1", "lookup"))), [lookup]))
    assert error.code == "TOOL_FAILED"
    assert "\\u0000" not in json.dumps(run.error)
    json.dumps(run.error).encode("utf-8")


# -- credentials in every spelling ----------------------------------------------------


def spellings(secret: str) -> list[str]:
    return [secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], secret[:12], secret[-12:]]


@pytest.mark.parametrize(
    "raise_with",
    [
        lambda key: KeyError(key),
        lambda key: ValueError(repr({"token": key})),
        lambda key: RuntimeError(json.dumps({"authorization": f"Bearer {key}"})),
        lambda key: RuntimeError(f"Authorization: Bearer {key}"),
    ],
    ids=["key-error-repr", "dict-repr", "json-escaped", "header-part"],
)
async def test_a_failing_tool_never_stores_its_credential(
    raise_with: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    @define_tool(name="lookup", description="Look up.", credentials=["api"])
    async def lookup(query: Query, context: ToolContext) -> Any:
        raise raise_with(await context.get_credential("api"))

    app = make_app(FakeModel(calls(("c1", "lookup"))), [lookup], credentials={"api": SECRET})
    error, run = await failure(app)
    assert error.code == "TOOL_FAILED"
    stored = json.dumps(
        [run.to_json(), [e.payload for e in await app.list_events(run.id)]], ensure_ascii=False
    )
    written = stored + str(error) + repr(error) + caplog.text
    for spelling in spellings(SECRET):
        assert spelling not in written


async def test_a_discovery_error_echoing_the_credential_is_scrubbed() -> None:
    class EchoingProvider:
        async def list_tools(self, context: ConnectionContext) -> Sequence[RemoteTool]:
            token = await context.get_credential("docs-token")
            raise FevexRunError("REMOTE_REFUSED", f"server said: bad token {token!r}")

        async def call_tool(self, name: str, input: Any, context: ToolContext) -> Any:
            raise AssertionError("not called")

    docs = define_connection(
        name="docs", provider=EchoingProvider(), credentials=["docs-token"], allowlist=["search"]
    )
    app = create_fevex(
        models={"default": FakeModel({"output": "x"})},
        agents=[define_agent(name="worker", instructions="Work.", tools=["docs__search"])],
        connections=[docs],
        credentials={"docs-token": SECRET},
        run_store=InMemoryRunStore(),
    )
    error, run = await failure(app)
    assert error.code == "REMOTE_REFUSED"
    written = json.dumps([run.to_json(), [e.payload for e in await app.list_events(run.id)]])
    for spelling in spellings(SECRET):
        assert spelling not in written + str(error)


# -- patterns and nesting from remote schemas -----------------------------------------


async def test_a_backtracking_pattern_is_checked_in_linear_time() -> None:
    schema = JsonSchema({"type": "string", "pattern": "^(a+)+$"})
    hostile = "a" * 5_000 + "!"
    # Python's re would take longer than the age of the universe on this input.
    checks = asyncio.to_thread(lambda: [schema.validate(hostile) for _ in range(1)])
    with pytest.raises(ValueError, match="does not match the pattern"):
        await asyncio.wait_for(checks, 30)
    assert schema.validate("aaaa") == "aaaa"
    assert linear_pattern("b").search("abc")  # unanchored, as JSON Schema says


async def test_a_deeply_nested_value_is_a_problem_not_a_recursion_error() -> None:
    document: dict[str, Any] = {}
    value: list[Any] = []
    for _ in range(5_000):
        document, value = {"items": document}, [value]
    with pytest.raises(ValueError, match="nested deeper"):
        JsonSchema(document).validate(value)


async def test_a_remote_pattern_no_linear_engine_can_run_is_refused_at_discovery() -> None:
    class Provider:
        async def list_tools(self, context: ConnectionContext) -> Sequence[RemoteTool]:
            schema = {"type": "object", "properties": {"q": {"pattern": "(a)\\1"}}}
            return [RemoteTool("search", "Search.", schema)]

        async def call_tool(self, name: str, input: Any, context: ToolContext) -> Any:
            raise AssertionError("not called")

    app = create_fevex(
        models={"default": FakeModel(calls(("c1", "docs__search")))},
        agents=[define_agent(name="worker", instructions="Work.", tools=["docs__search"])],
        connections=[define_connection(name="docs", provider=Provider())],
        run_store=InMemoryRunStore(),
    )
    error, run = await failure(app)
    assert error.code == "CONNECTION_TOOL_INVALID"
    assert run.status == "failed"


# -- recovery that one bad run cannot stop --------------------------------------------


class Hanging:
    """A keyed tool that hangs while ``frozen``, as inside a worker that froze."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.frozen = True

        @define_tool(name="work", description="Slow work.", idempotency="keyed")
        async def work(query: Query) -> dict[str, Any]:
            if self.frozen:
                self.entered.set()
                await asyncio.Event().wait()
            return {}

        self.tool = work


async def orphan(store: InMemoryRunStore, hanging: Hanging) -> tuple[str, asyncio.Task[Any]]:
    """A run whose worker froze inside a tool call; its lease expires when the clock moves."""
    worker = make_app(FakeModel(calls(("c1", "work"))), [hanging.tool], store)
    before = set(store._runs)
    task = asyncio.create_task(worker.run_agent("worker", "go"))
    await hanging.entered.wait()
    hanging.entered.clear()
    (run_id,) = set(store._runs) - before
    return run_id, task


async def test_one_bad_run_never_stops_a_recovery_sweep(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    store = InMemoryRunStore(clock=clock)
    hanging = Hanging()
    orphans = [await orphan(store, hanging) for _ in range(4)]
    (wrong_shape, _), (newer, _), (removed, _), (healthy, _) = orphans
    store._checkpoints[wrong_shape] = ["not", "a", "checkpoint"]  # type: ignore[assignment]
    store._checkpoints[newer] = {"version": 99, "anything": True}
    store._runs[removed]["agent_name"] = store._runs[removed]["name"] = "retired"
    clock.now += 120
    hanging.frozen = False

    rescuer = make_app(FakeModel({"output": "recovered"}), [hanging.tool], store)
    sweep = await rescuer.recover_expired_runs(actor={"id": "sweeper"})

    assert {run.id: run.status for run in sweep.recovered} == {
        healthy: "completed",
        wrong_shape: "failed",
    }
    failed = await rescuer.get_run(wrong_shape)
    assert failed.error is not None
    assert failed.error["code"] == "CHECKPOINT_UNSUPPORTED"
    assert {(s.run_id, s.code) for s in sweep.skipped} == {
        (newer, "CHECKPOINT_UNSUPPORTED"),
        (removed, "AGENT_NOT_FOUND"),
    }
    for run_id in (newer, removed):
        assert (await rescuer.get_run(run_id)).status == "running"
        assert run_id in caplog.text
    assert sweep.claimed == 3  # never the run of the agent this app lacks
    # A claimed run it skipped stays claimed until its lease lapses; then any sweep
    # retries it. The other agent's run is only reported.
    soon = await rescuer.recover_expired_runs(actor={"id": "sweeper"})
    assert soon == RecoverySweep(skipped=(SkippedRun(removed, "AGENT_NOT_FOUND", ANY),))
    clock.now += 120
    again = await rescuer.recover_expired_runs(actor={"id": "sweeper"})
    assert {s.run_id for s in again.skipped} == {newer, removed}
    assert again.claimed == 1
    for _, task in orphans:
        task.cancel()
    await asyncio.gather(*(task for _, task in orphans), return_exceptions=True)


class LockedRows(InMemoryRunStore):
    """A store whose rows a frozen worker still locks: claims find nothing, acquiring waits."""

    async def claim_expired_run(
        self, owner: str, seconds: float, *, names: Any = None
    ) -> tuple[str, RunLease] | None:
        return None

    async def acquire_lease(
        self, run_id: str, owner: str, seconds: float, *, status: str = "running"
    ) -> RunLease:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_sweep_reports_the_expired_runs_it_could_not_claim() -> None:
    clock = Clock()
    store = LockedRows(clock=clock)
    hanging = Hanging()
    run_id, task = await orphan(store, hanging)
    clock.now += 120
    rescuer = make_app(FakeModel(), [hanging.tool], store)
    sweep = await rescuer.recover_expired_runs(actor={"id": "sweeper"})
    assert sweep == RecoverySweep(unclaimed=(run_id,))
    task.cancel()


async def test_recover_run_honours_its_timeout_while_the_store_waits() -> None:
    clock = Clock()
    store = LockedRows(clock=clock)
    hanging = Hanging()
    run_id, task = await orphan(store, hanging)
    clock.now += 120
    rescuer = make_app(FakeModel(), [hanging.tool], store)
    with pytest.raises(FevexRunError) as caught:
        await asyncio.wait_for(rescuer.recover_run(run_id, actor={"id": "x"}, timeout=0.2), 30)
    assert caught.value.code == "RUN_TIMEOUT"
    assert (await rescuer.get_run(run_id)).status == "running"
    task.cancel()


class RefusesWrites(InMemoryRunStore):
    """A store that refuses one event type's commits, as a store refuses a value."""

    refused = "model.completed"

    async def commit_execution(self, commit: Any) -> None:
        if any(event.type == self.refused for event in commit.events):
            raise FevexRunError("STORE_ERROR", "refused", category="store")
        await super().commit_execution(commit)


async def test_a_commit_the_store_refuses_ends_the_run_failed_not_running() -> None:
    app = make_app(FakeModel({"output": "hi"}), [], RefusesWrites())
    error, run = await failure(app)
    assert error.code == "STORE_ERROR"
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["code"] == "STORE_ERROR"
    assert "model.completed" not in [e.type for e in await app.list_events(run.id)]


class BusyOnce(InMemoryRunStore):
    """A store whose first renewal meets a busy database."""

    busy = 1

    async def renew_lease(self, run_id: str, lease: RunLease, seconds: float) -> RunLease:
        if self.busy:
            self.busy -= 1
            raise FevexRunError("STORE_BUSY", "busy", recoverable=True, category="store")
        return await super().renew_lease(run_id, lease, seconds)


async def test_a_busy_store_at_renewal_is_retried_not_a_lost_lease() -> None:
    @define_tool(name="lookup", description="Look up.")
    async def lookup(query: Query) -> dict[str, Any]:
        await asyncio.sleep(0.5)  # past the first renewal at a third of the lease
        return {}

    store = BusyOnce()
    app = make_app(
        FakeModel(calls(("c1", "lookup")), {"output": "done"}), [lookup], store, lease_seconds=0.6
    )
    result = await asyncio.wait_for(app.run_agent("worker", "go"), 30)
    assert result.output == "done"
    assert store.busy == 0


async def test_a_pass_that_loses_a_run_to_another_worker_does_not_report_it() -> None:
    clock = Clock()
    store = InMemoryRunStore(clock=clock)
    hanging = Hanging()
    run_id, task = await orphan(store, hanging)
    clock.now += 120
    hanging.frozen = False

    class Stalls:
        """A model that stalls until another worker has taken the run over."""

        async def stream(self, input: Any) -> Any:
            clock.now += 120  # this pass froze past its lease ...
            other = make_app(FakeModel({"output": "theirs"}), [hanging.tool], store)
            await other.recover_run(run_id, actor={"id": "other"})  # ... and lost the run
            yield  # pragma: no cover - the lost lease stops this pass first

    rescuer = make_app(Stalls(), [hanging.tool], store)
    sweep = await asyncio.wait_for(rescuer.recover_expired_runs(actor={"id": "sweeper"}), 30)
    assert sweep.recovered == sweep.skipped == ()
    assert sweep.claimed == 1
    assert (await rescuer.get_run(run_id)).status == "completed"
    task.cancel()


class LosesTheTakeover(InMemoryRunStore):
    """Another worker takes the run over while this one is still opening it."""

    async def commit_execution(self, commit: Any) -> None:
        if any(event.type == "run.recovered" for event in commit.events):
            raise FevexRunError("LEASE_LOST", "taken over", category="store")
        await super().commit_execution(commit)


async def test_a_pass_that_loses_a_run_while_taking_it_over_does_not_report_it() -> None:
    clock = Clock()
    store = LosesTheTakeover(clock=clock)
    hanging = Hanging()
    _, task = await orphan(store, hanging)
    clock.now += 120
    rescuer = make_app(FakeModel({"output": "x"}), [hanging.tool], store)
    sweep = await asyncio.wait_for(rescuer.recover_expired_runs(actor={"id": "sweeper"}), 30)
    assert sweep.recovered == sweep.skipped == ()
    assert sweep.claimed == 1
    task.cancel()
