"""The console at ``/ui`` end to end: a real ``fevex serve --ui`` on loopback, headless
Chromium, runs started and decided through the fevex client and the page."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fevex.http import FevexClient

# The console tests share one suite worker, and so its one Chromium.
pytestmark = pytest.mark.xdist_group("console")

ALICE = {"Authorization": "Bearer alice"}
GUARD_MS = 60_000  # a hang guard for each wait in the page, never a timing assertion
GUARD_SECONDS = GUARD_MS / 1000
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


def open_console(browser: Any, server: Any, hash_path: str = "#/") -> tuple[Any, list[str]]:
    """A page signed in as alice at ``hash_path``, and the list its errors go to: uncaught
    exceptions, console errors and requests to any other host."""
    page = browser.new_page()
    page.set_default_timeout(GUARD_MS)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))
    # A load Chromium gives up when the machine's network changes (the network-namespace
    # tests on another worker add and remove interfaces) is not the page's problem.
    page.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}")
            if message.type == "error" and "net::ERR_NETWORK_CHANGED" not in message.text
            else None
        ),
    )
    page.on(
        "request",
        lambda request: (
            None
            if request.url.startswith(server.url)
            else problems.append(f"request to another host: {request.url}")
        ),
    )
    page.goto(f"{server.url}/ui/")
    # Before the token is given, the list's read is refused (401), as it should be.
    assert "UNAUTHENTICATED" in page.locator("#runs-notice .error").text_content()
    problems.clear()
    page.fill("#token", "alice")
    page.click("#credentials button")
    if hash_path != "#/":
        page.goto(f"{server.url}/ui/{hash_path}")
    return page, problems


def test_a_started_run_appears_in_the_list_with_tokens_and_cost(
    console_server: Any, browser: Any, artifacts: Path
) -> None:
    page, problems = open_console(browser, console_server)
    with FevexClient(console_server.url, headers=ALICE) as client:
        run = client.start_agent("ticker", "1")
    row = page.locator(f'tr[data-run-id="{run.id}"]')
    row.wait_for()
    # The list refreshes by itself: the row turns completed with its tokens and cost.
    page.wait_for_selector(f'tr[data-run-id="{run.id}"] td.status-completed')
    page.wait_for_function(
        "id => document.querySelector(`td[data-cost-of=\"${id}\"]`).textContent.includes('USD')",
        arg=run.id,
    )
    cells = row.locator("td").all_text_contents()
    assert cells[:3] == ["completed", "agent", "ticker"]
    assert cells[4] == ""  # no parent: a root
    assert cells[7] == "30"  # two model steps of 15 tokens
    assert cells[8] == "0.03 USD"
    page.select_option("select[name=status]", "paused")
    page.click("#filters button")
    # The list in view until the filtered page arrives still holds the row: wait for it
    # to go (a filter that kept it would time out here).
    row.wait_for(state="detached")
    assert page.locator(f'tr[data-run-id="{run.id}"]').count() == 0
    page.screenshot(path=str(artifacts / "runs-list.png"), full_page=True)
    assert problems == []


def test_the_timeline_fills_live_and_the_view_and_chart_follow(
    console_server: Any, browser: Any, artifacts: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with FevexClient(console_server.url, headers=ALICE) as client:
        # Eight ticks of 0.3 s, the first held until the page has seen the run going on.
        run = client.start_agent("ticker", f"8 {gate}")
    page, problems = open_console(browser, console_server, f"#/runs/{run.id}")
    page.wait_for_selector("#timeline tr")
    # Seen while the run still goes on: the events come in over the stream, not at load.
    page.wait_for_selector("#run-status:text('running')")
    # The waterfall is live: the run's execution is drawn open while it goes on.
    page.wait_for_selector("#waterfall rect.span-bar.kind-run.open")
    gate.touch()
    page.wait_for_selector("#connection:text('The run ended: completed.')")
    # Once ended: a run span, nine model steps and eight tool calls, none open.
    page.wait_for_function(
        "() => document.querySelectorAll('#waterfall rect.span-bar').length === 18"
        " && !document.querySelector('#waterfall rect.span-bar.open')"
    )
    sequences = [int(s) for s in page.locator("#timeline tr").evaluate_all(
        "rows => rows.map(r => r.dataset.sequence)"
    )]  # fmt: skip
    assert sequences == list(range(1, len(sequences) + 1))
    with FevexClient(console_server.url, headers=ALICE) as client:
        assert len(sequences) == len(client.list_events(run.id, limit=100))
    # A model step per tick, and the answer.
    assert page.locator("#chart rect.tokens").count() == 9
    assert page.locator("#chart rect.cost").count() == 9
    page.click("button[data-layer=turn]")
    assert "0.135 USD" in page.locator("#turn").text_content()
    page.click("button[data-layer=state]")
    assert "tool_completed" in page.locator("#layer").text_content()
    assert page.locator("#output").text_content() == '"Done."'
    page.screenshot(path=str(artifacts / "run-page.png"), full_page=True)
    assert problems == []


def test_the_timeline_resumes_after_the_server_dies_with_each_event_once(
    browser: Any, console_server_type: Any, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    first = console_server_type(store)
    try:
        with FevexClient(first.url, headers=ALICE) as client:
            run = client.start_agent("ticker", "8")
        page, problems = open_console(browser, first, f"#/runs/{run.id}")
        page.wait_for_selector("#timeline tr[data-sequence='6']")
        first.kill()
    finally:
        first.stop()
    # The same address again: the page reconnects there with Last-Event-ID, and the new
    # server's worker recovers the run once the dead one's lease has expired.
    second = console_server_type(store, port=first.port)
    try:
        page.wait_for_selector("#connection:text('The run ended: completed.')")
        assert page.locator("#connection").get_attribute("data-history") == (
            "connected reconnected"
        )
        sequences = page.locator("#timeline tr").evaluate_all(
            "rows => rows.map(r => Number(r.dataset.sequence))"
        )
        with FevexClient(second.url, headers=ALICE) as client:
            assert sequences == [e.sequence for e in client.list_events(run.id, limit=100)]
        # The page's own reads failed while no server listened: the only errors allowed.
        assert all("Failed to load resource" in p or "ERR_" in p for p in problems)
    finally:
        second.stop()


def test_an_approval_clicked_in_the_page_lets_the_run_complete(
    console_server: Any, browser: Any, artifacts: Path
) -> None:
    with FevexClient(console_server.url, headers=ALICE) as client:
        run = client.start_agent("support", "charge me")
    page, problems = open_console(browser, console_server, f"#/runs/{run.id}")
    card = page.locator(".approval")
    card.wait_for()
    assert card.locator(".tool-name").text_content() == "charge"
    assert '"amount": 30' in card.locator(".tool-input").text_content()
    page.screenshot(path=str(artifacts / "approval.png"), full_page=True)
    card.locator("button.approve").click()
    page.wait_for_selector("#run-status:text('completed')")
    page.wait_for_selector("#connection:text('The run ended: completed.')")
    with FevexClient(console_server.url, headers=ALICE) as client:
        events = client.list_events(run.id, limit=100)
        decided = next(e for e in events if e.type == "run.resumed")
    assert decided.payload["decision"] == "approve"
    assert decided.payload["actor"]["id"] == "alice"
    assert problems == []


def test_a_pending_input_is_shown_as_text_and_answered_in_the_page(
    console_server: Any, browser: Any, artifacts: Path
) -> None:
    with FevexClient(console_server.url, headers=ALICE) as client:
        run = client.start_agent("asker", "ask me")
    page, problems = open_console(browser, console_server, f"#/runs/{run.id}")
    card = page.locator(".pending-input")
    card.wait_for()
    # The question is the tool's (for an MCP server's, remote) text: shown, never run.
    assert "<script>" in card.locator(".input-message").text_content()
    assert '"required"' in card.locator(".input-schema").text_content()
    page.screenshot(path=str(artifacts / "pending-input.png"), full_page=True)
    card.locator(".input-content").fill('{"name": "Ada"}')
    card.locator("button.accept").click()
    page.wait_for_selector("#run-status:text('completed')")
    assert page.evaluate("window.__fevexInjected") is None
    with FevexClient(console_server.url, headers=ALICE) as client:
        events = client.list_events(run.id, limit=100)
    answered = next(e for e in events if e.type == "input.answered")
    assert answered.payload["action"] == "accept"
    assert answered.payload["actor"]["id"] == "alice"
    completed = next(e for e in events if e.type == "tool.completed")
    assert completed.payload["output"] == {"action": "accept", "content": {"name": "Ada"}}
    assert problems == []


def test_cancel_asks_first_and_a_declined_confirmation_changes_nothing(
    console_server: Any, browser: Any
) -> None:
    with FevexClient(console_server.url, headers=ALICE) as client:
        run = client.start_agent("support", "charge me")
    page, problems = open_console(browser, console_server, f"#/runs/{run.id}")
    page.locator(".approval").wait_for()
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#cancel")
    with FevexClient(console_server.url, headers=ALICE) as client:
        assert client.get_run(run.id).status == "paused"
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel")
    page.wait_for_selector("#run-status:text('cancelled')")
    with FevexClient(console_server.url, headers=ALICE) as client:
        assert client.get_run(run.id).status == "cancelled"
    assert problems == []


def test_a_team_run_and_its_child_link_to_each_other(console_server: Any, browser: Any) -> None:
    with FevexClient(console_server.url, headers=ALICE) as client:
        team = client.start_team("desk", "charge me")
    page, problems = open_console(browser, console_server, f"#/runs/{team.id}")
    child_link = page.locator("#children a").first
    child_link.wait_for()
    child_id = child_link.text_content()
    child_link.click()
    page.wait_for_selector(f"#run-id:text('{child_id}')")
    page.locator("#parent a").wait_for()
    assert page.locator("#parent a").text_content() == team.id
    assert problems == []


def test_hostile_markup_from_a_tool_shows_as_text_and_runs_nothing(
    console_server: Any, browser: Any
) -> None:
    with FevexClient(console_server.url, headers=ALICE) as client:
        run = client.start_agent("browser", "browse the page")
    page, problems = open_console(browser, console_server, f"#/runs/{run.id}")
    page.wait_for_selector("#connection:text('The run ended: completed.')")
    for layer in ("stream", "messages", "turn"):
        page.click(f"button[data-layer={layer}]")
        assert "<script>window.__fevexInjected" in page.locator("#layer").text_content()
    assert "<img src=x onerror=" in page.locator("#timeline").text_content()
    # The tool's progress is a row of its own, its message shown as text.
    progress = page.locator("#timeline tr", has_text="tool.progress")
    assert progress.count() == 1
    assert "progress 1 of 2: <script>" in progress.locator("summary").text_content()
    assert "<img src=x onerror=" in page.locator("#output").text_content()
    assert page.locator("main script, main img").count() == 0
    assert page.evaluate("window.__fevexInjected") is None
    assert problems == []


def test_console_pages_carry_a_strict_content_security_policy(console_server: Any) -> None:
    with httpx2.Client(base_url=console_server.url) as http:
        for path in ("/ui/", "/ui/app.js", "/ui/app.css", "/ui/run_page.js"):
            response = http.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-security-policy"] == CSP
            assert response.headers["x-content-type-options"] == "nosniff"
        index = http.get("/ui/").text
        assert '<script type="module" src="app.js"></script>' in index
        assert "http" not in index.replace("http-equiv", "")  # no other host is named
        assert http.get("/ui/../pyproject.toml").status_code == 404
        assert http.get("/ui/console.py").status_code == 404
        assert http.get("/ui").headers["location"] == "/ui/"


def test_state_changing_requests_from_other_sites_are_refused(console_server: Any) -> None:
    with FevexClient(console_server.url, headers=ALICE) as client:
        run = client.start_agent("support", "charge me")
    cancel = f"/v1/runs/{run.id}/cancel"
    hostile = [
        {},  # a cross-site form: no custom header
        {"X-Fevex-Request": "1", "Sec-Fetch-Site": "cross-site"},
        {"X-Fevex-Request": "1", "Sec-Fetch-Site": "same-site"},
        {"X-Fevex-Request": "1", "Origin": "https://evil.example"},
        {"X-Fevex-Request": "0"},
    ]
    with httpx2.Client(base_url=console_server.url, headers=ALICE) as http:
        for headers in hostile:
            response = http.post(cancel, json={}, headers=headers)
            assert response.status_code == 403, headers
            assert response.json()["error"]["code"] == "CROSS_SITE_REQUEST"
        assert http.get(f"/v1/runs/{run.id}").json()["status"] == "paused"
        own = {"X-Fevex-Request": "1", "Origin": console_server.url}
        own["Sec-Fetch-Site"] = "same-origin"
        assert http.post(cancel, json={}, headers=own).json()["status"] == "cancelled"


def test_a_durable_task_is_listed_with_its_kind_over_http_and_in_the_console(
    console_server: Any, browser: Any
) -> None:
    # Only the app starts a task: another process of the app runs one on the server's store.
    ran = subprocess.run(
        [sys.executable, "-c", RUN_A_TASK, console_server.store_url],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        timeout=GUARD_SECONDS,
        check=True,
    )
    task_id = ran.stdout.strip()
    with FevexClient(console_server.url, headers=ALICE) as client:
        tasks = client.list_runs(kind="task").runs
        tickers = client.list_runs(kind="agent", name="ticker").runs
    assert [(run.id, run.kind, run.name, run.status) for run in tasks] == [
        (task_id, "task", "console.tick", "completed")
    ]
    # Its step's agent is a child run of the task.
    (child,) = [run for run in tickers if run.parent_run_id == task_id]
    page, problems = open_console(browser, console_server)
    page.select_option("select[name=kind]", "task")
    page.click("#filters button")
    row = page.locator(f'tr[data-run-id="{task_id}"]')
    row.wait_for()
    # The list the filter replaced held other kinds: wait until only tasks are left.
    page.wait_for_function(
        "() => [...document.querySelectorAll('#runs tbody tr[data-depth=\"0\"]')]"
        ".every(r => r.children[1].textContent === 'task')"
    )
    assert page.locator('#runs tbody tr[data-depth="0"]').count() == 1
    # The task's agent is nested under it, its parent named.
    nested = page.locator(f'#runs tbody tr[data-run-id="{child.id}"]')
    nested.wait_for()
    assert nested.get_attribute("data-depth") == "1"
    assert nested.locator("td.parent").text_content() == task_id
    assert row.locator("td").all_text_contents()[:3] == ["completed", "task", "console.tick"]
    row.locator("a").first.click()
    page.wait_for_selector(f"#run-id:text('{task_id}')")
    page.locator("#children a").first.wait_for()
    assert page.locator("#children a").first.text_content() == child.id
    assert problems == []


RUN_A_TASK = """
import sys
from console_service import ALICE, Ticks, build_app

