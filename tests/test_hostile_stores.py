"""Hostile values, leaked credentials and broken runs on the real stores, SQLite and
PostgreSQL: every run ends with a stable code, no store refuses what fevex lets in, no
stored byte holds a credential, and one bad run never stops recovery of the others."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from fevex import (
    Fevex,
    FevexRunError,
    ToolContext,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.models import ModelInput
from fevex.testing import FakeModel

pytestmark = pytest.mark.anyio

SECRET = "sk-\\hostile'\"quote-7c3e9d1a"
APP_MODULE = Path(__file__).resolve().parent / "durable" / "hostile_app.py"


def lookup_call(input: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": "c1", "name": "lookup", "input": input}]}


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


def make_app(store_url: str, model: Any, tool: Any, **options: Any) -> tuple[Fevex, list[str]]:
    """The app, and the ids of the runs it starts (from the observed ``run.started``)."""
    started: list[str] = []

    def observe(event: Any) -> None:
        if event.type == "run.started":
            started.append(event.run_id)

    app = create_fevex(
        models={"default": model},
        agents=[define_agent(name="worker", instructions="Work.", tools=["lookup"])],
        tools=[tool],
        run_store=store_url,
        on_event=observe,
        **options,
    )
    return app, started


# What the tool returns for each ``{"output": name}`` input.
OUTPUTS: dict[str, Any] = {"nul": {"text": "a \x00 b"}, "inf": [float("-inf")]}


@define_tool(name="lookup", description="Look up.")
def echo(query: dict[str, Any]) -> Any:
    return OUTPUTS.get(query.get("output", ""), {})


@pytest.mark.parametrize(
    ("response", "code"),
    [
        ({"output": "NUL \x00 in the answer"}, "MODEL_OUTPUT_UNSTORABLE"),
        ({"output": "lone \udfff surrogate"}, "MODEL_OUTPUT_UNSTORABLE"),
        (lookup_call({"q": float("nan")}), "TOOL_INPUT_INVALID"),
        (lookup_call({"q": "\x00"}), "TOOL_INPUT_INVALID"),
        (lookup_call({"q": nested(10_000)}), "TOOL_INPUT_INVALID"),
        (lookup_call({"q": {1, 2}}), "TOOL_INPUT_INVALID"),
        (lookup_call({"output": "nul"}), "TOOL_OUTPUT_INVALID"),
        (lookup_call({"output": "inf"}), "TOOL_OUTPUT_INVALID"),
    ],
    ids=["nul-text", "surrogate", "nan-input", "nul-input", "deep", "set", "nul-out", "inf-out"],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["batched", "streamed"])
async def test_unstorable_values_fail_the_run_alike_on_every_store(
    store_url: str, response: dict[str, Any], code: str, streamed: bool
) -> None:
    app, started = make_app(store_url, FakeModel(response, chunk_size=4), echo)
    try:
        with pytest.raises(FevexRunError) as caught:
            if streamed:
                await asyncio.wait_for(_drain(app.stream_agent("worker", "go")), 60)
            else:
                await asyncio.wait_for(app.run_agent("worker", "go"), 60)
        assert caught.value.code == code
        (run_id,) = started
        run = await app.get_run(run_id)
        assert run.status == "failed"
        assert run.error is not None
        assert run.error["code"] == code
        types = [e.type for e in await app.list_events(run_id)]
        assert types[-1] == "run.failed"
        assert ("tool.started" in types) == code.startswith("TOOL_OUTPUT")
        # One PostgreSQL database serves every test: only this run counts.
        assert run_id not in await app.run_store.expired_run_ids()
    finally:
        await app.close()


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


async def test_an_error_message_with_a_nul_is_stored_on_every_store(store_url: str) -> None:
    @define_tool(name="lookup", description="Look up.")
    def broken(query: dict[str, Any]) -> Any:
        raise ValueError("a NUL \x00 and a lone \ud800 in the message")

    app, started = make_app(store_url, FakeModel(lookup_call({"q": 1})), broken)
    try:
        with pytest.raises(FevexRunError) as caught:
            await app.run_agent("worker", "go")
        assert caught.value.code == "TOOL_FAILED"
        run = await app.get_run(started[0])
        assert run.status == "failed"
        assert run.error is not None
        assert run.error["code"] == "TOOL_FAILED"
    finally:
        await app.close()


def spellings(secret: str) -> list[bytes]:
    forms = {secret, repr(secret)[1:-1], json.dumps(secret)[1:-1], secret[:10], secret[-10:]}
    return [form.encode() for form in forms]


@pytest.mark.parametrize(
    "raise_with",
    [
        lambda key: KeyError(key),
        lambda key: RuntimeError(json.dumps({"headers": {"authorization": f"Bearer {key}"}})),
        lambda key: ValueError(repr([key])),
    ],
    ids=["key-error", "json-escaped", "repr"],
)
async def test_no_spelling_of_a_credential_reaches_a_store(
    store_url: str, raise_with: Any, caplog: pytest.LogCaptureFixture, stored_bytes: Any
) -> None:
    caplog.set_level(logging.DEBUG)

    @define_tool(name="lookup", description="Look up.", credentials=["api"])
    async def leaky(query: dict[str, Any], context: ToolContext) -> Any:
        raise raise_with(await context.get_credential("api"))

    app, started = make_app(
        store_url, FakeModel(lookup_call({"q": 1})), leaky, credentials={"api": SECRET}
    )
    try:
        with pytest.raises(FevexRunError) as caught:
            await app.run_agent("worker", "go")
        run = await app.get_run(started[0])
        events = await app.list_events(run.id)
    finally:
        await app.close()
    assert run.status == "failed"
    kept = await asyncio.to_thread(stored_bytes, store_url)
    assert run.id.encode() in kept  # the scan does see what the store holds
    written = (
        kept
        + json.dumps([run.to_json(), [e.payload for e in events]]).encode()
        + f"{caught.value}{caught.value!r}{caplog.text}".encode()
    )
    for spelling in spellings(SECRET):
        assert spelling not in written


# -- recovery: one bad run never stops the others -------------------------------------


class Blocked:
    """A model that never answers: the worker's run stays inside its first model step."""

    async def stream(self, input: ModelInput) -> Any:
        await asyncio.Event().wait()
        yield  # pragma: no cover - never reached


