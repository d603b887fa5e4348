"""What the core registers through its own hooks: the in-memory run, memory and record
stores."""

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


def open_in_memory_record_store(url: str, **options: Any) -> Any:
    from fevex.runtime.record_store import InMemoryRecordStore

    return InMemoryRecordStore()


@hookimpl
def fevex_register_record_stores(register: Register) -> None:
    register("memory", open_in_memory_record_store)
