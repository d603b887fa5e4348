"""Hostile client values over HTTP, to ``fevex serve`` processes on the in-memory store, a
SQLite file and a PostgreSQL server: each answer must be the same on all three, with the
code of the field (never a ``STORE_*`` code, never a run or session created from them).

PostgreSQL cannot hold a NUL or a lone surrogate at all, and libpq ends a parameter at a
NUL, so an unchecked ``run_x%00junk`` could even name ``run_x`` there: ids are checked
before any store is asked.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fevex.http import FevexClient

GUARD = 60.0
ALICE = {"Authorization": "Bearer alice"}
LONG = "x" * 300
# (method, path, JSON body or None, extra headers, expected status, expected code).
# RUN is a completed run of session SESSION, PAUSED a run paused for approval, FLOW a
# workflow waiting for review.approved.
CASES: list[tuple[str, str, Any, dict[str, Any], int, str | None]] = [
    ("GET", "/v1/runs?name=a%00b", None, {}, 400, "INVALID_REQUEST"),
    ("GET", "/v1/runs?kind=agent%00", None, {}, 400, "INVALID_REQUEST"),
    ("GET", "/v1/runs?session_id=SESSION%00x", None, {}, 400, "INVALID_REQUEST"),
    ("GET", "/v1/runs?parent_run_id=RUN%00", None, {}, 400, "INVALID_REQUEST"),
    ("GET", "/v1/runs?status=paused%00", None, {}, 400, "INVALID_REQUEST"),
    ("GET", f"/v1/runs?name={LONG}", None, {}, 400, "INVALID_REQUEST"),
    ("GET", "/v1/runs?after=RUN%00x", None, {}, 400, "INVALID_CURSOR"),
    ("GET", f"/v1/runs?after={LONG}", None, {}, 400, "INVALID_CURSOR"),
    # Bytes that are not UTF-8 arrive as U+FFFD: a name no run has.
    ("GET", "/v1/runs?name=%ED%A0%80", None, {}, 200, None),
    ("GET", "/v1/runs/run%00x", None, {}, 404, "RUN_NOT_FOUND"),
    ("GET", "/v1/runs/PAUSED%00x", None, {}, 404, "RUN_NOT_FOUND"),
    ("GET", f"/v1/runs/{LONG}", None, {}, 404, "RUN_NOT_FOUND"),
    ("POST", "/v1/runs/PAUSED%00x/cancel", {}, {}, 404, "RUN_NOT_FOUND"),
    ("GET", "/v1/runs/RUN/events?after=ev%00x", None, {}, 400, "INVALID_CURSOR"),
    ("GET", f"/v1/runs/RUN/events?after={LONG}", None, {}, 400, "INVALID_CURSOR"),
    ("GET", "/v1/runs/RUN/events/stream?after=ev%00x", None, {}, 400, "INVALID_CURSOR"),
    ("GET", "/v1/runs/RUN/events/stream", None, {"Last-Event-ID": LONG}, 400, "INVALID_CURSOR"),
    ("GET", "/v1/runs/RUN/events/stream", None, {"Last-Event-ID": b"ev\xff\x7f"}, 400,
     "INVALID_CURSOR"),
    ("GET", "/v1/sessions/ses%00x", None, {}, 404, "SESSION_NOT_FOUND"),
    ("GET", "/v1/sessions/SESSION%00x", None, {}, 404, "SESSION_NOT_FOUND"),
    ("GET", f"/v1/sessions/{LONG}", None, {}, 404, "SESSION_NOT_FOUND"),
    ("POST", "/v1/sessions/SESSION%00/compact", {"summary": "x"}, {}, 404, "SESSION_NOT_FOUND"),
    ("POST", "/v1/sessions/SESSION/compact", {"summary": "a\x00b"}, {}, 400, "INVALID_REQUEST"),
    ("POST", "/v1/sessions/SESSION/compact", {"summary": "a\ud800b"}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", "/v1/agents/support/runs", {"input": "hi", "session_id": "s\x00x"}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", "/v1/agents/support/runs", {"input": "hi", "session_id": "s\udc00x"}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", "/v1/agents/support/runs", {"input": "hi", "session_id": LONG}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", "/v1/agents/support/runs", {"input": "h\x00i"}, {}, 400, "INVALID_INPUT"),
    ("POST", "/v1/agents/support/runs", {"input": "h\ud800i"}, {}, 400, "INVALID_INPUT"),
    ("POST", "/v1/agents/sup%00port/runs", {"input": "hi"}, {}, 404, "AGENT_NOT_FOUND"),
    ("POST", "/v1/workflows/review%00/runs", {"input": "d"}, {}, 404, "WORKFLOW_NOT_FOUND"),
    ("POST", "/v1/teams/desk%00/runs", {"input": "d"}, {}, 404, "TEAM_NOT_FOUND"),
    ("POST", "/v1/runs/PAUSED/resume", {"approval_id": "a\x00", "decision": "approve"}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", "/v1/runs/PAUSED/resume", {"approval_id": LONG, "decision": "approve"}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", "/v1/runs/FLOW/external-events", {"name": "review.approved\x00"}, {}, 400,
     "INVALID_REQUEST"),
    ("POST", "/v1/runs/FLOW/external-events",
     {"name": "review.approved", "payload": {"approved": True, "k\ud800": 1}}, {}, 400,
     "INVALID_ARGUMENT"),
]  # fmt: skip


STARTED = ("RUN", "PAUSED", "FLOW")


@pytest.fixture
def servers(serve: Any, tmp_path: Path, postgres_url: str) -> dict[str, Any]:
    stores = {
        "memory": "memory://",
        "sqlite": f"sqlite:///{tmp_path / 'runs.db'}",
        "postgres": postgres_url,
    }
    return {name: serve(url).start() for name, url in stores.items()}


def prepare(server: Any) -> dict[str, str]:
    """The runs the cases name, by their placeholder."""
    with FevexClient(server.url, headers=ALICE, timeout=GUARD) as client:
        done = client.start_agent("ticker", "1")
        assert [event.type for event in client.observe_run(done.id)][-1] == "run.completed"
        paused = client.start_agent("support", "charge me")
        flow = client.start_workflow("review", "draft")
        for run in (paused, flow):
            deadline = time.monotonic() + GUARD
            while client.get_run(run.id).status != "paused":
                assert time.monotonic() < deadline, "the run never paused"
                time.sleep(0.02)
    return {"SESSION": done.session_id, "PAUSED": paused.id, "FLOW": flow.id, "RUN": done.id}


def answer(http: httpx2.Client, case: tuple[Any, ...], names: dict[str, str]) -> tuple[Any, ...]:
    method, path, body, headers, _, _ = case
    for placeholder, value in names.items():
        path = path.replace(placeholder, value)
    content = None if body is None else json.dumps(body).encode()
    response = http.request(
        method, path, content=content, headers={"Content-Type": "application/json", **headers}
    )
    code = response.json()["error"]["code"] if response.status_code >= 400 else None
    return response.status_code, code


def test_hostile_values_get_one_answer_on_every_store(servers: dict[str, Any]) -> None:
    answers: dict[str, list[tuple[Any, ...]]] = {}
    for name, server in servers.items():
        names = prepare(server)
        with httpx2.Client(base_url=server.url, headers=ALICE, timeout=GUARD) as http:
            before = http.get("/v1/runs", params={"limit": 1000}).json()["runs"]
            answers[name] = [answer(http, case, names) for case in CASES]
            after = http.get("/v1/runs", params={"limit": 1000}).json()["runs"]
            statuses = [http.get(f"/v1/runs/{names[run]}").json()["status"] for run in STARTED]
        # Nothing was started from a hostile value, and the paused runs still wait.
        assert after == before, name
        assert statuses == ["completed", "paused", "paused"], name
    expected = [(status, code) for *_, status, code in CASES]
    for name, found in answers.items():
        wrong = [
            (case[1], case[2], got, want)
            for case, got, want in zip(CASES, found, expected, strict=True)
            if got != want
        ]
        assert wrong == [], name
        assert not any(str(code).startswith("STORE_") for _, code in found)
