"""Workers as separate hosts on one PostgreSQL server, one of them cut off mid-run.

Four ``fevex worker`` processes, each in its own network namespace with its own address,
reach one PostgreSQL 15 server over a virtual bridge (``benchmarks/durable/network_hosts``)
and run 200 jobs of ``benchmarks/durable/worker_hosts_app``: a workflow whose child agent
run makes one call of a tool that is not idempotent and appends a line to a file of its
own per call. Once host0 has finished a few runs, its next calls of that tool stop right
after their effect (``FEVEX_HOSTS_HOLD``); while one is held there, every packet between
host0 and the server is dropped (nftables in host0's namespace), and the calls go on into
the cut. Once the others have taken over every run host0 held (its lease expired), host0 is
let through again.

What must hold, read back from the store and from the log each process's store wrote of
what it asked (which event ids it committed, under which lease generation, and how each
attempt ended): every job ends; the others took host0's runs over; every commit host0
attempted under a lease it held at the cut was refused (``LEASE_LOST``) and left nothing;
each run's events are one clean sequence whose lease generations never go back (no event of
a stale holder after a takeover); no effect is repeated; and a run whose effect was in flight
at the cut ends as fevex documents for a tool that is not idempotent (README "Durable
execution": the run fails with ``TOOL_EFFECT_UNCERTAIN`` instead of running the tool again),
every other run completes. The benchmark's smoke mode then measures runs/s for 1, 2, 4 and 8
hosts. Both need root, ``ip``, ``nft`` and PostgreSQL; without them they skip, naming what is
missing, except under ``CI``, where they fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# One test at a time on one suite worker: each lab picks a free subnet and adds a bridge.
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("network-namespaces")]

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.durable import worker_hosts  # noqa: E402
from benchmarks.durable.network_hosts import NetworkUnavailable  # noqa: E402

HOSTS = 4
JOBS = 200
LEASE_SECONDS = 2.0
TOOL_DELAY = 0.15
# Below the lease, as the store requires: a frozen session frees its row in time.
TIMEOUTS = {"statement_timeout": 1, "lock_timeout": 0.5, "idle_in_transaction_session_timeout": 1}
TERMINAL_EVENTS = {"run.completed", "run.failed", "run.cancelled"}


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the workers-as-hosts tests: {reason}")
    pytest.skip(reason)


@pytest.fixture
def lab() -> Iterator[worker_hosts.Cluster]:
    """Fresh namespaces, bridge and PostgreSQL server for this test, all removed after it,
    also when it fails."""
    testing = pytest.importorskip("fevex_postgres.testing")
    try:
        context = worker_hosts.cluster(HOSTS)
        lab = context.__enter__()
    except NetworkUnavailable as missing:
        _missing(f"cannot make network namespaces here: {missing}")
    except testing.PostgresNotAvailable as missing:
        _missing(f"PostgreSQL is not installed here: {missing}")
    try:
        yield lab
    finally:
        context.__exit__(None, None, None)


class Logs:
    """What each process's store wrote of what it asked (``worker_hosts_app``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def read(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Per host: its ``leases`` and its ``attempts`` (commits, creations, renewals,
        each with its ``outcome`` and ``end``, ``None`` while it is in flight)."""
        hosts: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for path in sorted(self.folder.glob("*.jsonl")):
            host = path.name.rsplit("-", 1)[0]
            leases, attempts, by_number = [], [], {}
            for line in path.read_text(encoding="utf-8").splitlines():
                if not line.endswith("}"):
                    continue  # a line still being written
                entry = json.loads(line)
                if entry["op"] == "lease":
                    leases.append(entry)
                elif entry["op"] == "done":
                    by_number[entry["n"]].update(
                        outcome=entry["outcome"], cause=entry.get("cause"), end=entry["end"]
                    )
                else:
                    entry.update(outcome=None, end=None, host=host)
                    by_number[entry["n"]] = entry
                    attempts.append(entry)
            hosts[host] = {"leases": leases, "attempts": attempts}
        return hosts


async def poll(what: str, check: Any, timeout: float, every: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if asyncio.iscoroutine(found):
            found = await found
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting until {what}")
        await asyncio.sleep(every)


def warmed_up(logs: Logs) -> bool:
    """host0 has finished a few runs."""
    host0 = logs.read().get("host0")
    if host0 is None:
        return False
    attempts = host0["attempts"]
    finished = [a for a in attempts if "run.completed" in a.get("types", ()) and a["end"]]
    return len(finished) >= 6


def held_at(host: dict[str, list[dict[str, Any]]], moment: float) -> dict[str, int]:
    """The runs (and lease generations) ``host`` held at ``moment``: leases it had taken,
    minus those a commit released before then."""
    held = {lease["run"]: lease["gen"] for lease in host["leases"] if lease["end"] < moment}
    for attempt in host["attempts"]:
        if (
            attempt.get("release")
            and attempt["outcome"] == "ok"
            and attempt["end"] < moment
            and held.get(attempt["run"]) == attempt["gen"]
        ):
            del held[attempt["run"]]
    return held


def run_trail(hosts: dict[str, Any], run_id: str, cut: float) -> list[Any]:
    """What every process asked of the store for ``run_id``, in seconds from the cut."""
    return sorted(
        (round(entry["start"] - cut, 3), name, entry["op"], entry.get("types"),
         entry.get("gen"), entry.get("outcome"), entry.get("cause"))
        for name, host in hosts.items()
        for entry in (*host["attempts"], *host["leases"])
        if entry["run"] == run_id
    )  # fmt: skip


async def stuck_runs(app: Any, hosts: dict[str, Any], cut: float) -> dict[str, Any]:
    """The runs still running or paused, and the children a paused one waits for: status,
    wake-up, events and trail of each, to tell why nothing finished them."""

    async def described(run: Any) -> dict[str, Any]:
        events = await app.list_events(run.id)
        return {
            "status": run.status, "error": run.error, "pause": run.pause,
            "wake_at": run.wake_at, "events": [event.type for event in events],
            "trail": run_trail(hosts, run.id, cut),
        }  # fmt: skip

    stuck: dict[str, Any] = {}
    for status in ("running", "paused"):
        for run in await app.list_runs(status=status, limit=3):
            stuck[run.id] = await described(run)
            for child_id in (run.pause or {}).get("run_ids", ()):
                stuck[child_id] = await described(await app.get_run(child_id))
    return stuck


async def test_a_host_cut_off_mid_run_is_fenced_and_its_runs_are_taken_over(
    lab: worker_hosts.Cluster, tmp_path: Path
) -> None:
    local, remote = lab.database("hosts_cut", TIMEOUTS)
    effects, log = tmp_path / "effects", tmp_path / "log"
    effects.mkdir()
    log.mkdir()
    logs = Logs(log)
    host0 = lab.network.hosts[0]
    hold = tmp_path / "hold"
    hold.mkdir()
    gate = hold / host0.name
    app = worker_hosts.submitter_app(local, LEASE_SECONDS, log)
    environment = worker_hosts.worker_environment(effects, LEASE_SECONDS, TOOL_DELAY, log, hold)
    workers = worker_hosts.Workers(lab.network.hosts, remote, tmp_path, environment)
    try:
        await asyncio.to_thread(workers.wait_ready)
        await worker_hosts.submit(app, JOBS, time.time())
        await poll("host0 finished a few runs", lambda: warmed_up(logs), timeout=120)
        gate.touch()
        inside = f"{host0.name}.*"
        await poll("host0 is inside a tool", lambda: list(hold.glob(inside)), timeout=60)
        lab.network.cut(host0)
        cut = time.time()
        gate.unlink()
        # Until the restore, what host0's log says it was granted it was granted before the
        # cut took effect, since no answer crosses the cut: also a lease it asked for while
        # the cut was being made, or one whose answer it logged only after.
        assert held_at(logs.read()["host0"], time.time()), "host0 held no run at the cut"

        async def taken_over() -> bool:
            """Each run host0 held is another host's now, or ended (or paused) by a commit
            host0 sent just before the cut, whose answer the cut withheld."""
            now = logs.read()
            held = held_at(now["host0"], time.time())
            others = [
                (lease["run"], lease["gen"])
                for name, host in now.items()
                if name != "host0"
                for lease in host["leases"]
            ]
            for run, gen in held.items():
                if any(r == run and g > gen for r, g in others):
                    continue
                if (await app.get_run(run)).status == "running":
                    return False
            return True

        await poll("the others took host0's runs over", taken_over, timeout=60, every=0.1)
        # Restored after its leases expired, also those of commits the cut withheld.
        await asyncio.sleep(max(cut + LEASE_SECONDS + 0.5 - time.time(), 0))
        lab.network.restore(host0)
        restored = time.time()
        try:
            await worker_hosts.wait_until_done(app, timeout=180)
        except TimeoutError as stuck:
            raise AssertionError(await stuck_runs(app, logs.read(), cut)) from stuck

        def settled() -> bool:
            return all(a["end"] is not None for a in logs.read()["host0"]["attempts"])

        # A commit host0 sent into the cut is retransmitted by TCP after the restore.
        await poll("host0's attempts in flight ended", settled, timeout=120, every=0.2)
        statuses = await asyncio.to_thread(workers.stop)
        assert statuses == dict.fromkeys(workers.processes, 0), {
            name: workers.stderr(name)[-2000:] for name in workers.processes
        }
        flows = await worker_hosts.all_runs(app, "workflow")
        agents = await worker_hosts.all_runs(app, "agent")
        events = {run.id: await app.list_events(run.id) for run in [*flows, *agents]}
        hosts = logs.read()
        # The runs host0 held at the cut: what it was granted, and did not release, before
        # the restore.
        held = held_at(hosts["host0"], restored)
    finally:
        gate.unlink(missing_ok=True)
        if lab.network.is_cut(host0):
            lab.network.restore(host0)
        workers.kill()
        await app.close()

    def trail(run_id: str) -> list[Any]:
        return run_trail(hosts, run_id, cut)

    # Every job ended: completed, or failed as documented for an uncertain effect.
    assert len(flows) == JOBS
    child = {run.parent_run_id: run for run in agents}
    assert set(child) == {run.id for run in flows}, {
        flow.id: (flow.status, flow.error, [e.type for e in events[flow.id]], trail(flow.id))
        for flow in flows
        if flow.id not in child
    }
    assert len(agents) == JOBS
    uncertain = set()
    for flow in flows:
        agent = child[flow.id]
        if flow.status == "completed":
            assert agent.status == "completed"
            assert flow.output == agent.output == "Recorded."
            continue
        assert flow.status == "failed", flow
        assert flow.error["code"] == agent.error["code"] == "TOOL_EFFECT_UNCERTAIN", flow
        types = [event.type for event in events[agent.id]]
        assert "tool.started" in types
        assert "tool.completed" not in types
        assert agent.id in held, ("uncertain, yet not host0's at the cut", trail(agent.id))
        uncertain.add(agent.id)
    assert len(uncertain) <= worker_hosts.CONCURRENCY

    # No effect repeated: one line per call of a completed run, at most one otherwise.
    lines = {path.name: path.read_text().splitlines() for path in sorted(effects.iterdir())}
    assert set(lines) <= {f"{agent.id}.call-1" for agent in agents}
    for agent in agents:
        recorded = lines.get(f"{agent.id}.call-1", [])
        assert len(recorded) == (1 if agent.status == "completed" else len(recorded)), agent
        assert len(recorded) <= 1, (agent.id, recorded)

    # Which process wrote each stored event, under which lease generation.
    creations = {
        (name, lease["run"]): lease["gen"]
        for name, host in hosts.items()
        for lease in host["leases"]
        if lease["via"] == "create"
    }
    writer: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name, host in hosts.items():
        for attempt in host["attempts"]:
            if attempt["op"] == "create":
                attempt["gen"] = creations.get((name, attempt["run"]))
            for event_id in attempt.get("events", ()):
                writer[event_id].append(attempt)
    stored = {event.id for run_events in events.values() for event in run_events}
    taken_from_host0 = 0
    for run_id, run_events in events.items():
        assert [e.sequence for e in run_events] == list(range(1, len(run_events) + 1)), run_id
        assert len({e.id for e in run_events}) == len(run_events)
        assert [e.type in TERMINAL_EVENTS for e in run_events].count(True) == 1, run_id
        assert run_events[-1].type in TERMINAL_EVENTS
        generations = []
        for event in run_events:
            # Written by exactly one logged attempt that succeeded.
            (attempt,) = [a for a in writer[event.id] if a["outcome"] == "ok"]
            generations.append(attempt["gen"])
            if event.type == "run.recovered" and run_id in held:
                taken_from_host0 += attempt["host"] != "host0"
        # Fencing: once a newer lease wrote, no event of an older one follows.
        assert generations == sorted(generations), (run_id, generations)
    assert taken_from_host0 >= 1, (
        "no run of host0 was recovered by another host",
        {run: ([e.type for e in events.get(run, ())], trail(run)) for run in held},
    )

    # Every commit host0 attempted after the cut under a lease it held then was refused by
    # the store once the link was back, and left nothing.
    fenced = [
        attempt
        for attempt in hosts["host0"]["attempts"]
        if attempt["start"] >= cut and held.get(attempt["run"]) == attempt["gen"]
    ]
    commits = [attempt for attempt in fenced if attempt["op"] == "commit"]
    assert commits, "host0 attempted no commit after the cut"
    for attempt in fenced:
        assert attempt["outcome"] != "ok", attempt
        assert not set(attempt.get("events", ())) & stored, attempt
    # Sent into the cut, each ended only after the restore: refused by the store once TCP
    # delivered it (LEASE_LOST), or given up by host0 itself when the run's workflow, whose
    # lease it also held, lost that lease (the in-flight statement is then cancelled); in
    # either case nothing it carried was stored (above).
    assert {attempt["outcome"] for attempt in commits} <= {"LEASE_LOST", "CancelledError"}
    assert any(attempt["end"] > restored for attempt in commits), commits


@pytest.mark.parametrize("counts", [[1, 2], [4], [8]], ids=["1-2", "4", "8"])
def test_the_workers_as_hosts_benchmark_measures_one_to_eight_hosts(
    tmp_path: Path, counts: list[int]
) -> None:
    """The smoke mode's host counts, split in three runs so that each stays under 30 s on a
    loaded suite worker."""
    out = tmp_path / "hosts.json"
    workers = ",".join(map(str, counts))
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.durable.worker_hosts",
            "--smoke",
            "--workers",
            workers,
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if completed.returncode == 2:
        _missing(completed.stderr.strip().splitlines()[-1])
    assert completed.returncode == 0, completed.stderr[-4000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    rows = result["rows"]
    assert [row["workers"] for row in rows] == counts
    for row in rows:
        assert row["agent_runs_completed"] == row["jobs"] == worker_hosts.SMOKE_JOBS
        assert row["effects"] == row["jobs"]
        assert row["runs_per_second"] > 0
    assert result["exit_statuses"] == {f"host{i}": 0 for i in range(max(counts))}
    assert f"| {max(counts)} | 12 |" in completed.stdout
    assert result["machine"]["load_average"] is not None
