from collections.abc import Iterator

import pytest

from fevex.plugins import reset_plugins

pytest_plugins = ["pytester"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plugin discovery state that this test may change, forgotten afterwards. Installed
    plugin distributions are not loaded, so the core's tests see only the core."""
    monkeypatch.delenv("FEVEX_PLUGINS", raising=False)
    monkeypatch.setenv("FEVEX_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("FEVEX_RUN_STORE", raising=False)
    reset_plugins()
    yield
    reset_plugins()
