"""Schemathesis against ``/v1/openapi.json`` of a real ``fevex serve`` process: generated
requests, valid and invalid, to every operation, and no 5xx, no status, header, content
type or body the document does not describe, and every invalid request refused.

The SSE operation is left out of the generated requests: schemathesis reuses the ids of
runs it started, and the stream of a run that paused (the ``support`` agent waits for an
approval) stays open by design, with heartbeats, until the run ends. Its document is
checked below, and the stream itself by the protocol tests.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2

GUARD = 300.0
CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
        "missing_required_header",
        "unsupported_method",
    )
)


def test_schemathesis_finds_no_server_error_and_nothing_the_document_contradicts(
    serve: Any, tmp_path: Path
) -> None:
    server = serve(
        f"sqlite:///{tmp_path / 'runs.db'}",
        # Short leases: cancelling a run that another step of the server executes waits for
        # its owner's next renewal, a third of the lease.
        environment={"FEVEX_TEST_LEASE_SECONDS": "2", "FEVEX_TEST_PAGE_SIZE": "5"},
    ).start()
    completed = subprocess.run(
        [
            sys.executable, "-m", "schemathesis.cli", "run", f"{server.url}/v1/openapi.json",
            "--header", "Authorization: Bearer alice",
            "--checks", CHECKS,
            "--exclude-operation-id", "observeRun",
            "--phases", "coverage,fuzzing",
            "--max-examples", "15",
            "--seed", "1",
            "--generation-database", "none",
            "--request-timeout", "30",
            "--workers", "1",
            "--no-color",
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=GUARD,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-2000:]
    assert "passed" in completed.stdout


def test_the_document_describes_every_route_and_the_event_stream(shared_server: Any) -> None:
    with httpx2.Client(
        base_url=shared_server.url, headers={"Authorization": "Bearer alice"}
    ) as http:
        document = http.get("/v1/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    operations = {
        operation["operationId"]
        for path in document["paths"].values()
        for operation in path.values()
    }
    assert operations == {
        "getOpenapiDocument", "startAgent", "startWorkflow", "startTeam", "listRuns",
        "getRun", "getRunView", "listEvents", "observeRun", "resumeRun", "recoverRun", "cancelRun",
        "sendEvent", "getSession", "compactSession",
    }  # fmt: skip
    stream = document["paths"]["/v1/runs/{run_id}/events/stream"]["get"]
    assert set(stream["responses"]["200"]["content"]) == {"text/event-stream"}
    agent = document["paths"]["/v1/agents/{agent_name}/runs"]["post"]["parameters"][0]
    assert agent["schema"]["enum"] == ["support", "ticker"]
    limit = document["paths"]["/v1/runs/{run_id}/events"]["get"]["parameters"][2]
    assert limit["schema"]["maximum"] == 5
