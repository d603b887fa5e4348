"""What the core registers through its own hooks: the in-memory run and memory stores."""

from __future__ import annotations

from typing import Any

from fevex.plugins.hookspecs import Register, hookimpl


def open_memory_store(url: str, **options: Any) -> Any:
    from fevex.runtime.in_memory_run_store import InMemoryRunStore

    return InMemoryRunStore()


@hookimpl
def fevex_register_run_stores(register: Register) -> None:
    register("memory", open_memory_store)


def open_in_memory_memory_store(url: str, **options: Any) -> Any:
    from fevex.knowledge.in_memory_memory_store import InMemoryMemoryStore

    return InMemoryMemoryStore()


@hookimpl
def fevex_register_memory_stores(register: Register) -> None:
    register("memory", open_in_memory_memory_store)
