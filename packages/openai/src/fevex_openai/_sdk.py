"""The one place that imports the openai SDK, so that a missing SDK is a clear error.

Plugin discovery imports ``fevex_openai.plugin`` and therefore this package; nothing here
runs the import until a model is actually built.
"""

from __future__ import annotations

from types import ModuleType

__all__ = ["load_openai"]

INSTALL_HINT = 'pip install "fevex[openai]"'


def load_openai() -> ModuleType:
    """The ``openai`` module, or an ``ImportError`` that names the install."""
    try:
        import openai
    except ImportError as error:
        raise ImportError(
            f"fevex-openai needs the openai SDK (3.x); install it with: {INSTALL_HINT}"
        ) from error
    return openai
