"""Two real processes publish two candidates against the same record revision, on one
SQLite file and one PostgreSQL database: both pass every check (their ``verify_sources``
waits until both have read the record), exactly one swap is written, the other process is
refused with ``PUBLICATION_CONFLICT``, and the official set is the winner's."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from fevex import create_fevex
from fevex.runtime import ExecutionContext

pytestmark = pytest.mark.anyio

HERE = Path(__file__).resolve().parent
ROUNDS = 2


def _racer(
    url: str, namespace: str, revision: int, candidate: str, racer: str, barrier: Path
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(HERE / "publication_racer.py"),
            url,
            namespace,
            str(revision),
            candidate,
            racer,
            str(barrier),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_two_processes_publishing_against_one_revision_exactly_one_wins(
    store_url: str, tmp_path: Path
) -> None:
    sys.path.insert(0, str(HERE))
    try:
        import publication_racer
    finally:
        sys.path.remove(str(HERE))
    pub = publication_racer.publication()
    namespace = f"race-{uuid.uuid4().hex[:8]}"
    editor = ExecutionContext(actor={"id": "ana", "type": "editor"}, namespace=namespace)
    async with create_fevex(run_store=store_url) as app:
        for round_number in range(1, ROUNDS + 1):
            state = await pub.get(app, context=editor)
            candidates = {}
            revision = state.revision
            for racer in ("left", "right"):
                receipt = await pub.propose(
                    app,
                    revision=revision,
                    document={
                        "id": "guide",
                        "revision": round_number,
                        "body": f"Written by {racer} in round {round_number}.",
                    },
                    sources=[{"id": "handbook", "version": str(round_number)}],
                    context=editor,
                )
                candidates[racer] = receipt.candidate_id
                revision = receipt.revision
            barrier = tmp_path / f"barrier-{round_number}"
            barrier.mkdir()
            racers = [
                _racer(store_url, namespace, revision, candidates[racer], racer, barrier)
                for racer in ("left", "right")
            ]
            reports = []
            for process in racers:
                out, err = process.communicate(timeout=120)
                assert process.returncode == 0, err
                reports.append(json.loads(out))
            winners = [report for report in reports if "revision" in report]
            losers = [report for report in reports if "refused" in report]
            assert len(winners) == 1, reports
            assert [loser["refused"] for loser in losers] == ["PUBLICATION_CONFLICT"]
            assert winners[0]["revision"] == revision + 1
            after = await pub.get(app, context=editor)
            assert after.revision == revision + 1
            assert after.published_revision == round_number
            (official,) = after.documents
            winner = winners[0]["racer"]
            assert official.document.body == f"Written by {winner} in round {round_number}."
            assert official.candidate_id == candidates[winner]
            # The loser's candidate is still there, now stale: it must be prepared again.
            assert [each.id for each in after.candidates] == [candidates[losers[0]["racer"]]]
            await pub.reject(
                app,
                revision=after.revision,
                candidate_id=candidates[losers[0]["racer"]],
                context=editor,
            )
