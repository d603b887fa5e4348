"""Shared fixtures: the stores the cross-package tests run on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

LEASE_SECONDS = 1.0


class EffectService:
    def __init__(self) -> None:
        self.applied: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.authorizations: list[str] = []
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                key = self.headers.get("Idempotency-Key", "")
                length = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(length)
                with service._lock:
                    service.requests[key] += 1
                    if "Authorization" in self.headers:
                        service.authorizations.append(self.headers["Authorization"])
                    first = key not in service.applied
                    if first:
                        service.applied[key] += 1
                body = json.dumps({"applied": first}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/charge"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> EffectService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def migrated_database(databases: Any) -> str:
    """A database of this worker's PostgreSQL server that ``fevex db upgrade`` migrated: the
    template of each test's own."""
    name = databases.create()
    subprocess.run(
        [sys.executable, "-m", "fevex.cli", "db", "upgrade", "--store", databases.url(name)],
        check=True,
        capture_output=True,
    )
    return str(name)


@pytest.fixture
def postgres_url(databases: Any, migrated_database: str) -> Iterator[str]:
    """A migrated database of this test's own, dropped after it."""
    name = databases.create(template=migrated_database)
    yield databases.url(name)
    databases.drop(name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str | None:
    """A run store for an app: ``None`` (an in-memory store, which apps of one test share
    by passing the first app's ``run_store``), a SQLite file or a PostgreSQL database."""
    if request.param == "memory":
        return None
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def service() -> Iterator[EffectService]:
    with EffectService() as running:
        yield running


@pytest.fixture
def environment(
    store_url: str, service: EffectService, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    values = {
        "FEVEX_RUN_STORE": store_url,
        "FEVEX_TEST_EFFECT_URL": service.url,
        "FEVEX_TEST_LEASE_SECONDS": str(LEASE_SECONDS),
        "FEVEX_TEST_TOOL_DELAY": "0.15",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **values}


def _stored_bytes(store_url: str) -> bytes:
    """Every byte the store keeps: the SQLite file with its journal files, or every file
    of the PostgreSQL cluster's data directory (tables, indexes and WAL)."""
    if store_url.startswith("sqlite"):
        database = Path(store_url.removeprefix("sqlite:///"))
        files = sorted(database.parent.glob(database.name + "*"))
    else:
        import psycopg

        dsn = store_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn, autocommit=True) as connection:
            connection.execute("CHECKPOINT")
            row = connection.execute("SHOW data_directory").fetchone()
        assert row is not None
        files = [path for path in Path(row[0]).rglob("*") if path.is_file()]
    assert files
    return b"".join(path.read_bytes() for path in files)


@pytest.fixture
def stored_bytes() -> Any:
    """``stored_bytes(store_url)``: every byte the store keeps, to search for secrets."""
    return _stored_bytes
