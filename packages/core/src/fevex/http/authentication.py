"""Who a request is for: the host's ``authenticate(request)``, and nothing the request says.

``authenticate`` reads the request (a header, a cookie, a client certificate the proxy
vouched for) and returns the :class:`~fevex.runtime.ExecutionContext` its runs get: the
actor, the namespace that scopes what it may see and control, attributes and prompt values.
It may be a coroutine function. Returning ``None`` means nobody was recognised (401
``UNAUTHENTICATED``, unless the app allows anonymous callers); raising
:class:`~fevex.http.Forbidden` refuses a caller it recognised (403). A request body can
never name an actor or a context: every endpoint refuses fields it does not define.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request

from fevex.errors import FevexError
from fevex.runtime.context import ExecutionContext

__all__ = ["Authenticate", "authenticated_context", "same_namespace"]

Authenticate = Callable[
    [Request], ExecutionContext | Mapping[str, Any] | Awaitable[ExecutionContext | None] | None
]
ANONYMOUS = ExecutionContext()


async def authenticated_context(
    request: Request, authenticate: Authenticate | None, *, allow_anonymous: bool
) -> ExecutionContext:
    """The caller's context, or the refusal to raise (``UNAUTHENTICATED``)."""
    found: Any = None
    if authenticate is not None:
        found = authenticate(request)
        if inspect.isawaitable(found):
            found = await found
    if found is None:
        if allow_anonymous:
            return ANONYMOUS
        raise FevexError("UNAUTHENTICATED", "This request carries no credentials it accepts.")
    if isinstance(found, ExecutionContext):
        return found
    if isinstance(found, Mapping):
        return ExecutionContext.of(found)
    raise TypeError(
        f"authenticate returned {type(found).__name__}; return an ExecutionContext or None"
    )


def same_namespace(run_context: Mapping[str, Any] | None, caller: ExecutionContext) -> bool:
    """Whether a run whose stored context is ``run_context`` belongs to ``caller``'s
    namespace; a run stored without a context has none, as has an anonymous caller."""
    namespace = None if run_context is None else run_context.get("namespace")
    return namespace == caller.namespace
