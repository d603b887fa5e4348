"""A ``fevex serve --ui`` process on loopback serving ``console_service.py``, and headless
Chromium (Debian's ``chromium``) driven by Playwright for Python."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
GUARD = 60.0  # seconds; a hang guard, never a timing assertion
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
CHROMIUM_ARGUMENTS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]  # fmt: skip


class ConsoleServer:
    """One ``fevex serve --ui`` process; its stderr is drained by a thread into ``lines``.
    By default it serves ``console_service:http_app``; ``app``, ``cwd`` and ``arguments``
    serve another (``examples.demo_app:app`` from the repository's root)."""

    def __init__(
        self,
        store_url: str,
        port: int = 0,
        *,
        app: str = "console_service:http_app",
        cwd: Path = HERE,
        arguments: tuple[str, ...] = (),
    ) -> None:
        self.lines: list[str] = []
        self.store_url = store_url
        self.port = port
        listening = threading.Event()
        self.process = subprocess.Popen(
            [
                sys.executable, "-m", "fevex.cli", "serve", "--ui",
                "--app", app, "--store", store_url, "--create",
                "--port", str(port), *arguments,
            ],
            cwd=cwd,
            env={**os.environ, "FEVEX_TEST_TICK_SECONDS": "0.3", "FEVEX_TEST_LEASE_SECONDS": "2"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
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
        if not listening.wait(GUARD):
            self.stop()
            raise AssertionError("fevex serve --ui did not start:\n" + "".join(self.lines))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL: the server dies mid-run, cutting every stream, as a crashed host would."""
        self.process.kill()
        self.process.wait(GUARD)
        self._close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(GUARD)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(GUARD)
        self._close()

    def _close(self) -> None:
        self._drain.join(GUARD)
        if self.process.stderr is not None:
            self.process.stderr.close()


@pytest.fixture(scope="session")
def console_server_type() -> type[ConsoleServer]:
    """``ConsoleServer(store_url, port=0)``, for a test that kills and restarts its own."""
    return ConsoleServer


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleServer]:
    server = ConsoleServer(f"sqlite:///{tmp_path_factory.mktemp('console') / 'runs.db'}")
    yield server
    server.stop()


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(
            f"{reason}: .ci/run installs Debian's chromium and the suite installs playwright"
        )
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium; Playwright never downloads a browser here: Debian's is used.

    Per module, not per session: Playwright's synchronous API keeps an event loop marked
    running on the thread while it is open, and the suite worker goes on to asyncio tests."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        _missing("chromium (Debian's chromium package) is not installed")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright (Playwright for Python) is not installed")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGUMENTS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go for review: ``$FEVEX_TEST_ARTIFACTS/console``, else a
    temporary folder (its path is printed)."""
    root = os.environ.get("FEVEX_TEST_ARTIFACTS")
    folder = Path(root) / "console" if root else tmp_path_factory.mktemp("console-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"console screenshots: {folder}")
    return folder
