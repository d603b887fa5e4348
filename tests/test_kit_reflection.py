"""Reflection over run history (``fevex.kits.reflection``): an agent run that answers from
fixed metadata only, on the in-memory store, SQLite and PostgreSQL, against a scripted
model that plays by the rules, and one that breaks each of them."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fevex import (
    Fevex,
    FevexConfigurationError,
    FevexRunError,
    create_fevex,
    define_agent,
    define_tool,
)
from fevex.kits.reflection import (
    Reflection,
    ReflectionReport,
    SourcePage,
    define_reflection,
    log_source,
    run_history_source,
)
from fevex.models import ModelInput, ModelResult, ToolCall
from fevex.observability import ContentPolicy, InMemoryTraceExporter, Observability
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel, model_input_json

pytestmark = pytest.mark.anyio

SECRET = "sk-live-9f8e7d6c5b4a3f2e"
MARKER = "PLANTED-MARKER-7731"
ACME = ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="acme")
OTHER = ExecutionContext(actor={"id": "olga", "type": "user"}, namespace="other")


@define_tool(name="lookup", description="Look an account up.")
async def lookup(account: str) -> str:
    return f"account {account}: {SECRET} {MARKER}"


@define_tool(name="explode", description="Charge an account.")
async def explode(account: str) -> str:
    raise RuntimeError(f"the database said {SECRET} {MARKER}")


def _worker_step(model_input: ModelInput) -> ModelResult:
    """The history's own agent: calls a tool whose output or error carries the secret,
    then answers with it in its message."""
    last = model_input.messages[-1]
    if last.role == "tool":
        return ModelResult(output=f"Done; I saw {SECRET} and {MARKER}.")
    text = json.dumps([message.to_json() for message in model_input.messages])
    tool = "explode" if "charge" in text else "lookup"
    return ModelResult(tool_calls=[ToolCall(f"call-{tool}", tool, {"account": MARKER})])


# -- the scripted reflection model ---------------------------------------------------------


@dataclass
class Script:
    """A reflection model: each step is ``fn(seen)``, where ``seen`` is what the last tool
    call gave back (its output, or its error as ``{"error": message}``); every request is
    kept in ``model.calls``."""

    steps: list[Callable[[Any], ModelResult | str]]
    results: list[Any] = field(default_factory=list)
    model: FunctionModel = field(init=False)

    def __post_init__(self) -> None:
        self.model = FunctionModel(self._step)

    async def _step(self, model_input: ModelInput) -> ModelResult | str:
        seen = _last_result(model_input)
        self.results.append(seen)
        index = len(self.model.calls) - 1
        step = self.steps[min(index, len(self.steps) - 1)]
        answer = step(seen)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return answer

    def requests(self) -> str:
        return json.dumps([model_input_json(call) for call in self.model.calls])

    def errors(self) -> list[str]:
        return [
            seen["error"] for seen in self.results if isinstance(seen, dict) and "error" in seen
        ]


def _last_result(model_input: ModelInput) -> Any:
    last = model_input.messages[-1]
    if last.role != "tool":
        return None
    part = last.content[-1]
    output = getattr(part, "output", None)
    if getattr(part, "is_error", False):
        return {"error": output.get("message") if isinstance(output, dict) else str(output)}
    return output


_calls = iter(range(1, 1_000_000))


def query(**arguments: Any) -> ModelResult:
    return ModelResult(tool_calls=[ToolCall(f"q{next(_calls)}", "history_query", arguments)])


def discover(**filters: Any) -> Callable[[Any], ModelResult]:
    return lambda seen: query(action="discover", **filters)


def read_failed(seen: Any) -> ModelResult:
    failed = [item for item in seen["items"] if item.get("status") == "failed"]
    return query(action="read", run_id=failed[0]["run_id"])


def submit_citing(seen: Any) -> ModelResult:
    ids = [item["evidence_id"] for item in seen["items"]]
    report = {
        "observed": [{"statement": "The failed run ended on a tool failure.", "evidence": ids}],
        "hypotheses": [{"statement": "The charge tool is unreliable.", "evidence": []}],
        "recommendations": ["Add a retry to the charge tool."],
        "limitations": [],
    }
    return query(action="submit", report=report)


def done(seen: Any) -> str:
    return "Reported."


# -- the apps --------------------------------------------------------------------------------


def _allow(*_: Any) -> None:
    return None


def _app(
    url: str | None,
    script: Script,
    reflection: Reflection,
    *,
    exporter: InMemoryTraceExporter | None = None,
    run_store: Any = None,
) -> Fevex:
    worker = define_agent(name="support", instructions="Help.", tools=[lookup, explode])
    observability = None
    if exporter is not None:
        # Spans carry every content they may: a log source must still pass none of it on.
        content = ContentPolicy(include={"input", "output", "error_message"}, sensitive_keys=())
        observability = Observability(exporters=[exporter], content=content, export_interval=0.05)
    return create_fevex(
        models={"default": FunctionModel(_worker_step), "reflector": script.model},
        agents=[worker, reflection.agent],
        run_store=run_store if run_store is not None else url,
        observability=observability,
    )


def _reflection(source: Any = None, **bounds: Any) -> Reflection:
    return define_reflection(
        model="reflector",
        source=source or run_history_source(authorize=_allow),
        authorize=_allow,
        **bounds,
    )


async def _history(app: Fevex) -> dict[str, str]:
    """Planted runs: one completed and one failed in ``acme``, one in ``other``; the secret
    and the marker are in their inputs, tool outputs, messages and error text."""
    ok = await app.run_agent("support", f"look {SECRET} {MARKER} up", context=ACME)
    failed = f"run_{os.urandom(8).hex()}"
    with pytest.raises(FevexRunError):
        await app.run_agent("support", f"charge {SECRET} {MARKER}", context=ACME, run_id=failed)
    other = await app.run_agent("support", f"look {SECRET} up", context=OTHER)
    return {"ok": ok.run_id, "failed": failed, "other": other.run_id}


def _codes(script: Script) -> list[str]:
    return [error.split(":", 1)[0] for error in script.errors()]


def _kinds(report: ReflectionReport) -> set[str]:
    return {limitation.kind for limitation in report.limitations}


# -- the tests -----------------------------------------------------------------------------


async def test_a_reflection_answers_from_metadata_only_on_every_store(url: str | None) -> None:
    script = Script([discover(), read_failed, submit_citing, done])
    reflection = _reflection()
    exporter = InMemoryTraceExporter()
    async with _app(url, script, reflection, exporter=exporter) as app:
        runs = await _history(app)
        report = await reflection.run(app, "Why did the charge fail?", context=ACME)

        assert report.observed
        assert report.observed[0].evidence
        assert report.hypotheses[0].statement == "The charge tool is unreliable."
        assert report.recommendations == ("Add a retry to the charge tool.",)
        assert report.persisted is False
        assert report.coverage.runs_discovered >= 2
        assert report.coverage.runs_read == 1
        assert report.coverage.pages == 2
        assert report.coverage.model_calls == 4
        # Neither the secret nor the marker reached the model, nor the other namespace.
        requests = script.requests()
        assert SECRET not in requests
        assert MARKER not in requests
        assert runs["other"] not in requests
        assert runs["failed"] in requests
        assert "TOOL_FAILED" in requests
        assert SECRET not in json.dumps(report.to_json())
        # An ordinary agent run: listed, completed, traced.
        listed = await app.list_runs(name="reflection", limit=5)
        assert report.run_id in [run.id for run in listed]
        assert (await app.get_run(report.run_id)).status == "completed"
        await app.flush_observability()
        run_spans = [
            span
            for span in exporter.of_kind("run")
            if span.attributes.get("fevex.run.id") == report.run_id
        ]
        assert run_spans
        assert exporter.of_kind("tool")


async def test_a_made_up_evidence_id_is_refused_and_can_be_corrected() -> None:
    def made_up(seen: Any) -> ModelResult:
        report = {"observed": [{"statement": "It failed.", "evidence": ["ev-0000-1"]}]}
        return query(action="submit", report=report)

    script = Script([discover(), made_up, lambda seen: submit_again(script), done])
    reflection = _reflection(max_calls=5)
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "What failed?", context=ACME)

    assert _codes(script) == ["REFLECTION_EVIDENCE_UNKNOWN"]
    assert "ev-0000-1" in script.errors()[0]
    assert [finding.statement for finding in report.observed] == ["Corrected."]
    assert "unsupported" not in _kinds(report)


def submit_again(script: Script) -> ModelResult:
    discovered = script.results[1]
    ids = [item["evidence_id"] for item in discovered["items"]][:1]
    return query(
        action="submit", report={"observed": [{"statement": "Corrected.", "evidence": ids}]}
    )


async def test_a_finding_still_unsupported_when_the_budget_ends_is_dropped() -> None:
    def mixed(seen: Any) -> ModelResult:
        real = script.results[1]["items"][0]["evidence_id"]
        observed = [
            {"statement": "Seen.", "evidence": [real]},
            {"statement": "Imagined.", "evidence": [real, "ev-made-up"]},
        ]
        return query(action="submit", report={"observed": observed})

    script = Script([discover(), mixed])
    reflection = _reflection(max_calls=3)
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "What happened?", context=ACME)
        run = await app.get_run(report.run_id)

    assert [finding.statement for finding in report.observed] == ["Seen."]
    assert {"unsupported", "budget", "protocol"} <= _kinds(report)
    assert run.status == "failed"
    assert run.error is not None
    assert run.error["code"] == "MAX_STEPS_EXCEEDED"


async def test_another_namespace_is_never_discovered_nor_read(url: str | None) -> None:
    planted: dict[str, str] = {}
    script = Script(
        [
            discover(),
            lambda seen: query(action="read", run_id=planted["other"]),
            lambda seen: query(action="submit", report={}),
            done,
        ]
    )
    reflection = _reflection(max_calls=5)
    async with _app(url, script, reflection) as app:
        planted.update(await _history(app))
        report = await reflection.run(app, "What did other tenants do?", context=ACME)

    discovered = {item["run_id"] for item in script.results[1]["items"]}
    assert planted["other"] not in discovered
    assert planted["ok"] in discovered
    assert _codes(script) == ["REFLECTION_RUN_NOT_DISCOVERED"]
    assert report.coverage.runs_read == 0
    assert report.coverage.events_read == 0
    assert "protocol" in _kinds(report)


async def test_the_source_refuses_a_run_of_another_namespace_even_when_named() -> None:
    """The namespace rule is the source's own, not only the discovery's: a read of a run
    outside the caller's scope is refused however the operation came to name it."""
    script = Script([done])
    async with _app(None, script, _reflection()) as app:
        runs = await _history(app)
        from fevex.kits.reflection import SourceScope

        source = run_history_source(authorize=_allow)
        scope = SourceScope(app, ACME, "run_self")
        with pytest.raises(FevexRunError) as refused:
            await source.read(scope, runs["other"], None, 10)
        page = await source.read(scope, runs["ok"], None, 100)

    assert refused.value.code == "REFLECTION_RUN_OUT_OF_SCOPE"
    assert page.items
    assert all(item["run_id"] == runs["ok"] for item in page.items)