with build_app(sys.argv[1]) as app:
    task_id = app.create_task_sync(
        "console.tick", Ticks(count="1"), deadline=60, model_budget=4, context=ALICE
    )
    app.run_task_sync(task_id, context=ALICE)
    print(task_id)
"""


def test_an_event_wait_and_a_timer_are_described_in_words(
    console_server: Any, browser: Any
) -> None:
    with FevexClient(console_server.url, headers=ALICE) as client:
        run = client.start_workflow("review", "The draft")
    page, problems = open_console(browser, console_server, f"#/runs/{run.id}")
    waiting = page.locator("#waiting li")
    page.wait_for_selector("#waiting li:has-text('waiting for event')")
    said = waiting.text_content()
    assert said.startswith("waiting for event review.approved since ")
    assert re.search(r"since \d{2}:\d{2}:\d{2}\.\d{3} \(step approval\)$", said), said
    with FevexClient(console_server.url, headers=ALICE) as client:
        client.send_event(run.id, "review.approved", {"approved": True})
    page.wait_for_selector("#waiting li:has-text('timer due at')")
    said = waiting.text_content()
    assert re.fullmatch(
        r"timer due at \d{2}:\d{2}:\d{2}\.\d{3} \(in \d+\.\d min\) \(step cool_down\)", said
    ), said
    # The step list: the event step completed, the timer's waits, in journal order.
    rows = page.locator("#steps tbody tr")
    page.wait_for_selector("#steps tr[data-step-id='cool_down'] td.status-waiting")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.stepId)") == ["approval", "cool_down"]
    assert (
        page.locator("#steps tr[data-step-id='approval'] td.status").text_content() == "completed"
    )
    with FevexClient(console_server.url, headers=ALICE) as client:
        client.cancel_run(run.id)
    assert problems == []
