"""examples/openai_agent.py runs as written: it explains itself without a key, and runs
an agent against whatever OPENAI_BASE_URL names, here the loopback server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from openai_loopback import TEST_API_KEY, LoopbackServer, ResponseEvents

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "openai_agent.py"


def run_example(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FEVEX_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
        check=False,
    )


def test_without_a_key_it_says_what_to_set() -> None:
    completed = run_example()
    assert completed.returncode == 0, completed.stderr
    assert "OPENAI_API_KEY" in completed.stdout
    # Both installs: fevex may come from an index or from a checkout.
    assert 'pip install "fevex[openai]"' in completed.stdout
    assert "in a checkout: pip install ./packages/openai" in completed.stdout


def test_with_a_key_it_runs_the_agent(server: LoopbackServer) -> None:
    server.respond(
        ResponseEvents()
        .function_call("call_1", "accounts_get", '{"account_id": 42}')
        .completed()
        .scripted(),
        ResponseEvents().message('{"answer": "Account 42 is active."}').completed().scripted(),
    )
    completed = run_example(
        OPENAI_API_KEY=TEST_API_KEY, OPENAI_BASE_URL=server.base_url, OPENAI_MODEL="gpt-test"
    )
    assert completed.returncode == 0, completed.stderr
    assert "completed: Account 42 is active." in completed.stdout
    assert server.requests[0].json["model"] == "gpt-test"


def test_an_unreachable_base_url_is_one_clear_line() -> None:
    import socket

    with socket.socket() as probe:  # a loopback port nothing listens on once it is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    completed = run_example(
        OPENAI_API_KEY=TEST_API_KEY, OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1"
    )
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    assert completed.stderr.count("\n") == 1, completed.stderr
    assert completed.stderr.startswith("error: [PROVIDER_NETWORK_ERROR] Could not reach OpenAI")
    assert "run.failed" in completed.stdout