async def test_every_budget_ends_in_a_refusal_and_a_limitation() -> None:
    cases: list[tuple[dict[str, int], list[Callable[[Any], Any]], str]] = [
        ({"max_pages": 1}, [discover(), discover(), done], "REFLECTION_BUDGET_EXHAUSTED"),
        (
            {"max_events": 3, "max_calls": 6},
            [discover(), read_failed, lambda seen: read_again(script), done],
            "REFLECTION_BUDGET_EXHAUSTED",
        ),
        ({"max_calls": 4, "reserve_calls": 2}, [discover(), read_failed, done], ""),
    ]
    for bounds, steps, _code in cases:
        script = Script(steps)
        reflection = _reflection(**bounds)
        async with _app(None, script, reflection) as app:
            await _history(app)
            report = await reflection.run(app, "What happened?", context=ACME)
        assert _codes(script) == ["REFLECTION_BUDGET_EXHAUSTED"], bounds
        assert "budget" in _kinds(report), bounds
        if "max_events" in bounds:
            assert report.coverage.events_read == 3
            assert report.coverage.gaps
            assert not report.coverage.complete
            assert "incomplete_read" in _kinds(report)
        if "reserve_calls" in bounds:
            # Call 2 of 4 would leave 2, all kept for the report: the read was refused.
            assert report.coverage.runs_read == 0


