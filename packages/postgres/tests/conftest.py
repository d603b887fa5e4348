"""A fresh database for each test on the worker's PostgreSQL server (``postgres_server_url``
and ``databases``, in the repository's root ``conftest.py``).

A template database is migrated once; each test gets its own copy of it (``database_url``)
or an empty database (``empty_database_url``), dropped afterwards, so no test sees another's
runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from fevex_postgres import PostgresRunStore


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def migrated_template(databases: Any) -> str:
    name = databases.create()
    store = PostgresRunStore(databases.url(name))

    async def upgrade() -> None:
        try:
            await store.upgrade_schema()
        finally:
            await store.close()

    asyncio.run(upgrade())
    return name


@pytest.fixture
def database_url(databases: Any, migrated_template: str) -> Iterator[str]:
    """A migrated database of this test's own."""
    name = databases.create(template=migrated_template)
    yield databases.url(name)
    databases.drop(name)


@pytest.fixture
def empty_database_url(databases: Any) -> Iterator[str]:
    """A database of this test's own that fevex never migrated."""
    name = databases.create()
    yield databases.url(name)
    databases.drop(name)


@pytest.fixture
async def open_store(database_url: str) -> AsyncIterator[Callable[..., PostgresRunStore]]:
    """Opens stores on this test's database and closes them after the test."""
    opened: list[PostgresRunStore] = []

    def open_one(url: str | None = None, **options: Any) -> PostgresRunStore:
        store = PostgresRunStore(url or database_url, **options)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()
