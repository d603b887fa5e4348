from collections.abc import Iterator

import pytest

from fevex.plugins import reset_plugins

pytest_plugins = ["pytester"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plugin discovery state that this test may change, forgotten afterwards."""
    monkeypatch.delenv("FEVEX_PLUGINS", raising=False)
    monkeypatch.delenv("FEVEX_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    monkeypatch.delenv("FEVEX_RUN_STORE", raising=False)
    reset_plugins()
    yield
    reset_plugins()