def read_again(script: Script) -> ModelResult:
    failed = [item for item in script.results[1]["items"] if item.get("status") == "failed"]
    return query(action="read", run_id=failed[0]["run_id"], cursor=script.results[2]["cursor"])


async def test_the_evidence_characters_cut_a_page_short() -> None:
    script = Script([discover(), discover(), done])
    reflection = _reflection(max_evidence_chars=400)
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "What happened?", context=ACME)

    first = script.results[1]
    assert first["truncated"] is True
    assert len(first["items"]) == 1
    assert report.coverage.evidence_chars <= 400
    assert len(script.results[2]["items"]) <= 1
    assert not report.coverage.complete
    assert "budget" in _kinds(report)


async def test_the_model_call_budget_bounds_the_run() -> None:
    script = Script([discover()])  # discovers forever
    reflection = _reflection(max_calls=3, reserve_calls=0, max_pages=10)
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "What happened?", context=ACME)
        run = await app.get_run(report.run_id)

    assert len(script.model.calls) == 3
    assert run.status == "failed"
    assert run.error
    assert run.error["code"] == "MAX_STEPS_EXCEEDED"
    assert report.observed == ()
    assert {"budget", "protocol"} <= _kinds(report)


async def test_a_malformed_report_is_refused_and_kept_as_a_limitation() -> None:
    script = Script(
        [discover(), lambda seen: query(action="submit", report={"observed": "it broke"}), done]
    )
    reflection = _reflection()
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "What happened?", context=ACME)

    assert _codes(script) == ["REFLECTION_REPORT_INVALID"]
    assert report.observed == ()
    messages = [limitation.message for limitation in report.limitations]
    assert "a malformed report was refused." in messages
    assert any("no report was accepted" in message for message in messages)


