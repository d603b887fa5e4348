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

``fevex_cassette(model)`` replays the model exchanges a test recorded, from
``cassettes/<test module>/<test name>.json`` beside the test file; run pytest with
``--fevex-record`` to call the real ``model`` (a gateway, or a function building one, so
that a replay never needs its credentials) and record them again::

    def test_support_on_openai(fevex_cassette):
        model = fevex_cassette(lambda: create_openai()("gpt-5-mini"))
        app = create_fevex(models={"default": model}, agents=[support])
        assert app.run_agent_sync(support, input="Hi").output
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fevex.app import Fevex, create_fevex
from fevex.errors import FevexRunError
from fevex.models import ModelGateway
from fevex.runtime import InMemoryRunStore
from fevex.testing.cassette import record_model, replay_model
from fevex.testing.fake_model import FakeModel

# What a cassette's file name keeps of a test's name (parameters included).
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("fevex").addoption(
        "--fevex-record",
        action="store_true",
        default=False,
        help="fevex_cassette: call the real models and record their exchanges into the "
        "cassettes, instead of replaying them",
    )


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


@pytest.fixture
def fevex_cassette(request: pytest.FixtureRequest) -> Callable[..., ModelGateway]:
    """``fevex_cassette(model, name=None, path=None)``: a gateway that replays the test's
    cassette, or, with ``--fevex-record``, one that calls ``model`` (a gateway, or a
    function of no arguments returning one, called only when recording) and records it.
    The cassette is ``cassettes/<module>/<test>.json`` beside the test file (``<test>-
    <name>.json`` with ``name``) unless ``path`` says otherwise."""
    recording = bool(request.config.getoption("fevex_record"))
    folder = request.path.parent / "cassettes" / request.path.stem
    used: set[Path] = set()

    def cassette(
        model: ModelGateway | Callable[[], ModelGateway],
        *,
        name: str | None = None,
        path: str | Path | None = None,
    ) -> ModelGateway:
        if path is None:
            stem = request.node.name if name is None else f"{request.node.name}-{name}"
            path = folder / f"{_UNSAFE_IN_NAME.sub('_', stem)}.json"
        target = Path(path)
        if target in used:
            raise FevexRunError(
                "INVALID_ARGUMENT",
                f"The cassette {target} is used twice in this test; give each its own name=.",
            )
        used.add(target)
        if not recording:
            return replay_model(target)
        gateway = model if isinstance(model, ModelGateway) else model()
        return record_model(gateway, target)

    return cassette
