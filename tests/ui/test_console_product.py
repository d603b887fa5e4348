"""The console as a product, in headless Chromium against a real ``fevex serve --ui`` of
``examples/demo_app.py``: the runs tree and its totals, the trace waterfall against the
spans an in-memory exporter recorded for the same runs, the conversation, the step list,
waits in words and a duration that stops at a pause. Screenshots of each page are saved.

The runs are made first by ``demo_runs.py`` (the same app, in another process, with an
``InMemoryTraceExporter``) on the store the server then serves.
"""

from __future__ import annotations

import json
import os
import re
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GUARD = 60.0  # seconds; a hang guard, never a timing assertion
GUARD_MS = 60_000
MILLISECONDS = re.compile(r"\d{2}:\d{2}:\d{2}\.\d{3}")


@pytest.fixture(scope="module")
def demo(console_server_type: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The server, and what ``demo_runs.py`` made and recorded before it started."""
    store = f"sqlite:///{tmp_path_factory.mktemp('product') / 'runs.db'}"
    made = subprocess.run(
        [sys.executable, str(HERE / "demo_runs.py"), store],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=True,
    )
    recorded = json.loads(made.stdout)
    server = console_server_type(store, app="examples.demo_app:app", cwd=ROOT)
    server.recorded = recorded
    yield server
    server.stop()


def open_page(browser: Any, server: Any, hash_path: str) -> tuple[Any, list[str]]:
    """A page at ``hash_path``, and the list its errors go to: uncaught exceptions,
    console errors and requests to any other host."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
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
    page.goto(f"{server.url}/ui/{hash_path}")
    return page, problems


def format_cost(amount: float) -> str:
    """As the console writes a cost: at most six decimals, no trailing zeros."""
    return f"{amount:.6f}".rstrip("0").rstrip(".") + " USD"


def test_the_tree_nests_a_workflow_s_children_and_its_totals_add_them_up(
    demo: Any, browser: Any, artifacts: Path
) -> None:
    workflow_id = demo.recorded["workflow"]
    with FevexClient(demo.url) as client:
        children = client.list_runs(parent_run_id=workflow_id).runs
        child_views = [client.get_run_view(child.id) for child in children]
    assert len(children) == 2
    page, problems = open_page(browser, demo, "#/")
    root = page.locator(f'#runs tr[data-run-id="{workflow_id}"]')
    root.wait_for()
    assert root.get_attribute("data-depth") == "0"
    for child in children:
        nested = page.locator(f'#runs tr[data-run-id="{child.id}"]')
        nested.wait_for()
        assert nested.get_attribute("data-depth") == "1"
        assert nested.locator("td.parent").text_content() == workflow_id
    # Nested right under their root, oldest first (the order the workflow started them).
    order = page.locator("#runs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.runId)")
    at = order.index(workflow_id)
    assert order[at + 1 : at + 3] == [child.id for child in reversed(children)]
    # Roots only: every top-level row has no parent.
    parents = page.locator('#runs tr[data-depth="0"] td.parent').all_text_contents()
    assert len(parents) >= 3  # the workflow and the two agents made alone
    assert set(parents) == {""}
    # The root's tokens and cost are its children's (the workflow runs no model itself).
    child_tokens = sum(child.usage["total_tokens"] for child in children)
    child_cost = sum(view["turn"]["cost"]["amount"] for view in child_views)
    assert root.locator(f'td[data-tokens-of="{workflow_id}"]').text_content() == str(child_tokens)
    assert root.locator(f'td[data-cost-of="{workflow_id}"]').text_content() == format_cost(
        child_cost
    )
    page.screenshot(path=str(artifacts / "runs-tree.png"))
    page.locator("main").screenshot(path=str(artifacts / "readme-runs.png"))
    # Collapsed, the children go; with "roots only" off, every run is a row of its own.
    root.locator("button.toggle").click()
    page.locator(f'#runs tr[data-run-id="{children[0].id}"]').wait_for(state="detached")
    root = page.locator(f'#runs tr[data-run-id="{workflow_id}"]')
    root.locator("button.toggle").click()
    page.locator(f'#runs tr[data-run-id="{children[0].id}"]').wait_for()
    page.uncheck("#roots-only")
    page.wait_for_selector(f'#runs tr[data-run-id="{children[0].id}"][data-depth=""]')
    assert problems == []


def test_the_waterfall_has_one_bar_per_span_the_exporter_recorded(
    demo: Any, browser: Any, artifacts: Path
) -> None:
    workflow_id = demo.recorded["workflow"]
    with FevexClient(demo.url) as client:
        trace_id = client.get_run_view(workflow_id)["trace_id"]
    recorded = demo.recorded["spans"][trace_id]
    page, problems = open_page(browser, demo, f"#/runs/{workflow_id}")
    page.wait_for_selector("#connection:text('The run ended: completed.')")
    bars = page.locator("#waterfall rect.span-bar")
    page.wait_for_function(
        "n => document.querySelectorAll('#waterfall rect.span-bar').length === n",
        arg=len(recorded),
    )
    drawn = bars.evaluate_all("bars => bars.map(b => b.dataset.spanId)")
    assert sorted(drawn) == sorted(span["span_id"] for span in recorded)
    kinds = sorted(bars.evaluate_all("bars => bars.map(b => b.dataset.kind)"))
    assert kinds == sorted(span["kind"] for span in recorded)
    assert page.locator("#waterfall rect.span-bar.failed").count() == 0
    # Bars share one time axis: the root execution starts first and ends last.
    boxes = bars.evaluate_all(
        "bars => bars.map(b => [b.dataset.kind, +b.getAttribute('x'),"
        " +b.getAttribute('x') + +b.getAttribute('width')])"
    )
    first_run = min(box[1] for box in boxes if box[0] == "run")
    assert all(box[1] >= first_run for box in boxes)
    # Tokens and cost per model bar.
    assert " t · " in page.locator("#waterfall").text_content()
    assert "USD" in page.locator("#waterfall").text_content()
    page.screenshot(path=str(artifacts / "run-trace.png"), full_page=True)
    page.locator("#waterfall").screenshot(path=str(artifacts / "readme-trace.png"))
    # A click on one of the workflow's own bars shows the event it came from.
    step = page.locator('#waterfall rect.span-bar[data-kind="workflow_step"]').first
    sequence = step.get_attribute("data-sequence")
    step.click()
    page.wait_for_selector(f'#timeline tr.selected[data-sequence="{sequence}"]')
    assert "workflow.step.completed" in page.locator("#selected-event h3").text_content()
    # A child's bar opens the child's page at its event.
    tool = page.locator('#waterfall rect.span-bar[data-kind="tool"]').first
    child_id, sequence = tool.get_attribute("data-run-id"), tool.get_attribute("data-sequence")
    assert child_id != workflow_id
    tool.click()
    page.wait_for_selector(f"#run-id:text('{child_id}')")
    page.wait_for_selector(f'#timeline tr.selected[data-sequence="{sequence}"]')
    assert "tool." in page.locator("#selected-event h3").text_content()
    assert problems == []


def test_a_failing_span_is_marked(demo: Any, browser: Any) -> None:
    refused = demo.recorded["refused"]
    page, problems = open_page(browser, demo, f"#/runs/{refused}")
    failed = page.locator("#waterfall rect.span-bar.failed")
    failed.wait_for()
    assert failed.get_attribute("data-kind") == "tool"
    facts = page.locator("#waterfall text.facts").all_text_contents()
    assert [text for text in facts if "✕" in text] == ["0 ms · ✕ TOOL_REJECTED"]
    # The conversation shows the refusal as a failed tool result.
    assert page.locator("#conversation .tool-result.error").count() == 1
    assert problems == []


def test_the_run_page_shows_input_first_a_conversation_and_the_step_list(
    demo: Any, browser: Any, artifacts: Path
) -> None:
    workflow_id = demo.recorded["workflow"]
    with FevexClient(demo.url) as client:
        children = list(reversed(client.list_runs(parent_run_id=workflow_id).runs))
    page, problems = open_page(browser, demo, f"#/runs/{workflow_id}")
    page.wait_for_selector("#steps tbody tr:nth-child(2) td.status-completed")
    # The input first, as data.
    first = page.locator("main > h1 + div")
    assert first.get_attribute("id") == "input-box"
    assert json.loads(page.locator("#input").text_content()) == {"account_id": 7, "amount": 12}
    # The steps in journal order, each with the child run it started, linked.
    rows = page.locator("#steps tbody tr")
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.stepId)") == ["check", "refund"]
    cells = rows.first.locator("td").all_text_contents()
    assert cells[:3] == ["check", "agent", "completed"]
    assert re.fullmatch(r"\d+ ms|\d+\.\d s", cells[3])
    links = rows.locator("td a").all_text_contents()
    assert links == [child.id for child in children]
    # Times to the millisecond, and relative to the start.
    assert MILLISECONDS.search(page.locator("#started").text_content())
    assert "after start" in page.locator("#timeline tr").last.text_content()
    page.screenshot(path=str(artifacts / "run-workflow.png"), full_page=True)
    # The check step's agent: the conversation shows its tool call and the result.
    rows.first.locator("td a").click()
    page.wait_for_selector(f"#run-id:text('{children[0].id}')")
    call = page.locator("#conversation .tool-call")
    call.wait_for()
    assert call.locator(".tool-name").text_content() == "accounts_get"
    assert json.loads(call.locator(".tool-input").text_content()) == {"account_id": 7}
    result = page.locator("#conversation .tool-result")
    assert result.locator(".tool-name").text_content() == "accounts_get"
    assert json.loads(result.locator(".tool-output").text_content())["balance"] == 107
    roles = page.locator("#conversation .turn").evaluate_all(
        "turns => turns.map(t => t.dataset.role)"
    )
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert "What is the status of account 7?" in page.locator("#input").text_content()
    page.screenshot(path=str(artifacts / "run-conversation.png"), full_page=True)
    assert problems == []


