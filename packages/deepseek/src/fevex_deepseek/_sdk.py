"""The one place that imports the openai SDK at run time.

Plugin discovery imports ``fevex_deepseek.plugin`` and the package face, neither of which
may pull in the SDK (nor its HTTP stack): the SDK is imported when a model is built.
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["INSTALL_HINT", "require_openai"]

INSTALL_HINT = 'pip install "fevex[deepseek]"'


def require_openai() -> ModuleType:
    """The ``openai`` module, or an ImportError that names the install."""
    try:
        import openai
    except ImportError as error:
        raise ImportError(
            "DeepSeek models need the official openai SDK (3.x), which is not installed; "
            f"install it with: {INSTALL_HINT}"
        ) from error
    return openai
