"""The ``openai`` entry point of the ``fevex`` plugin group.

Discovering plugins imports this module, which does not import the openai SDK: building a
model does.
"""

from __future__ import annotations

from typing import Any

from fevex.plugins import Register, hookimpl
from fevex_openai.model import OpenAIModel
from fevex_openai.provider import create_openai

__all__ = ["create_openai_model", "fevex_register_models"]


def create_openai_model(model_name: str, **options: Any) -> OpenAIModel:
    """The factory behind ``"openai:<model>"``; ``options`` are those of
    :func:`~fevex_openai.create_openai`."""
    return create_openai(**options)(model_name)


@hookimpl
def fevex_register_models(register: Register) -> None:
    register("openai", create_openai_model)