def test_a_wait_is_described_in_words_and_a_paused_run_s_duration_stops(
    demo: Any, browser: Any, artifacts: Path
) -> None:
    waiting = demo.recorded["waiting"]
    page, problems = open_page(browser, demo, f"#/runs/{waiting}")
    page.wait_for_selector("#waiting li")
    said = page.locator("#waiting").text_content()
    assert said.startswith("approval of refunds_issue by any reviewer")
    assert MILLISECONDS.search(said)
    duration = page.locator("#duration")
    assert duration.get_attribute("data-stopped") == "paused"
    before = duration.text_content()
    assert "stopped at the pause" in before
    time.sleep(1.5)  # a running clock would have moved on by now
    page.wait_for_selector("#connection:text('Live.')")
    assert duration.text_content() == before
    page.screenshot(path=str(artifacts / "run-waiting.png"), full_page=True)
    # A workflow started through the server waits for its refund's child run.
    with FevexClient(demo.url) as client:
        workflow = client.start_workflow("refund_review", {"account_id": 8, "amount": 3})
    page.goto(f"{demo.url}/ui/#/runs/{workflow.id}")
    page.wait_for_selector("#waiting li:has-text('(step refund)')")
    child_link = page.locator("#waiting li a")
    with FevexClient(demo.url) as client:
        paused = client.get_run(workflow.id)
    assert child_link.text_content() == paused.pause["run_ids"][0]  # type: ignore[index]
    assert "waiting for a child run to end" in page.locator("#waiting").text_content()
    # The steps table is drawn from the run's events, which may arrive after its pause.
    page.wait_for_selector('#steps tr[data-step-id="refund"] td.status-waiting')
    assert page.locator('#steps tr[data-step-id="refund"] td.status-waiting').count() == 1
    assert problems == []
