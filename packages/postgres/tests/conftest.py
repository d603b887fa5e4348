"""A real PostgreSQL server for the whole test session, and a fresh database for each test.

The server is ``fevex_postgres.testing.postgres_server()``, or the one named by
``FEVEX_TEST_POSTGRES_URL`` (its user needs CREATEDB). A template database is migrated once;
each test gets its own copy of it (``database_url``) or an empty database
(``empty_database_url``), dropped afterwards, so no test sees another's runs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from fevex_postgres import PostgresRunStore
from fevex_postgres.testing import PostgresNotAvailable, postgres_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    external = os.environ.get("FEVEX_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    with ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_server())
        except PostgresNotAvailable as error:
            if os.environ.get("CI"):
                pytest.fail(f"{error} CI must run the PostgreSQL tests.")
            pytest.skip(str(error))
        yield url


class Databases:
    """Creates databases on the test server and drops them all at the end."""

    def __init__(self, server_url: str) -> None:
        self.server_url = make_url(server_url)
        self.created: list[str] = []

    def url(self, name: str) -> str:
        return self.server_url.set(database=name).render_as_string(hide_password=False)

    def create(self, *, template: str | None = None, options: str = "") -> str:
        """A new database, a copy of ``template`` when given; ``options`` follow
        ``CREATE DATABASE name`` as written (a locale, say)."""
        name = f"fevex_test_{os.urandom(6).hex()}"
        copy = f" TEMPLATE {template}" if template else ""
        self._admin(f"CREATE DATABASE {name}{copy} {options}".rstrip())
        self.created.append(name)
        return name

    def drop(self, name: str) -> None:
        self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.created.remove(name)

    def _admin(self, statement: str) -> None:
        libpq = self.server_url.set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(libpq, autocommit=True) as connection:
            connection.execute(statement.encode())


@pytest.fixture(scope="session")
def databases(postgres_url: str) -> Iterator[Databases]:
    created = Databases(postgres_url)
    yield created
    for name in list(created.created):
        created.drop(name)


@pytest.fixture(scope="session")
def migrated_template(databases: Databases) -> str:
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
def database_url(databases: Databases, migrated_template: str) -> Iterator[str]:
    """A migrated database of this test's own."""
    name = databases.create(template=migrated_template)
    yield databases.url(name)
    databases.drop(name)


@pytest.fixture
def empty_database_url(databases: Databases) -> Iterator[str]:
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
