"""The rules every kit shares for the app's callbacks and the requests it is given.

Assertion-style callbacks (``authorize``, ``accept``, ``commit``, ``validate``,
``verify_sources``) return ``None`` to succeed and raise to reject. Any other return
value, plain or awaited (``True``, ``False``, ``0``, a dict), is a broken contract,
``KIT_CALLBACK_CONTRACT``, and nothing continues: a ``False`` must never read as a pass.
A rejection becomes the kit's own stable code, with the callback's exception kept as its
``__cause__`` and its type under ``details["cause"]``.

A request is frozen before the first await (:func:`frozen_json`): copied as plain JSON, so
that a caller changing its objects afterwards changes nothing, and each callback is handed
a fresh copy (:func:`json_copy`) so that it cannot rewrite what the kit stores.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from fevex._ground.worker_threads import in_worker_thread
from fevex._internal.engine.deadline import DeadlineReached
from fevex.errors import FevexRunError
from fevex.schemas.schema import ensure_json

__all__ = ["call_assertion", "check_callable", "frozen_json", "json_copy", "shown"]

# How much of a rejecting exception's text its kit error repeats.
_MAX_CAUSE_CHARS = 300

Guard = Callable[[Awaitable[Any]], Awaitable[Any]]


def check_callable(name: str, callback: Any, *, required: bool = False) -> None:
    """``KIT_CALLBACK_CONTRACT`` at definition time for a callback that is not callable
    (or missing when ``required``)."""
    if callback is None and not required:
        return
    if not callable(callback):
        raise FevexRunError(
            "KIT_CALLBACK_CONTRACT",
            f"{name} must be a function (sync or async) returning None, not {callback!r}.",
            details={"callback": name},
        )


async def call_assertion(
    name: str,
    callback: Callable[..., Any],
    *args: Any,
    rejected: str,
    guard: Guard | None = None,
) -> None:
    """Call the assertion ``callback(*args)``: async awaited, sync in a worker thread (it
    may block); ``guard`` (a run's) stops the wait on cancellation or the deadline.

    Raises ``rejected`` (the kit's code) when the callback raises, and
    ``KIT_CALLBACK_CONTRACT`` when it returns anything but ``None``."""

    def guarded(awaitable: Awaitable[Any]) -> Awaitable[Any]:
        return awaitable if guard is None else guard(awaitable)

    try:
        if inspect.iscoroutinefunction(callback):
            result = await guarded(callback(*args))
        else:
            result = await guarded(in_worker_thread(callback, *args))
            if inspect.isawaitable(result):
                result = await guarded(result)
    except (asyncio.CancelledError, DeadlineReached):
        raise
    except Exception as error:
        raise FevexRunError(
            rejected,
            f"{name} rejected it: {type(error).__name__}: {shown(error, str, _MAX_CAUSE_CHARS)}",
            details={"callback": name, "cause": type(error).__name__},
        ) from error
    if result is not None:
        raise FevexRunError(
            "KIT_CALLBACK_CONTRACT",
            f"{name} returned {type(result).__name__} {shown(result, repr, 60)}; an assertion "
            "callback returns None to accept and raises to reject, so nothing continues.",
            details={"callback": name, "returned": type(result).__name__},
        )


def shown(value: object, as_text: Callable[[object], str], limit: int) -> str:
    """``as_text(value)`` (``str`` or ``repr``) cut to ``limit`` characters, for a kit's
    message: the app's object may fail to say itself (its ``__str__`` raising), and the
    kit's own code must still be what the caller gets."""
    try:
        text = as_text(value)
    except Exception:
        return f"<{type(value).__name__} that cannot be shown>"
    return text if len(text) <= limit else text[:limit] + "..."


def frozen_json(value: Any, what: str) -> Any:
    """``value`` copied as plain JSON, so that later changes to the caller's objects change
    nothing; ``KIT_REQUEST_INVALID`` for what is not JSON."""
    try:
        ensure_json(value)
    except TypeError as error:
        raise FevexRunError(
            "KIT_REQUEST_INVALID", f"{what} must be JSON: {error}.", details={"field": what}
        ) from None
    return copy.deepcopy(value)


def json_copy(value: Any) -> Any:
    """A fresh copy of a frozen JSON value, for one callback to have."""
    return copy.deepcopy(value)
