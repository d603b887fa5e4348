"""pytest fixtures for testing fevex agents; loaded automatically through ``pytest11``.

``fake_model`` is an empty :class:`FakeModel` (queue responses with ``respond``) and
``fevex_app`` builds an app on a fresh in-memory store with ``fake_model`` as its default
model; pass ``create_fevex`` arguments to it.
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
    return FakeModel()


@pytest.fixture
def fevex_app(fake_model: FakeModel) -> Callable[..., Fevex]:
    def build(**composition: Any) -> Fevex:
        composition.setdefault("models", {"default": fake_model})
        composition.setdefault("run_store", InMemoryRunStore())
        return create_fevex(**composition)

    return build