async def test_authorize_is_asked_first_and_holds_its_contract() -> None:
    asked: list[Any] = []

    def refuse(question: str, context: ExecutionContext) -> None:
        asked.append((question, context.namespace))
        raise PermissionError("not an auditor")

    script = Script([done])
    for authorize, code in (
        (refuse, "REFLECTION_UNAUTHORIZED"),
        (lambda *_: True, "KIT_CALLBACK_CONTRACT"),
    ):
        reflection = define_reflection(
            model="reflector", source=run_history_source(authorize=_allow), authorize=authorize
        )
        async with _app(None, script, reflection) as app:
            with pytest.raises(FevexRunError) as failed:
                await reflection.run(app, "Why?", context=ACME)
            assert failed.value.code == code
            assert await app.list_runs(name="reflection") == []
    assert asked == [("Why?", "acme")]
    assert script.model.calls == []


async def test_the_source_authorizes_every_query() -> None:
    queries: list[dict[str, Any]] = []

    def no_reads(query_: dict[str, Any], context: ExecutionContext) -> None:
        queries.append(query_)
        query_["action"] = "tampered"  # a copy: changes nothing
        if queries[-1]["actor"]["id"] != "ana" or len(queries) > 1:
            raise PermissionError("discovery only")

    script = Script([discover(), read_failed, lambda seen: query(action="submit", report={}), done])
    reflection = _reflection(source=run_history_source(authorize=no_reads), max_calls=5)
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "What happened?", context=ACME)

    assert [q["namespace"] for q in queries] == ["acme", "acme"]
    assert _codes(script) == ["REFLECTION_QUERY_REFUSED"]
    assert "refused" in _kinds(report)

    broken = _reflection(source=run_history_source(authorize=lambda *_: False))
    script = Script([discover(), done])
    async with _app(None, script, broken) as app:
        with pytest.raises(FevexRunError) as failed:
            await broken.run(app, "What happened?", context=ACME)
        runs = await app.list_runs(name="reflection")
    assert failed.value.code == "KIT_CALLBACK_CONTRACT"
    assert [run.status for run in runs] == ["failed"]


def _reader(exporter: InMemoryTraceExporter) -> Callable[[str, int, int], list[Any]]:
    def read(trace_id: str, offset: int, limit: int) -> list[Any]:
        spans = [span for span in exporter.spans if span.trace_id == trace_id]
        return spans[offset : offset + limit]

    return read


