"""The per-call benchmark's smoke run (benchmarks/tool_calls/per_call.py, ``--smoke``): both
shapes, both entry points, every run checked (its answer and that the tool ran once per
call), with Agno's side only where Agno is installed."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _smoke(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.tool_calls.per_call", "--smoke", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_smoke_run_measures_every_shape_size_and_entry_point(tmp_path: Path) -> None:
    out = tmp_path / "calls.json"
    completed = _smoke(tmp_path, "--out", str(out))
    assert completed.returncode == 0, completed.stderr
    figures = json.loads(out.read_text(encoding="utf-8"))
    expected = {"fevex"} | ({"agno"} if importlib.util.find_spec("agno") else set())
    assert set(figures["frameworks"]) == expected
    fevex = {
        (row["mode"], row["shape"], row["calls"]): row["us_per_call"]
        for row in figures["rows"]
        if row["framework"] == "fevex"
    }
    assert set(fevex) == {
        (mode, shape, calls)
        for mode in ("sync", "async")
        for shape in ("steps", "batch")
        for calls in (1, 3)
    }
    assert all(value > 0 for value in fevex.values())
    assert "| sync | steps | 3 |" in completed.stdout


def test_a_run_that_goes_wrong_fails_the_smoke_run(tmp_path: Path) -> None:
    # A model that answers before asking for any call: the run is refused as wrong, and the
    # smoke run exits non-zero.
    code = (
        "from benchmarks.tool_calls import scenario\n"
        "scenario.Plan.next_calls = lambda self, last_call_id: []\n"
        "from benchmarks.tool_calls import per_call\n"
        "raise SystemExit(per_call.main(['--smoke', '--frameworks', 'fevex']))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode != 0
    assert "after 0 tool calls" in completed.stderr
