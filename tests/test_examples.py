"""The programs the README quotes run as written."""

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_quickstart_runs_an_agent_on_the_default_store() -> None:
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = completed.stdout.splitlines()
    assert [line.split()[1] for line in lines[:9]] == [
        "run.started",
        "model.started",
        "model.completed",
        "tool.started",
        "tool.completed",
        "model.started",
        "model.output.delta",
        "model.completed",
        "run.completed",
    ]
    assert lines[-1].endswith("completed: Account 42 is active.")