async def test_a_log_source_reads_exported_spans_without_their_content() -> None:
    exporter = InMemoryTraceExporter()
    traces: list[str] = []

    def read_run(seen: Any) -> ModelResult:
        return query(action="read", run_id=seen["items"][0]["run_id"])

    script = Script([discover(), read_run, submit_citing, done])
    # The app registers the reflection's agent once; a reflection per trace, defined with
    # the same bounds, runs as that agent.
    registered = _reflection()
    async with _app(None, script, registered, exporter=exporter) as app:
        with pytest.raises(FevexRunError):
            await app.run_agent("support", f"charge {SECRET} {MARKER}", context=ACME)
        await app.flush_observability()
        failed = next(s for s in exporter.of_kind("run") if s.status == "error")
        traces.append(failed.trace_id)
        assert any(SECRET in json.dumps(dict(s.attributes)) for s in exporter.spans)
        traced = log_source(
            _reader(exporter), id="spans", trace_id=failed.trace_id, authorize=_allow
        )
        reflection = _reflection(source=traced)
        report = await reflection.run(app, "Why did the charge fail?", context=ACME)

    requests = script.requests()
    assert SECRET not in requests
    assert MARKER not in requests
    items = script.results[2]["items"]
    assert {item["span_kind"] for item in items} >= {"run", "model", "tool"}
    assert all(item["trace_id"] == traces[0] for item in items)
    assert any(item.get("error_code") == "TOOL_FAILED" for item in items)
    assert report.observed
    assert report.coverage.source == "spans"


async def test_expired_data_is_not_returned_and_not_delivered() -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)

    def at(seconds: float) -> str:
        return (now + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")

    records = [
        {
            "trace_id": "t1",
            "span_id": "a1",
            "kind": "run",
            "status": "ok",
            "attributes": {"fevex.run.id": "run_old"},
            "expires_at": at(-60),
        },
        {
            "trace_id": "t1",
            "span_id": "b2",
            "kind": "run",
            "status": "error",
            "error_code": "TOOL_FAILED",
            "attributes": {"fevex.run.id": "run_new"},
            "expires_at": at(1.5),
        },
        {
            "trace_id": "t1",
            "span_id": "c3",
            "kind": "run",
            "status": "ok",
            "attributes": {"fevex.run.id": "run_kept"},
        },
    ]

    async def later(seen: Any) -> ModelResult:
        await asyncio.sleep(1.6)  # the first run's record expires before delivery
        observed = [
            {"statement": f"{item['run_id']} was seen.", "evidence": [item["evidence_id"]]}
            for item in seen["items"]
        ]
        return query(action="submit", report={"observed": observed})

    script = Script([discover(), later, done])
    source = log_source(
        lambda trace, offset, limit: records[offset : offset + limit],
        id="log",
        trace_id="t1",
        authorize=_allow,
    )
    reflection = _reflection(source=source)
    async with _app(None, script, reflection) as app:
        report = await reflection.run(app, "What happened?", context=ACME)

    assert [item["run_id"] for item in script.results[1]["items"]] == ["run_new", "run_kept"]
    assert [finding.statement for finding in report.observed] == ["run_kept was seen."]
    assert [limitation.kind for limitation in report.limitations].count("expired") == 2
    assert report.expires_at is None


async def test_persist_keeps_the_report_in_the_callers_namespace() -> None:
    script = Script([discover(), read_failed, submit_citing, done])
    reflection = _reflection()
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "Why did the charge fail?", context=ACME, persist=True)
        assert app.memory_store is not None
        kept = await app.memory_store.search("acme", "failed run tool failure")
        elsewhere = await app.memory_store.search("other", "failed run tool failure")

    assert report.persisted is True
    assert len(kept) == 1
    assert elsewhere == []
    stored = json.loads(kept[0].content)
    assert stored["run_id"] == report.run_id
    assert stored["persisted"] is True
    assert SECRET not in kept[0].content
    assert MARKER not in kept[0].content


def test_run_sync_is_the_blocking_twin(tmp_path: Any) -> None:
    script = Script([discover(), read_failed, submit_citing, done])
    reflection = _reflection()
    with _app(f"sqlite:///{tmp_path / 'runs.db'}", script, reflection) as app:
        with pytest.raises(FevexRunError):
            app.run_agent_sync("support", "charge it", context=ACME)
        report = reflection.run_sync(app, "Why did the charge fail?", context=ACME)
    assert report.observed
    assert report.coverage.runs_read == 1


def test_bounds_are_checked_when_defined() -> None:
    source = run_history_source(authorize=_allow)
    for bounds in ({"max_calls": 2, "reserve_calls": 1}, {"max_pages": 0}, {"max_events": True}):
        with pytest.raises(FevexConfigurationError) as invalid:
            define_reflection(model="m", source=source, authorize=_allow, **bounds)
        assert invalid.value.code == "INVALID_REFLECTION"
    with pytest.raises(FevexRunError) as contract:
        define_reflection(model="m", source=source, authorize="yes")  # type: ignore[arg-type]
    assert contract.value.code == "KIT_CALLBACK_CONTRACT"


