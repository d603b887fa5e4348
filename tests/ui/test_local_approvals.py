"""Approvals out of the box: ``fevex serve --ui`` on a bare app (``examples/demo_app.py``)
on loopback decides as a named local actor, from the console's Approve button and from
``FevexClient``, and records that actor; start-up names the API's and the console's URLs;
an ``--actor`` on an address other hosts can reach is refused before anything binds."""

from __future__ import annotations

import getpass
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fevex.http import FevexClient

# The console tests share one suite worker, and so its one Chromium.
pytestmark = pytest.mark.xdist_group("console")

ROOT = Path(__file__).resolve().parents[2]
GUARD = 60.0  # seconds; a hang guard, never a timing assertion
GUARD_MS = 60_000


def serve_demo(console_server_type: Any, store: Path, *arguments: str) -> Any:
    server = console_server_type(
        f"sqlite:///{store}", app="examples.demo_app:app", cwd=ROOT, arguments=arguments
    )
    deadline = time.monotonic() + GUARD
    while not any("fevex serve: console at" in line for line in server.lines):
        if time.monotonic() > deadline:
            server.stop()
            raise AssertionError("no start-up lines:\n" + "".join(server.lines))
        time.sleep(0.05)
    return server


@pytest.fixture(scope="module")
def demo_server(
    console_server_type: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    store = tmp_path_factory.mktemp("demo") / "runs.db"
    server = serve_demo(console_server_type, store, "--actor", "ada")
    yield server
    server.stop()


def wait_for_status(client: FevexClient, run_id: str, status: str) -> Any:
    deadline = time.monotonic() + GUARD
    while (run := client.get_run(run_id)).status != status:
        assert time.monotonic() < deadline, f"{run_id} stayed {run.status}"
        time.sleep(0.05)
    return run


def test_start_up_names_the_api_the_console_and_the_local_actor(demo_server: Any) -> None:
    said = "".join(demo_server.lines)
    assert f"fevex serve: API at {demo_server.url}/v1 " in said
    assert f"fevex serve: console at {demo_server.url}/ui/\n" in said
    assert "approvals are decided as the local actor 'ada'" in said


def test_the_approve_button_decides_as_the_local_actor(demo_server: Any, browser: Any) -> None:
    with FevexClient(demo_server.url) as client:  # no credentials: the server has none
        run = client.start_agent("support", "Refund 30 USD on account 42.")
        wait_for_status(client, run.id, "paused")
    page = browser.new_page()
    page.set_default_timeout(GUARD_MS)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    page.goto(f"{demo_server.url}/ui/#/runs/{run.id}")
    card = page.locator(".approval")
    card.wait_for()
    assert card.locator(".tool-name").text_content() == "refunds_issue"
    card.locator("button.approve").click()
    page.wait_for_selector("#run-status:text('completed')")
    with FevexClient(demo_server.url) as client:
        events = client.list_events(run.id, limit=100)
        finished = client.get_run(run.id)
    decided = next(event for event in events if event.type == "run.resumed")
    assert decided.payload["decision"] == "approve"
    assert decided.payload["actor"] == {"id": "ada", "type": "local"}
    assert finished.output == "Refunded 30 USD to account 42."
    assert finished.context is not None
    assert finished.context["actor"] == {"id": "ada", "type": "local"}
    assert problems == []
    page.close()


def test_a_client_decides_a_workflow_s_approval_as_the_local_actor(demo_server: Any) -> None:
    with FevexClient(demo_server.url) as client:
        workflow = client.start_workflow("refund_review", {"account_id": 7, "amount": 12})
        wait_for_status(client, workflow.id, "paused")
        child_id = client.get_run(workflow.id).pause["run_ids"][0]  # type: ignore[index]
        child = wait_for_status(client, child_id, "paused")
        approval = child.pause["approvals"][0]
        assert approval["input"] == {"account_id": 7, "amount": 12}
        client.resume_run(child_id, approval_id=approval["id"], decision="approve")
        done = wait_for_status(client, workflow.id, "completed")
        decided = next(
            event
            for event in client.list_events(child_id, limit=100)
            if event.type == "run.resumed"
        )
    assert decided.payload["actor"] == {"id": "ada", "type": "local"}
    assert done.output == (
        "Account 7 is active, with a balance of 107 USD. Refunded 12 USD to account 7."
    )


def test_the_local_actor_is_the_os_user_by_default(
    console_server_type: Any, tmp_path: Path
) -> None:
    server = serve_demo(console_server_type, tmp_path / "runs.db")
    try:
        assert f"decided as the local actor {getpass.getuser()!r}" in "".join(server.lines)
        with FevexClient(server.url) as client:
            run = client.start_agent("support", "Refund 5 USD on account 3.")
            paused = wait_for_status(client, run.id, "paused")
            approval = paused.pause["approvals"][0]
            client.resume_run(run.id, approval_id=approval["id"], decision="reject")
            wait_for_status(client, run.id, "completed")
            decided = next(
                event for event in client.list_events(run.id) if event.type == "run.resumed"
            )
        assert decided.payload["actor"] == {"id": getpass.getuser(), "type": "local"}
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("arguments", "code", "message"),
    [
        (
            ["--ui", "--actor", "ada", "--host", "0.0.0.0"],
            "SERVE_UNAUTHENTICATED",
            "offers a local actor (--actor) on a loopback address only",
        ),
        (["--ui", "--host", "0.0.0.0"], "SERVE_UNAUTHENTICATED", "without authentication"),
        (["--actor", "ada"], "INVALID_ARGUMENT", "--actor is the console's local actor: add --ui"),
    ],
)
def test_a_local_actor_other_hosts_could_use_is_refused_in_one_line(
    arguments: list[str], code: str, message: str
) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "fevex.cli", "serve", "--app", "examples.demo_app:app",
         "--port", "0", *arguments],
        cwd=ROOT, capture_output=True, text=True, timeout=GUARD, check=False,
    )  # fmt: skip
    assert completed.returncode == 1
    assert completed.stderr.count("\n") == 1
    assert completed.stderr.startswith(f"fevex: [{code}]")
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr
    assert "Uvicorn running" not in completed.stderr


def test_an_app_that_authenticates_takes_no_local_actor() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "fevex.cli", "serve", "--ui", "--app", "console_service:http_app",
         "--port", "0", "--actor", "ada"],
        cwd=ROOT / "tests" / "ui", capture_output=True, text=True, timeout=GUARD, check=False,
    )  # fmt: skip
    assert completed.returncode == 1
    assert completed.stderr.count("\n") == 1
    assert completed.stderr.startswith("fevex: [INVALID_ARGUMENT] --actor names the local actor")
    assert "Traceback" not in completed.stderr
