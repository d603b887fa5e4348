"""The one place that imports the openai SDK, so that a missing SDK is a clear error.

Plugin discovery imports ``fevex_openai.plugin`` and therefore this package; nothing here
runs the import until a model is actually built.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fevex_openai.profile import ProviderProfile

__all__ = ["load_openai"]


def load_openai(profile: ProviderProfile | None = None) -> ModuleType:
    """The ``openai`` module, or an ``ImportError`` that names the install."""
    try:
        import openai
    except ImportError as error:
        hint = profile.install_hint if profile is not None else 'pip install "fevex[openai]"'
        label = profile.label if profile is not None else "OpenAI"
        raise ImportError(
            f"{label} models need the official openai SDK (3.x), which is not installed; "
            f"install it with: {hint}"
        ) from error
    return openai
