"""Fixtures of the fevex-openai tests: the loopback server, models pointed at it, and a
guard that fails any test reaching for a host that is not on this machine."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fevex_openai import OpenAIModel, create_openai

# The helpers live beside the tests; the suite imports test files with importlib, so this
# folder is put on the path and the helpers carry names no other package uses.
sys.path.insert(0, str(Path(__file__).parent))

from openai_loopback import TEST_API_KEY, LoopbackServer
from openai_network_guard import NetworkGuard


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    """Every name lookup of, and connection to, a non-loopback host fails, and the test too."""
    guard = NetworkGuard()
    guard.install(monkeypatch)
    yield guard
    if guard.attempts:
        pytest.fail(f"The test tried to reach non-loopback hosts: {guard.attempts}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def loopback() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def server(loopback: LoopbackServer) -> LoopbackServer:
    loopback.reset()
    return loopback


@pytest.fixture
async def make_model(server: LoopbackServer) -> AsyncIterator[Callable[..., OpenAIModel]]:
    """``make_model(name, **create_openai_options)``: a model on the loopback server,
    closed when the test ends."""
    built: list[OpenAIModel] = []

    def make(name: str = "gpt-test", **options: Any) -> OpenAIModel:
        options.setdefault("api_key", TEST_API_KEY)
        options.setdefault("base_url", server.base_url)
        model = create_openai(**options)(name)
        built.append(model)
        return model

    yield make
    for model in built:
        await model.aclose()
