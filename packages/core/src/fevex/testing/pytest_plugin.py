"""pytest fixtures for testing fevex agents; loaded automatically through ``pytest11``.

``fake_model`` is an empty :class:`FakeModel` (queue responses with ``respond``).
``fevex_app`` is a factory: call it with ``create_fevex`` arguments to build an app on a
fresh in-memory store with ``fake_model`` as its default model. fevex is async, so async
tests need an async plugin; with anyio's (``pip install anyio``)::

    @pytest.mark.anyio
    async def test_support_answers(fevex_app, fake_model):
        fake_model.respond({"output": "Hello!"})
        app = fevex_app(agents=[support])
        assert (await app.run_agent(support, input="Hi")).output == "Hello!"

Plain ``def`` tests use the blocking twins (``app.run_agent_sync``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fevex.app import Fevex, create_fevex
from fevex.runtime import InMemoryRunStore
from fevex.testing.fake_model import FakeModel


@pytest.fixture
def fake_model() -> FakeModel:
    """An empty :class:`FakeModel`: queue its answers with ``fake_model.respond(...)``."""
    return FakeModel()


@pytest.fixture
def fevex_app(fake_model: FakeModel) -> Callable[..., Fevex]:
    """A factory: ``fevex_app(agents=[...], tools=[...])`` builds an app with
    ``create_fevex``, on a fresh in-memory store with ``fake_model`` as ``"default"``
    unless the arguments say otherwise."""

    def build(**composition: Any) -> Fevex:
        composition.setdefault("models", {"default": fake_model})
        composition.setdefault("run_store", InMemoryRunStore())
        return create_fevex(**composition)

    return build
