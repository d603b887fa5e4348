"""The knowledge an app is created with: its skills and context providers attached to the
agents that name them, and its memory store.

Both load only what the app uses. An app with no skill or context provider, none of whose
agents names one or has ``memory=`` or ``sandbox=``, never imports
:mod:`fevex._internal.agents.knowledge_context` (nor :mod:`fevex.knowledge`); its memory
store, unless ``create_fevex(memory_store=)`` or ``FEVEX_MEMORY_STORE`` names one, is an
in-memory store made the first time something reads ``app.memory_store``.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from fevex._internal.composition.registry import Composition, Problems
from fevex.errors import FevexConfigurationError

if TYPE_CHECKING:
    from fevex._internal.agents.knowledge_context import KnowledgeSetup
    from fevex.knowledge.memory_store import MemoryStore

__all__ = ["AppMemoryStore", "attach_app_knowledge", "open_app_memory_store"]

_MEMORY_METHODS = ("add", "search", "delete", "close")
# Held while an app makes its default memory store: two threads reading it first at once
# must not each make one (a memory kept in the other would be lost).
_MAKING_DEFAULT = threading.Lock()


def attach_app_knowledge(
    composition: Composition, context_providers: Any, problems: Problems
) -> KnowledgeSetup | None:
    """The app's knowledge, checked and attached to its agents (every problem goes to
    ``problems``); ``None`` for an app that has none to attach."""
    if context_providers in (None, (), []) and not any(
        agent.skills or agent.context or agent.memory is not None or agent.sandbox is not None
        for agent in (prepared.definition for prepared in composition.agents.values())
    ):
        return None
    from fevex._internal.agents.knowledge_context import attach_knowledge

    return attach_knowledge(composition, context_providers, problems)


def open_app_memory_store(memory_store: Any) -> MemoryStore | None:
    """The store ``create_fevex(memory_store=)`` names: a store, a URL opened through the
    plugins' ``fevex_register_memory_stores``, or ``None`` for ``FEVEX_MEMORY_STORE``;
    ``None`` when neither names one (the app makes an in-memory store when first asked)."""
    if memory_store is None:
        memory_store = os.environ.get("FEVEX_MEMORY_STORE") or None
        if memory_store is None:
            return None
    if isinstance(memory_store, str):
        from fevex.plugins.discovery import open_memory_store

        return open_memory_store(memory_store)
    missing = [
        method for method in _MEMORY_METHODS if not callable(getattr(memory_store, method, None))
    ]
    if missing:
        raise FevexConfigurationError(
            "INVALID_CONFIG",
            f"The memory store {type(memory_store).__name__} lacks {', '.join(missing)} of "
            "the memory-store contract.",
        )
    store: MemoryStore = memory_store
    return store


class AppMemoryStore:
    """``app.memory_store`` of :class:`fevex.Fevex`."""

    # The store create_fevex opened; None until the default one is first made.
    _memory_store: MemoryStore | None = None

    @property
    def memory_store(self) -> MemoryStore:
        """The store agents' ``memory=`` reads and writes, closed with the app: the one
        ``create_fevex`` was given or named, else an in-memory store made when first read."""
        store = self._memory_store
        if store is None:
            from fevex.knowledge.in_memory_memory_store import InMemoryMemoryStore

            with _MAKING_DEFAULT:
                store = self._memory_store
                if store is None:
                    store = self._memory_store = InMemoryMemoryStore()
        return store
