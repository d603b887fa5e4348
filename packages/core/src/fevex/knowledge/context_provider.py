"""Context providers: functions that read facts for a run, given to the model as data."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fevex._ground.names import is_valid_name
from fevex.errors import FevexConfigurationError
from fevex.runtime.context import ExecutionContext
from fevex.runtime.record_store import RecordStore

__all__ = [
    "ContextItem",
    "ContextProviderDefinition",
    "ContextRequest",
    "define_context_provider",
]


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One fact a provider read: a stable ``id`` and its ``content`` (text or plain JSON)."""

    id: str
    content: Any


@dataclass(frozen=True, slots=True)
class ContextRequest:
    """What a provider's ``read`` receives: the run it reads for and who it runs for, and
    the record store of the app running it (``app.record_store``), for providers that serve
    the app's records (the publication kit's)."""

    run_id: str
    agent_name: str
    input: Any
    context: ExecutionContext
    record_store: RecordStore | None = None


ContextRead = Callable[[ContextRequest], "Sequence[ContextItem | dict[str, Any]] | Awaitable[Any]"]


@dataclass(frozen=True, slots=True)
class ContextProviderDefinition:
    """A context provider: ``read(request)`` (sync or async) returns items, each a
    :class:`ContextItem` or a mapping with ``id`` and ``content``. It is called once per run,
    at its start, only for agents that name it in ``context=``. What it returns reaches the
    model as data, never as instructions. A provider that fails fails the run with
    ``CONTEXT_PROVIDER_FAILED``, unless it is ``optional`` (then it is skipped and logged)."""

    name: str
    read: Callable[..., Any]
    optional: bool = False
    description: str | None = None

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.read)

    def check(self) -> None:
        """``INVALID_CONTEXT_PROVIDER`` for a name, function or flag that cannot be used."""
        if not is_valid_name(self.name):
            raise _invalid(f"Context provider name {self.name!r} must match [A-Za-z0-9_-]{{1,64}}.")
        if not callable(self.read):
            raise _invalid(f"Context provider {self.name}: read must be a function.")
        if not isinstance(self.optional, bool):
            raise _invalid(f"Context provider {self.name}: optional must be True or False.")


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_CONTEXT_PROVIDER", message)


def define_context_provider(
    *,
    name: str,
    read: Callable[..., Any],
    optional: bool = False,
    description: str | None = None,
) -> ContextProviderDefinition:
    """Define a context provider; register it in ``create_fevex(context_providers=[...])``
    and name it in an agent's ``context=``."""
    provider = ContextProviderDefinition(name, read, optional, description)
    provider.check()
    return provider
