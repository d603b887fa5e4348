"""``open_run_store`` as ``fevex.runtime`` offers it, without loading plugins at import."""

from __future__ import annotations

from typing import Any

from fevex.runtime.run_store import RunStore

__all__ = ["open_run_store"]


def open_run_store(url: str, **options: Any) -> RunStore:
    """Open the run store for ``url`` (``memory://``, ``sqlite:///runs.db``, ...) with the
    plugin registered for its scheme."""
    from fevex.plugins.discovery import open_run_store as open_with_plugins

    return open_with_plugins(url, **options)
