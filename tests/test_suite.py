"""What the suite itself promises: the README's two commands, tests that share something
kept on one worker, and a suite started in the background still interrupting children."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_starts_with_the_main_job_and_the_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.partition("#")[0].strip() for line in first_block.splitlines()]
    assert commands == [
        "python -m pip install ./packages/core && python examples/quickstart.py",
        'python -m pip install "nox[uv]" && python -m nox -s suite',
    ]
    # Nothing before it: the block is the first thing a reader copies.
    assert readme.startswith("# fevex\n\n```bash\n")


GROUPED = """
import os
import pytest

pytestmark = pytest.mark.xdist_group("shared")


@pytest.mark.parametrize("n", range(6))
def test_grouped(n):
    print("WORKER", os.environ["PYTEST_XDIST_WORKER"])
"""


def test_tests_of_one_xdist_group_run_on_one_worker(tmp_path: Path) -> None:
    """The suite's options (noxfile ``SUITE_OPTIONS``) keep a group on one worker; a pytest
    or xdist release that drops the groups silently fails here."""
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    completed = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-c", "/dev/null", "--rootdir", str(tmp_path),
            "-p", "no:randomly", "-p", "no:cacheprovider", "--numprocesses", "3",
            "--dist", "loadgroup", "-rP", "test_grouped.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    workers = re.findall(r"^WORKER (gw\d+)$", completed.stdout, flags=re.MULTILINE)
    assert len(workers) == 6, completed.stdout
    assert len(set(workers)) == 1, workers


def test_a_suite_started_with_sigint_ignored_still_interrupts_its_children() -> None:
    """Started from a script's ``&`` or under ``nohup``, pytest inherits SIGINT ignored; the
    Ctrl-C tests must still see their child raise ``KeyboardInterrupt`` at once."""
    completed = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider",
            "-q", "tests/test_ctrl_c_blocking_twins.py",
            "packages/core/tests/test_streaming.py", "-k",
            "(run_agent and sqlite) or ctrl_c_in_a_blocking_run or between_blocking_calls",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout[-4000:]
    assert re.search(r"\b3 passed\b", completed.stdout), completed.stdout[-2000:]