async def orphan(store_url: str, agent: str) -> str:
    """A running run whose worker lost its lease and stopped, as a frozen worker does."""
    started: list[str] = []
    app = create_fevex(
        models={"default": Blocked()},
        agents=[
            define_agent(name="worker", instructions="Work."),
            define_agent(name="retired", instructions="Old."),
        ],
        run_store=store_url,
        on_event=lambda event: started.append(event.run_id),
        lease_seconds=0.4,
    )

    async def renewal_fails(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the worker froze")

    app.run_store.renew_lease = renewal_fails  # type: ignore[method-assign]
    try:
        with pytest.raises(FevexRunError) as caught:
            await asyncio.wait_for(app.run_agent(agent, "go"), 30)
        assert caught.value.code == "LEASE_LOST"
    finally:
        await app.close()
    return started[0]


@pytest.mark.parametrize(
    "failure",
    [
        ConnectionError(f"could not reach postgresql://fevex:{SECRET}@db/runs"),
        FevexRunError("STORE_UNAVAILABLE", f"the store at {SECRET} is down", category="store"),
    ],
    ids=["exception", "fevex-error"],
)
async def test_a_failed_renewal_is_lease_lost_caused_by_the_stores_exception(
    store_url: str, failure: Exception
) -> None:
    app = create_fevex(
        models={"default": Blocked()},
        agents=[define_agent(name="worker", instructions="Work.")],
        run_store=store_url,
        lease_seconds=0.4,
    )

    async def renewal_fails(*args: Any, **kwargs: Any) -> Any:
        raise failure

    app.run_store.renew_lease = renewal_fails  # type: ignore[method-assign]
    try:
        with pytest.raises(FevexRunError) as caught:
            await asyncio.wait_for(app.run_agent("worker", "go"), 30)
    finally:
        await app.close()
    lost = caught.value
    assert lost.code == "LEASE_LOST"
    assert lost.__cause__ is failure
    described = {"type": type(failure).__name__}
    if isinstance(failure, FevexRunError):
        described["code"] = failure.code
    assert lost.details["cause"] == described
    # Described by type and code only: the store's text stays in the store's exception.
    told = f"{lost}{lost!r}{json.dumps(lost.to_json())}{json.dumps(lost.details)}"
    assert SECRET not in told


def set_checkpoint(store_url: str, run_id: str, text: str) -> None:
    if store_url.startswith("sqlite"):
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as db:
            db.execute("UPDATE fevex_runs SET checkpoint = ? WHERE id = ?", (text, run_id))
        return
    import psycopg

    dsn = store_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("UPDATE fevex_runs SET checkpoint = %s::jsonb WHERE id = %s", (text, run_id))


async def test_a_recovery_sweep_gets_past_every_kind_of_bad_run(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    healthy = await orphan(store_url, "worker")
    wrong_shape = await orphan(store_url, "worker")
    newer = await orphan(store_url, "worker")
    removed = await orphan(store_url, "retired")
    set_checkpoint(store_url, wrong_shape, '{"version": 1, "transcript": 7}')
    set_checkpoint(store_url, newer, '{"version": 99}')
    broken = [wrong_shape]
    if store_url.startswith("sqlite"):
        # Only SQLite keeps text that is not JSON at all; jsonb refuses it.
        not_json = await orphan(store_url, "worker")
        set_checkpoint(store_url, not_json, '{"version": 1, "transcr')
        broken.append(not_json)
    await asyncio.sleep(0.5)  # every lease expires

    rescuer = create_fevex(
        models={"default": FakeModel({"output": "recovered"})},
        agents=[define_agent(name="worker", instructions="Work.")],
        run_store=store_url,
        lease_seconds=30,
    )
    try:
        sweep = await asyncio.wait_for(rescuer.recover_expired_runs(actor={"id": "sweeper"}), 60)
        # One PostgreSQL database serves every test: only this test's runs count.
        mine = {healthy, newer, removed, *broken}
        statuses = {run.id: run.status for run in sweep.recovered if run.id in mine}
        assert statuses == {healthy: "completed", **{run_id: "failed" for run_id in broken}}
        for run_id in broken:
            run = await rescuer.get_run(run_id)
            assert run.error is not None
            assert run.error["code"] == "CHECKPOINT_UNSUPPORTED"
        assert {(s.run_id, s.code) for s in sweep.skipped if s.run_id in mine} == {
            (newer, "CHECKPOINT_UNSUPPORTED"),
            (removed, "AGENT_NOT_FOUND"),
        }
        assert not mine & set(sweep.unclaimed)
        for run_id in (newer, removed):
            assert (await rescuer.get_run(run_id)).status == "running"
        assert newer in caplog.text
        # Runs of agents the app lacks are logged together, with one of them as an example
        # (on the shared database, maybe another test's).
        assert "expired run(s) of agents this app does not have" in caplog.text
    finally:
        await rescuer.close()


async def test_fevex_recover_reports_bad_runs_and_exits_cleanly(store_url: str) -> None:
    healthy = await orphan(store_url, "worker")
    removed = await orphan(store_url, "retired")
    await asyncio.sleep(0.5)
    completed = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable, "-m", "fevex.cli", "recover",
            "--app", "hostile_app:build_app", "--store", store_url,
        ],
        cwd=APP_MODULE.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    lines = [json.loads(line) for line in completed.stdout.splitlines()]
    assert {"run_id": healthy, "status": "completed"} in lines
    assert {"run_id": removed, "status": "skipped", "code": "AGENT_NOT_FOUND"} in lines


UNSTORABLE_IDS = ["s\x00x", "s\ud800x", "s" * 257]


async def test_ids_and_cursors_no_store_can_keep_are_refused_alike(url: str | None) -> None:
    """What a client may pass to the app (a session id on start, filters, cursors, ids,
    a summary) gets the same code from every store, and never reaches one."""
    # The PostgreSQL database is shared by the session's tests: this test's own names.
    agent, session = f"guarded-{uuid.uuid4().hex[:8]}", f"ses-{uuid.uuid4().hex}"
    app = create_fevex(
        models={"default": FakeModel({"output": "done"})},
        agents=[define_agent(name=agent, instructions="Work.")],
        run_store=url,
    )
    try:
        result = await app.run_agent(agent, "go", session_id=session)
        codes: list[str] = []

        async def code_of(call: Any) -> str:
            with pytest.raises(FevexRunError) as refused:
                await call
            codes.append(refused.value.code)
            return refused.value.code

        for session_id in UNSTORABLE_IDS:
            assert await code_of(app.start_agent(agent, "go", session_id=session_id)) == (
                "INVALID_ARGUMENT"
            )
            assert await code_of(app.run_agent(agent, "go", session_id=session_id)) == (
                "INVALID_ARGUMENT"
            )
        for hostile in ("\x00", "\ud800"):
            assert await code_of(app.get_session(session + hostile)) == "SESSION_NOT_FOUND"
            assert await code_of(app.get_run(result.run_id + hostile)) == "RUN_NOT_FOUND"
            for field in ("kind", "name", "session_id", "parent_run_id"):
                filtered = app.list_runs(**{field: agent + hostile})
                assert await code_of(filtered) == "INVALID_ARGUMENT", field
                by_store = app.run_store.list_runs(**{field: agent + hostile})
                assert await code_of(by_store) == "INVALID_ARGUMENT", field
            cursor = (await app.list_events(result.run_id))[0].id + hostile
            assert await code_of(app.list_runs(after=result.run_id + hostile)) == "INVALID_CURSOR"
            assert await code_of(app.list_events(result.run_id, after=cursor)) == "INVALID_CURSOR"
            by_store_events = app.run_store.list_events(result.run_id, after=cursor)
            assert await code_of(by_store_events) == "INVALID_CURSOR"
            compacted = app.compact_session(session, f"summary {hostile}")
            assert await code_of(compacted) == "INVALID_ARGUMENT"
        assert not any(code.startswith("STORE_") for code in codes)
        runs = await app.list_runs(name=agent)
        assert [run.session_id for run in runs] == [session]
        assert (await app.get_session(session)).summary is None
    finally:
        await app.close()
