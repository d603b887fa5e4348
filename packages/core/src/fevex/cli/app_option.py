"""``--app module:attribute``: the option every command that runs an app takes, and the
Fevex app it names."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fevex._internal.hosting.app_reference import load_reference
from fevex.errors import FevexConfigurationError

if TYPE_CHECKING:
    from fevex.app import Fevex

__all__ = ["app_reference", "load_app"]


def app_reference(text: str) -> str:
    """The parser's check of ``--app``: the shape ``module:attribute``, before anything is
    imported."""
    module_name, _, attribute = text.partition(":")
    if not module_name or not attribute:
        raise argparse.ArgumentTypeError(
            f"takes module:attribute (such as myservice.app:app), not {text!r}"
        )
    return text


def load_app(reference: str, store: str | None) -> Fevex:
    """``module:attribute``: a Fevex app, or a function that returns one, imported from the
    working directory; ``store`` (a store URL) is set as ``FEVEX_RUN_STORE`` first, since the
    app reads its store from the environment when it is created."""
    from fevex.app import Fevex

    target = load_reference(reference, store)
    if not isinstance(target, Fevex) and callable(target):
        target = target()
    if not isinstance(target, Fevex):
        raise FevexConfigurationError(
            "INVALID_ARGUMENT", f"{reference} is not a fevex app or a function returning one."
        )
    return target
