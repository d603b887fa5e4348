"""``fevex serve`` processes on loopback for the HTTP tests, serving ``http_service.py``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
GUARD = 60.0  # seconds; a hang guard, never a timing assertion
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


class ServeProcess:
    """One ``fevex serve`` process; its stderr is drained by a thread into ``lines``."""

    def __init__(
        self,
        store_url: str,
        *,
        port: int = 0,
        environment: dict[str, str] | None = None,
        arguments: Sequence[str] = (),
        app: str = "http_service:http_app",
    ) -> None:
        self.store_url = store_url
        self.environment = {**os.environ, **(environment or {})}
        self.arguments = [
            sys.executable, "-m", "fevex.cli", "serve", "--app", app, "--store", store_url,
            "--create", "--port", str(port), *arguments,
        ]  # fmt: skip
        self.lines: list[str] = []
        self.port = port
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServeProcess:
        self.lines = []
        listening = threading.Event()
        self.process = subprocess.Popen(
            self.arguments,
            cwd=HERE,
            env=self.environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        stderr = self.process.stderr
        assert stderr is not None

        def drain() -> None:
            for line in stderr:
                self.lines.append(line)
                found = _LISTENING.search(line)
                if found:
                    self.port = int(found.group(1))
                    listening.set()

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        deadline = time.monotonic() + GUARD
        while not listening.wait(0.05):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("fevex serve did not start:\n" + "".join(self.lines))
        return self

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as a crashed host would."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(GUARD)
        self._close()

    def _close(self) -> None:
        assert self.process is not None
        self._drain.join(GUARD)
        if self.process.stderr is not None:
            self.process.stderr.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(GUARD)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(GUARD)
            self._close()


@pytest.fixture
def serve() -> Iterator[type[ServeProcess]]:
    """``serve(store_url, ...)`` builds a ``ServeProcess``; every one started is stopped."""
    started: list[ServeProcess] = []

    class Tracked(ServeProcess):
        def start(self) -> ServeProcess:
            started.append(self)
            return super().start()

    yield Tracked
    for process in started:
        process.stop()


# The shared server's settings: short ticks, and pages of 5 events, so that one run spans
# several pages of every read.
SHARED_ENVIRONMENT = {
    "FEVEX_TEST_TICK_SECONDS": "0.05",
    "FEVEX_TEST_PAGE_SIZE": "5",
    "FEVEX_TEST_MAX_BODY": "4096",
}


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One server per test module, on a SQLite store of its own."""
    store = tmp_path_factory.mktemp("http") / "runs.db"
    server = ServeProcess(f"sqlite:///{store}", environment=SHARED_ENVIRONMENT).start()
    yield server
    server.stop()
