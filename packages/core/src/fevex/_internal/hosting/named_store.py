"""The store a command's ``--store`` names and the store the app it loads uses: one and the
same, or the command is refused before it reads or recovers any run.

``--store URL`` is set as ``FEVEX_RUN_STORE`` before the app is loaded, and an app that
leaves ``run_store=`` unset opens it. An app that sets ``run_store=`` itself opens its own
store instead: the same URL is that store, but any other (another URL, a store object) would
leave the command printing one store and recovering another's runs, so it is refused with
``STORE_MISMATCH``, naming both. Without ``--store``, nothing is compared: the command runs
on the app's store, whatever ``FEVEX_RUN_STORE`` says, and names that store.

Every URL or store shown here is shown without its password.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from fevex.errors import FevexConfigurationError

__all__ = ["StoreUser", "check_named_store", "describe_app_store", "shown_url"]

# libpq's ``password=`` (and anything named like it) in a query string.
_QUERY_PASSWORD = re.compile(r"(?i)([?&][^=&]*password[^=&]*=)[^&]*")


class StoreUser(Protocol):
    """What is compared of a fevex app: its run store, and the URL it was opened from
    (``None`` for a store object, or the in-memory store of an app given none)."""

    run_store: Any
    _run_store_url: str | None


def shown_url(text: str) -> str:
    """``text`` (a URL, or a store's repr holding one) with its passwords replaced by
    ``***``: after ``user:`` up to the last ``@`` (a password may hold ``@``, ``/`` or ``#``
    unescaped, so more may be hidden, never less), and in ``password=`` query parameters."""
    scheme, separator, rest = text.partition("://")
    if separator:
        userinfo, at, host = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        if at and colon:
            rest = f"{user}:***@{host}"
        text = f"{scheme}{separator}{rest}"
    return _QUERY_PASSWORD.sub(r"\1***", text)


def describe_app_store(app: StoreUser) -> str:
    """The app's run store as a user can recognise it: the URL it was opened from, else
    the store's repr (a SQLite store names its file, a PostgreSQL one its database)."""
    url = app._run_store_url
    return shown_url(url if url is not None else repr(app.run_store))


def check_named_store(store: str | None, app: StoreUser) -> None:
    """Refuse ``--store`` ``store`` unless it is the URL ``app``'s run store was opened
    from (see the module's description)."""
    if not store or app._run_store_url == store:
        return
    named = shown_url(store)
    used = describe_app_store(app)
    raise FevexConfigurationError(
        "STORE_MISMATCH",
        f"--store names {named}, but the app sets its own run store, {used}, and would "
        "use it instead. Drop --store to run on the app's store, or leave run_store= unset "
        "in create_fevex so that the app opens the store --store names.",
        category="store",
        details={"store": named, "app_store": used},
    )
