from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fevex.plugins import reset_plugins
from fevex_sqlite import SQLiteRunStore


class Clock:
    """A store clock that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "data" / "runs.db"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(database: Path, clock: Clock) -> AsyncIterator[SQLiteRunStore]:
    opened = SQLiteRunStore(database, clock=clock)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plugin discovery from the installed entry points, forgotten afterwards."""
    for name in ("FEVEX_PLUGINS", "FEVEX_DISABLE_PLUGIN_AUTOLOAD", "FEVEX_RUN_STORE"):
        monkeypatch.delenv(name, raising=False)
    reset_plugins()
    yield
    reset_plugins()
