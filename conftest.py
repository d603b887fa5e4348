"""What every test directory of the monorepo shares: one PostgreSQL server per suite worker,
and how a worker reports back.

The server is ``fevex_postgres.testing.postgres_server()``, started by the first test of a
worker that needs it, or the one named by ``FEVEX_TEST_POSTGRES_URL`` (its user needs
CREATEDB). Tests get databases of their own on it (``databases``), never another test's.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """The URL of a database on this worker's PostgreSQL server."""
    external = os.environ.get("FEVEX_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    testing = pytest.importorskip("fevex_postgres.testing")
    with ExitStack() as stack:
        try:
            url = stack.enter_context(testing.postgres_server())
        except testing.PostgresNotAvailable as error:
            if os.environ.get("CI"):
                pytest.fail(f"{error} CI must run the PostgreSQL tests.")
            pytest.skip(str(error))
        yield url


class Databases:
    """Creates databases on the test server and drops them all at the end."""

    def __init__(self, server_url: str) -> None:
        from sqlalchemy.engine import make_url

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
        import psycopg

        libpq = self.server_url.set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(libpq, autocommit=True) as connection:
            connection.execute(statement.encode())


@pytest.fixture(scope="session")
def databases(postgres_server_url: str) -> Iterator[Databases]:
    created = Databases(postgres_server_url)
    yield created
    for name in list(created.created):
        created.drop(name)


def _encodable(value: Any) -> Any:
    """``value`` with every string UTF-8 can encode: a lone surrogate becomes its escape."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {_encodable(key): _encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_encodable(item) for item in value)
    return value


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(config: pytest.Config, report: Any) -> Any:
    """A suite worker sends each report to the controller as UTF-8; a test whose output or
    failure holds a lone surrogate (the hostile-input tests log such messages) would
    otherwise stop the worker with ``UnicodeEncodeError``."""
    data = yield
    return _encodable(data)
