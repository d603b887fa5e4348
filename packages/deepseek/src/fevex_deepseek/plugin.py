"""The ``fevex`` entry point: registers the ``deepseek`` model provider.

Importing this module imports neither the openai SDK nor its HTTP stack; the factory does,
when a ``deepseek:<model>`` reference is resolved.
"""

from __future__ import annotations

from typing import Any

from fevex.plugins import Register, hookimpl
from fevex_deepseek.model import DeepSeekModel
from fevex_deepseek.provider import create_deepseek

__all__ = ["create_deepseek_model", "fevex_register_models"]


def create_deepseek_model(model_name: str, **options: Any) -> DeepSeekModel:
    """``deepseek:<model_name>``; ``options`` are :func:`create_deepseek`'s arguments."""
    return create_deepseek(**options)(model_name)


@hookimpl
def fevex_register_models(register: Register) -> None:
    register("deepseek", create_deepseek_model)
