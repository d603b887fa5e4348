"""The OpenAPI benchmark runs, in its smoke mode (a small generated document)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_openapi_benchmark_runs_in_smoke_mode(tmp_path: Path) -> None:
    out = tmp_path / "openapi.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.openapi.run", "--smoke", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "next provider" in completed.stdout
    figures = json.loads(out.read_text())
    assert figures["supported_operations"] == figures["operations"] == 60
    # A provider of one operation from an indexed document does not parse it again.
    assert figures["next_provider_median_s"] < figures["first_provider_s"]
    assert figures["first_provider_retained_mib"] > figures["next_provider_retained_mib"]
