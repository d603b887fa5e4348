"""``GET /v1/runs/{run_id}/view`` against a real ``fevex serve`` process: the four layers
and the turn are ``project_run``'s of the same events, the spans cover the run's tree, and
another namespace learns nothing."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

import httpx2
import pytest
from examples.demo_app import build_app

from fevex.events import RunEvent, project_run
from fevex.http import AsyncFevexClient, FevexClient, FevexHttpError, create_http_app
from fevex.observability import InMemoryTraceExporter

GUARD = 60.0


def client(server: Any, name: str = "alice") -> FevexClient:
    return FevexClient(server.url, headers={"Authorization": f"Bearer {name}"}, timeout=GUARD)


def wait_for_status(alice: FevexClient, run_id: str, *statuses: str) -> Any:
    deadline = time.monotonic() + GUARD
    while (run := alice.get_run(run_id)).status not in statuses:
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
    return run


def all_events(alice: FevexClient, run_id: str) -> list[RunEvent]:
    events = alice.list_events(run_id)
    while True:
        more = alice.list_events(run_id, after=events[-1].id)
        if not more:
            return events
        events += more


def test_the_view_is_project_run_of_the_run_s_events(shared_server: Any) -> None:
    with client(shared_server) as alice:
        run = alice.start_agent("ticker", "2")
        wait_for_status(alice, run.id, "completed")
        view = alice.get_run_view(run.id)
        projected = project_run(all_events(alice, run.id))
    assert view["run_id"] == run.id
    assert view["state"] == [asdict(transition) for transition in projected.state]
    assert view["messages"] == [message.to_json() for message in projected.messages]
    assert [item["kind"] for item in view["stream"]] == [item.kind for item in projected.stream]
    calls = [item["call"] for item in view["stream"] if item["kind"] == "tool-call"]
    assert calls == [
        {"type": "tool-call", "id": "call-1", "name": "tick", "input": {"number": 1}},
        {"type": "tool-call", "id": "call-2", "name": "tick", "input": {"number": 2}},
    ]
    turn = projected.turn
    assert turn is not None
    assert view["turn"]["status"] == "completed"
    assert view["turn"]["duration_ms"] == turn.duration_ms
    assert view["turn"]["response"] == turn.response.to_json()  # type: ignore[union-attr]
    assert (view["turn"]["steps"], view["turn"]["tool_calls"]) == (3, 2)
    # One run span, a span per model step and one per tool call.
    kinds = sorted(span["kind"] for span in view["spans"])
    assert kinds == ["model"] * 3 + ["run"] + ["tool"] * 2
    assert all(span["run_id"] == run.id and not span["open"] for span in view["spans"])
    assert view["totals"]["runs"] == 1


def test_a_team_s_view_holds_its_child_s_spans_and_usage(shared_server: Any) -> None:
    with client(shared_server) as alice:
        team = alice.start_team("desk", "Charge the customer.")
        paused = wait_for_status(alice, team.id, "paused")
        (child_id,) = paused.pause["run_ids"]  # type: ignore[index]
        child = wait_for_status(alice, child_id, "paused")
        view = alice.get_run_view(team.id)
        assert view["turn"] is None  # not ended
        # The child's run span ended at its pause; the team's and its delegation are open.
        ended = {(s["kind"], s["run_id"]) for s in view["spans"] if not s["open"]}
        assert ("run", child_id) in ended
        still = {s["kind"] for s in view["spans"] if s["open"]}
        assert "team_delegation" in still
        assert view["totals"]["runs"] == 2
        approval = child.pause["approvals"][0]  # type: ignore[index]
        alice.resume_run(child_id, approval_id=approval["id"], decision="approve")
        wait_for_status(alice, team.id, "completed")
        view = alice.get_run_view(team.id)
        child_view = alice.get_run_view(child_id)
    assert not any(span["open"] for span in view["spans"])
    assert {s["run_id"] for s in view["spans"]} == {team.id, child_id}
    delegation = next(s for s in view["spans"] if s["kind"] == "team_delegation")
    child_root = next(s for s in view["spans"] if s["kind"] == "run" and s["run_id"] == child_id
                      and s["attributes"]["fevex.execution.opening"] == "started")  # fmt: skip
    assert child_root["parent_span_id"] == delegation["span_id"]
    assert view["totals"]["usage"] == child_view["totals"]["usage"]
    assert view["trace_id"] == child_view["trace_id"]


def test_another_namespace_cannot_read_a_view(shared_server: Any) -> None:
    with client(shared_server) as alice, client(shared_server, "mallory") as mallory:
        run = alice.start_agent("ticker", "1")
        with pytest.raises(FevexHttpError) as refused:
            mallory.get_run_view(run.id)
        assert (refused.value.status, refused.value.code) == (404, "RUN_NOT_FOUND")


def test_the_document_describes_the_view(shared_server: Any) -> None:
    with httpx2.Client(base_url=shared_server.url, headers={"Authorization": "Bearer alice"}) as h:
        document = h.get("/v1/openapi.json").json()
    entry = document["paths"]["/v1/runs/{run_id}/view"]["get"]
    assert entry["operationId"] == "getRunView"
    schema = entry["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/RunView"}
    assert "spans" in document["components"]["schemas"]["RunView"]["required"]


@pytest.mark.anyio
async def test_the_view_s_spans_are_the_ones_an_exporter_receives() -> None:
    # In process (the app served over ASGI): the exporter is in the same process.
    exporter = InMemoryTraceExporter()
    async with build_app(None, [exporter]) as app:
        result = await app.run_agent("support", "What is the status of account 42?")
        await app.flush_observability()
        http = create_http_app(app, allow_anonymous=True)
        transport = httpx2.ASGITransport(app=http)
        async with AsyncFevexClient("http://localhost", transport=transport) as client:
            view = await client.get_run_view(result.run_id)
    exported = {
        span.span_id: (
            span.parent_span_id, span.name, span.kind, span.start_ns / 1e6, span.end_ns / 1e6,
            span.status, span.error_code, dict(span.attributes),
        )
        for span in exporter.spans
    }  # fmt: skip
    drawn = {
        span["span_id"]: (
            span["parent_span_id"], span["name"], span["kind"], span["start_ms"],
            span["end_ms"], span["status"], span["error_code"], span["attributes"],
        )
        for span in view["spans"]
    }  # fmt: skip
    assert drawn == exported
    assert len(drawn) == 4  # the run, two model steps and the tool call
    assert view["totals"]["usage"] == result.usage.to_json()
