"""The run protocol against a real ``fevex serve`` process on loopback (SQLite store).

The approval console flow end to end, and what a hostile caller tries: another namespace's
runs and sessions, an actor or a context forged in a body, a body over the limit, a cursor
that is not the run's, no credentials, a refused account. Errors are always the documented
JSON body, never a traceback; CORS stays off; reads are bounded by the page size; an SSE
stream that disconnects leaves its run alone.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2
import pytest

from fevex.http import FevexClient, FevexHttpError

PAGE_SIZE = 5  # conftest's SHARED_ENVIRONMENT
MAX_BODY = 4096
GUARD = 60.0


def client(server: Any, name: str | None = "alice") -> FevexClient:
    headers = {} if name is None else {"Authorization": f"Bearer {name}"}
    return FevexClient(server.url, headers=headers, timeout=GUARD)


def raw(server: Any, name: str | None = "alice") -> httpx2.Client:
    headers = {} if name is None else {"Authorization": f"Bearer {name}"}
    return httpx2.Client(base_url=server.url, headers=headers, timeout=GUARD)


def wait_for_status(alice: FevexClient, run_id: str, *statuses: str) -> Any:
    deadline = time.monotonic() + GUARD
    while (run := alice.get_run(run_id)).status not in statuses:
        assert time.monotonic() < deadline, run
        time.sleep(0.05)
    return run


def assert_error(response: httpx2.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    assert body["error"]["code"] == code
    assert "Traceback" not in response.text


def test_approval_console_flow(shared_server: Any) -> None:
    with client(shared_server) as alice:
        run = alice.start_agent("support", "Charge the customer.")
        assert run.status == "running"
        assert run.context is not None
        assert (run.context["actor"]["id"], run.context["namespace"]) == ("alice", "acme")
        seen: list[str] = []
        for event in alice.observe_run(run.id):
            seen.append(event.type)
            if event.type == "run.paused":
                paused = alice.get_run(run.id)
                assert paused.status == "paused"
                approval = paused.pause["approvals"][0]  # type: ignore[index]
                assert approval["tool_name"] == "charge"
                resumed = alice.resume_run(run.id, approval_id=approval["id"], decision="approve")
                assert resumed.status == "running"
        finished = alice.get_run(run.id)
        assert (finished.status, finished.output) == ("completed", "Done.")
        assert seen[-1] == "run.completed"
        assert seen.index("run.paused") < seen.index("run.resumed") < seen.index("tool.completed")
        events = alice.list_events(run.id, limit=PAGE_SIZE)
        events += alice.list_events(run.id, after=events[-1].id, limit=PAGE_SIZE)
        resumed_event = next(event for event in events if event.type == "run.resumed")
        # The decision's actor is the authenticated caller's.
        assert resumed_event.payload["actor"] == {"id": "alice", "type": "user"}


def test_a_forged_actor_or_context_in_a_body_is_refused(shared_server: Any) -> None:
    with client(shared_server) as alice, raw(shared_server) as http:
        run = alice.start_agent("support", "Charge the customer.")
        paused = wait_for_status(alice, run.id, "paused")
        approval_id = paused.pause["approvals"][0]["id"]
        forged = http.post(
            f"/v1/runs/{run.id}/resume",
            json={"approval_id": approval_id, "decision": "approve", "actor": {"id": "mallory"}},
        )
        assert_error(forged, 400, "INVALID_REQUEST")
        assert alice.get_run(run.id).status == "paused"
        smuggled = http.post(
            "/v1/agents/support/runs",
            json={"input": "hi", "context": {"actor": {"id": "root"}, "namespace": "evil"}},
        )
        assert_error(smuggled, 400, "INVALID_REQUEST")
        alice.cancel_run(run.id)


def test_another_namespace_sees_and_controls_nothing(shared_server: Any) -> None:
    with client(shared_server) as alice, client(shared_server, "mallory") as mallory:
        run = alice.start_agent("support", "Charge the customer.")
        wait_for_status(alice, run.id, "paused")
        unknown = "run_" + "0" * 24
        for run_id in (run.id, unknown):
            with pytest.raises(FevexHttpError) as refused:
                mallory.get_run(run_id)
            assert (refused.value.status, refused.value.code) == (404, "RUN_NOT_FOUND")
        with pytest.raises(FevexHttpError) as foreign:
            mallory.get_run(run.id)
        with pytest.raises(FevexHttpError) as missing:
            mallory.get_run(unknown)
        # Answered exactly as for a run that does not exist: not even its existence leaks.
        assert foreign.value.message.replace(run.id, "X") == missing.value.message.replace(
            unknown, "X"
        )
        attempts = [
            lambda: mallory.list_events(run.id),
            lambda: list(mallory.observe_run(run.id)),
            lambda: mallory.cancel_run(run.id),
            lambda: mallory.recover_run(run.id),
            lambda: mallory.send_event(run.id, "review.approved", {"approved": True}),
            lambda: mallory.resume_run(run.id, approval_id="apr_x", decision="approve"),
            lambda: mallory.get_session(run.session_id),
            lambda: mallory.compact_session(run.session_id, "gone"),
            lambda: mallory.start_agent("support", "hi", session_id=run.session_id),
        ]
        for attempt in attempts:
            with pytest.raises(FevexHttpError) as refused:
                attempt()
            assert refused.value.status == 404, refused.value
        assert run.id not in {listed.id for listed in mallory.list_runs(limit=1000).runs}
        assert alice.get_run(run.id).status == "paused"
        # A caller of the same namespace sees it.
        with client(shared_server, "bob") as bob:
            assert bob.get_run(run.id).id == run.id
            assert run.id in {listed.id for listed in bob.list_runs(limit=1000).runs}
        alice.cancel_run(run.id)


def test_oversized_bodies_are_refused(shared_server: Any) -> None:
    with raw(shared_server) as http:
        declared = http.post("/v1/agents/support/runs", json={"input": "x" * (2 * MAX_BODY)})
        assert_error(declared, 413, "REQUEST_TOO_LARGE")

        def chunks() -> Any:
            for _ in range(16):
                yield b'{"input": "' + b"x" * 1024 if _ == 0 else b"x" * 1024

        streamed = http.post(
            "/v1/agents/support/runs",
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
        assert_error(streamed, 413, "REQUEST_TOO_LARGE")


def test_cursors_of_another_run_or_unknown_are_invalid(shared_server: Any) -> None:
    with client(shared_server) as alice, raw(shared_server) as http:
        first = alice.start_agent("ticker", "2")
        second = alice.start_agent("ticker", "2")
        wait_for_status(alice, first.id, "completed")
        wait_for_status(alice, second.id, "completed")
        other = alice.list_events(second.id, limit=1)[0].id
        for cursor in ("evt_unknown", other):
            listed = http.get(f"/v1/runs/{first.id}/events", params={"after": cursor})
            assert_error(listed, 400, "INVALID_CURSOR")
            observed = http.get(
                f"/v1/runs/{first.id}/events/stream", headers={"Last-Event-ID": cursor}
            )
            assert_error(observed, 400, "INVALID_CURSOR")
        assert_error(http.get("/v1/runs", params={"after": "run_unknown"}), 400, "INVALID_CURSOR")


def test_callers_without_credentials_or_refused_get_nothing(shared_server: Any) -> None:
    paths = ["/v1/openapi.json", "/v1/runs", "/v1/runs/run_x", "/v1/runs/run_x/events/stream"]
    with raw(shared_server, None) as anonymous, raw(shared_server, "banned") as banned:
        for path in paths:
            assert_error(anonymous.get(path), 401, "UNAUTHENTICATED")
            assert_error(banned.get(path), 403, "FORBIDDEN")
        assert_error(
            anonymous.post("/v1/agents/support/runs", json={"input": "hi"}), 401, "UNAUTHENTICATED"
        )
        assert_error(banned.post("/v1/agents/support/runs", json={"input": "hi"}), 403, "FORBIDDEN")


def test_malformed_requests_get_error_bodies_never_tracebacks(shared_server: Any) -> None:
    with raw(shared_server) as http:
        start = "/v1/agents/support/runs"
        cases = [
            (http.post(start, content=b"{not json"), 400, "INVALID_REQUEST"),
            (http.post(start, content=b'{"input": NaN}'), 400, "INVALID_REQUEST"),
            (http.post(start, content=b"[1, 2]"), 400, "INVALID_REQUEST"),
            (http.post(start, json={"input": "hi", "timeout": -1}), 400, "INVALID_REQUEST"),
            (http.post(start, json={"input": "hi", "session_id": ""}), 400, "INVALID_REQUEST"),
            (http.post("/v1/agents/nobody/runs", json={"input": "hi"}), 404, "AGENT_NOT_FOUND"),
            (http.get("/v1/runs", params={"limit": "0"}), 400, "INVALID_REQUEST"),
            (http.get("/v1/runs", params={"limit": "9" * 40}), 400, "INVALID_REQUEST"),
            (http.get("/v1/runs", params={"status": "sleeping"}), 400, "INVALID_REQUEST"),
            (http.get("/v1/runs", params={"colour": "red"}), 400, "INVALID_REQUEST"),
            (http.get("/v1/nowhere"), 404, "NOT_FOUND"),
            (http.delete("/v1/runs/run_x"), 405, "METHOD_NOT_ALLOWED"),
        ]
        for response, status, code in cases:
            assert_error(response, status, code)
        assert "GET" in http.delete("/v1/runs/run_x").headers["allow"]


def test_cors_is_off_unless_configured(shared_server: Any) -> None:
    with raw(shared_server) as http:
        preflight = http.options(
            "/v1/runs",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"},
        )
        assert "access-control-allow-origin" not in preflight.headers
        simple = http.get("/v1/runs", headers={"Origin": "https://evil.example"})
        assert simple.status_code == 200
        assert "access-control-allow-origin" not in simple.headers


def test_every_read_is_bounded_by_the_page_size(shared_server: Any) -> None:
    with client(shared_server) as alice, raw(shared_server) as http:
        run = alice.start_agent("ticker", "4")
        wait_for_status(alice, run.id, "completed")
        page = http.get(f"/v1/runs/{run.id}/events").json()
        assert len(page["events"]) == PAGE_SIZE
        assert page["next_after"] == page["events"][-1]["id"]
        too_many = http.get(f"/v1/runs/{run.id}/events", params={"limit": str(PAGE_SIZE + 1)})
        assert_error(too_many, 400, "INVALID_REQUEST")
        collected: list[str] = []
        after = None
        while True:
            events = alice.list_events(run.id, after=after)
            collected += [event.id for event in events]
            if len(events) < PAGE_SIZE:
                break
            after = events[-1].id
        observed = [event.id for event in alice.observe_run(run.id)]
        # More events than one page, each once, in order, over both reads.
        assert len(observed) > 3 * PAGE_SIZE
        assert observed == collected
        latest = http.get(f"/v1/runs/{run.id}/events", params={"order": "desc", "limit": "1"})
        assert latest.json()["events"][0]["type"] == "run.completed"


def test_an_sse_stream_that_disconnects_never_cancels_its_run(shared_server: Any) -> None:
    with client(shared_server) as alice, raw(shared_server) as http:
        run = alice.start_agent("ticker", "12")
        with http.stream("GET", f"/v1/runs/{run.id}/events/stream") as stream:
            frames = 0
            for line in stream.iter_lines():
                frames += line.startswith("id: ")
                if frames == 2:
                    break
        finished = wait_for_status(alice, run.id, "completed", "cancelled", "failed")
        assert finished.status == "completed"
        assert "run.cancelled" not in [event.type for event in alice.observe_run(run.id)]


def test_the_stream_ends_with_an_end_frame_naming_the_status(shared_server: Any) -> None:
    with client(shared_server) as alice, raw(shared_server) as http:
        run = alice.start_agent("ticker", "1")
        with http.stream("GET", f"/v1/runs/{run.id}/events/stream") as stream:
            lines = list(stream.iter_lines())
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert lines[-3:] == [
            "event: end",
            "data: " + json.dumps({"run_id": run.id, "status": "completed"}, separators=(",", ":")),
            "",
        ]


def test_a_rejection_over_http_gives_the_model_its_reason(shared_server: Any) -> None:
    with client(shared_server) as alice, raw(shared_server) as http:
        run = alice.start_agent("support", "Charge the customer.")
        paused = wait_for_status(alice, run.id, "paused")
        approval_id = paused.pause["approvals"][0]["id"]
        # A reason goes with a rejection only.
        approving = http.post(
            f"/v1/runs/{run.id}/resume",
            json={"approval_id": approval_id, "decision": "approve", "reason": "fine"},
        )
        assert_error(approving, 400, "INVALID_REQUEST")
        assert alice.get_run(run.id).status == "paused"
        alice.resume_run(
            run.id, approval_id=approval_id, decision="reject", reason="The card is blocked."
        )
        wait_for_status(alice, run.id, "completed", "failed")
        events = alice.list_events(run.id, limit=PAGE_SIZE)
        while len(page := alice.list_events(run.id, after=events[-1].id, limit=PAGE_SIZE)):
            events += page
        rejected = [e for e in events if "The card is blocked." in json.dumps(e.payload)]
        assert rejected, [event.type for event in events]
