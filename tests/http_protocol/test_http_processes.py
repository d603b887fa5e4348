"""The run protocol across real processes: a server killed mid-stream and restarted, two
servers on one PostgreSQL store, and what ``fevex serve`` refuses to start.

``observe_run`` must yield every event of the run once, in order, whatever happened to the
connection: the events it yields are compared with the run's whole stored history.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fevex.events import RunEvent
from fevex.http import FevexClient

HERE = Path(__file__).resolve().parent
GUARD = 60.0
ALICE = {"Authorization": "Bearer alice"}


def whole_history(client: FevexClient, run_id: str) -> list[RunEvent]:
    events: list[RunEvent] = []
    while True:
        page = client.list_events(run_id, after=events[-1].id if events else None)
        events += page
        if not page:
            return events


class Observer(threading.Thread):
    """Observes a run with its own client, collecting what ``observe_run`` yields."""

    def __init__(self, url: str, run_id: str) -> None:
        super().__init__(daemon=True)
        self.client = FevexClient(url, headers=ALICE, timeout=GUARD, reconnect_for=GUARD)
        self.run_id = run_id
        self.events: list[RunEvent] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for event in self.client.observe_run(self.run_id):
                self.events.append(event)
        except BaseException as error:
            self.error = error
        finally:
            self.client.close()

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + GUARD
        while len(self.events) < count:
            assert self.is_alive(), self.error
            assert time.monotonic() < deadline, "the observer received too little"
            time.sleep(0.02)

    def finish(self) -> list[RunEvent]:
        self.join(GUARD)
        assert not self.is_alive(), "observe_run never ended"
        assert self.error is None, self.error
        return self.events


def test_observe_run_survives_the_server_being_killed_mid_stream(
    serve: Any, tmp_path: Path
) -> None:
    environment = {"FEVEX_TEST_TICK_SECONDS": "0.2", "FEVEX_TEST_LEASE_SECONDS": "1"}
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    first = serve(store, environment=environment).start()
    with FevexClient(first.url, headers=ALICE, timeout=GUARD) as alice:
        run = alice.start_agent("ticker", "8")
    observer = Observer(first.url, run.id)
    observer.start()
    observer.wait_for(6)

    first.kill()
    # The same address and store: the new process's worker recovers the run once the dead
    # process's lease lapses, and the client reconnects to it by itself.
    second = serve(store, port=first.port, environment=environment).start()
    observed = observer.finish()

    with FevexClient(second.url, headers=ALICE, timeout=GUARD) as alice:
        final = alice.get_run(run.id)
        stored = whole_history(alice, run.id)
    assert final.status == "completed"
    assert "run.recovered" in [event.type for event in stored]
    assert [event.id for event in observed] == [event.id for event in stored]
    assert [event.sequence for event in observed] == list(range(1, len(stored) + 1))


def test_two_servers_on_one_postgres_store(serve: Any, postgres_url: str) -> None:
    environment = {"FEVEX_TEST_TICK_SECONDS": "0.2", "FEVEX_TEST_LEASE_SECONDS": "1.5"}
    one = serve(postgres_url, environment=environment).start()
    other = serve(postgres_url, environment=environment).start()
    with (
        FevexClient(one.url, headers=ALICE, timeout=GUARD) as on_one,
        FevexClient(other.url, headers=ALICE, timeout=GUARD) as on_other,
    ):
        run = on_one.start_agent("ticker", "40")
        observer = Observer(other.url, run.id)
        observer.start()
        observer.wait_for(4)
        assert run.id in {listed.id for listed in on_other.list_runs(status="running").runs}

        cancelled = on_other.cancel_run(run.id, timeout=GUARD)

        assert cancelled.status == "cancelled"
        observed = observer.finish()
        stored = whole_history(on_one, run.id)
    assert observed[-1].type == "run.cancelled"
    assert [event.id for event in observed] == [event.id for event in stored]
    # Cancelled by its owner on the other server, which obeyed the request: no takeover.
    assert "run.recovered" not in [event.type for event in stored]


def test_serve_refuses_an_address_others_reach_without_authentication(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    refused = subprocess.run(
        [sys.executable, "-m", "fevex.cli", "serve", "--app", "http_service:build_fevex",
         "--store", store, "--create", "--host", "0.0.0.0", "--port", "0"],
        cwd=HERE, capture_output=True, text=True, timeout=GUARD,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert "SERVE_UNAUTHENTICATED" in refused.stderr
    assert "Uvicorn running" not in refused.stderr
    assert "Traceback" not in refused.stderr


def test_serve_refuses_several_processes_on_an_in_memory_store() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "fevex.cli", "serve", "--app", "http_service:http_app",
         "--store", "memory://", "--workers", "2", "--port", "0"],
        cwd=HERE, capture_output=True, text=True, timeout=GUARD,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert "--workers above 1 needs a store the processes share" in refused.stderr


def test_serve_on_loopback_serves_a_bare_app_to_anonymous_callers(
    serve: Any, tmp_path: Path
) -> None:
    server = serve(f"sqlite:///{tmp_path / 'runs.db'}", app="http_service:build_fevex").start()
    with FevexClient(server.url, timeout=GUARD) as anonymous:
        run = anonymous.start_agent("ticker", "1")
        assert [event.type for event in anonymous.observe_run(run.id)][-1] == "run.completed"
        assert anonymous.get_run(run.id).context == {
            "actor": None, "namespace": None, "attributes": {}, "prompt_values": {}
        }  # fmt: skip
