"""The long-stream benchmark's smoke run: it runs, its runs complete on a real SQLite file,
and its figures are whole (benchmarks/long_streams.py, ``--quick``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_quick_long_stream_benchmark_runs(tmp_path: Path) -> None:
    out = tmp_path / "streams.json"
    completed = subprocess.run(
        [sys.executable, "-m", "benchmarks.long_streams", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    assert "| memory |" in completed.stdout
    assert "| sqlite |" in completed.stdout
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert [store["store"] for store in figures["stores"]] == ["memory", "sqlite"]
    for store in figures["stores"]:
        fine, coarse = store["fine"], store["coarse"]
        assert fine["peak_bytes"] > 0
        assert coarse["peak_bytes"] > 0
        assert fine["transcript_bytes"] > figures["chars"]
        # The fine stream's deltas past the step's first thousand are joined.
        assert fine["delta_events"] < 1100
        assert coarse["delta_events"] == coarse["deltas"]