@pytest.fixture(autouse=True)
def _no_leftover_operations() -> Iterator[None]:
    from fevex.kits.reflection import definition

    yield
    assert definition._OPERATIONS == {}


class _LeakySource:
    """A source of the app's own that hands back more than metadata: the reflection
    projects its items again, so only the fixed fields, of their shapes, reach the model."""

    id = "leaky"

    async def discover(self, scope: Any, filters: Any, cursor: Any, limit: int) -> SourcePage:
        item = {
            "type": "run",
            "run_id": "run_1",
            "status": "failed",
            "input": SECRET,
            "name": f"has spaces {MARKER}",
            "error_code": f"not a code: {SECRET}",
            "usage": {"input_tokens": 3, "note": MARKER},
        }
        return SourcePage((item,))

    async def read(self, scope: Any, run_id: str, cursor: Any, limit: int) -> SourcePage:
        return SourcePage(({"type": "event", "run_id": run_id, "payload": {"x": SECRET}},))


async def test_every_item_is_projected_again_whatever_the_source_returns() -> None:
    script = Script(
        [discover(), lambda seen: query(action="read", run_id="run_1"), submit_citing, done]
    )
    reflection = _reflection(source=_LeakySource())
    async with _app(None, script, reflection) as app:
        report = await reflection.run(app, "What happened?", context=ACME)

    requests = script.requests()
    assert SECRET not in requests
    assert MARKER not in requests
    shown = script.results[1]["items"][0]
    assert set(shown) == {"evidence_id", "type", "run_id", "status", "usage"}
    assert shown["usage"] == {"input_tokens": 3}
    assert script.results[2]["items"][0] == {
        "evidence_id": script.results[2]["items"][0]["evidence_id"],
        "type": "event",
        "run_id": "run_1",
    }
    assert report.observed


async def test_a_reflection_run_not_started_by_run_reads_nothing() -> None:
    script = Script([discover(), done])
    reflection = _reflection()
    async with _app(None, script, reflection) as app:
        await _history(app)
        with pytest.raises(FevexRunError) as failed:
            await app.run_agent(reflection.agent, "Why?", context=ACME)

    assert failed.value.code == "REFLECTION_OPERATION_UNKNOWN"
    assert len(script.model.calls) == 1


async def test_a_report_the_memory_store_refuses_is_delivered_unkept() -> None:
    def long_report(seen: Any) -> ModelResult:
        ids = [script.results[1]["items"][0]["evidence_id"]]
        observed = [{"statement": "x" * 1_500, "evidence": ids} for _ in range(8)]
        return query(action="submit", report={"observed": observed})

    script = Script([discover(), long_report, done])
    reflection = _reflection()
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "What happened?", context=ACME, persist=True)

    assert report.persisted is False
    assert len(report.observed) == 8
    assert report.limitations[-1].kind == "persistence"


async def test_a_made_up_cursor_or_filter_is_answered_not_fatal() -> None:
    script = Script(
        [
            discover(cursor="run_made_up"),
            discover(kind=""),
            discover(status="exploded"),
            lambda seen: query(action="submit", report={}),
            done,
        ]
    )
    reflection = _reflection(max_calls=6, max_pages=6)
    async with _app(None, script, reflection) as app:
        await _history(app)
        report = await reflection.run(app, "What happened?", context=ACME)
        run = await app.get_run(report.run_id)

    assert _codes(script) == ["INVALID_CURSOR", "INVALID_ARGUMENT", "REFLECTION_QUERY_INVALID"]
    assert run.status == "completed"
    assert "protocol" in _kinds(report)


async def test_a_broken_log_reader_ends_the_reflection_with_its_code() -> None:
    script = Script([discover(), done])
    source = log_source(
        lambda trace, offset, limit: "not records", id="log", trace_id="t", authorize=_allow
    )
    reflection = _reflection(source=source)
    async with _app(None, script, reflection) as app:
        with pytest.raises(FevexRunError) as broken:
            await reflection.run(app, "What happened?", context=ACME)
        with pytest.raises(FevexRunError) as invalid:
            await reflection.run(app, {"not": "text"}, context=ACME)  # type: ignore[arg-type]
        runs = await app.list_runs(name="reflection")

    assert broken.value.code == "REFLECTION_SOURCE_INVALID"
    assert invalid.value.code == "KIT_REQUEST_INVALID"
    assert [run.status for run in runs] == ["failed"]
