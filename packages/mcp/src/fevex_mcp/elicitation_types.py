"""The public face of MCP elicitation: what a handler receives and returns, and the
provider's defaults. Importing it imports no MCP SDK (see :mod:`fevex_mcp.elicitation`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "DEFAULT_ELICITATION_TIMEOUT",
    "MAX_ELICITATIONS",
    "ElicitationAction",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
]

ElicitationAction = Literal["accept", "decline", "cancel"]
DEFAULT_ELICITATION_TIMEOUT = 300.0
MAX_ELICITATIONS = 8


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """What a server asks, for a handler: ``message`` (remote text, cleaned and bounded)
    and ``schema`` (its requested schema, checked and rebuilt in MCP's restricted form:
    a flat object of strings, numbers, booleans and options), ``server`` (its URL or
    command), and the tool call it belongs to: ``connection``, ``run_id``,
    ``tool_call_id`` and ``tool_name`` (fevex's name, ``<connection>__<tool>``)."""

    message: str
    schema: Mapping[str, Any]
    server: str
    connection: str | None
    run_id: str
    tool_call_id: str
    tool_name: str


@dataclass(frozen=True, slots=True)
class ElicitationResponse:
    """A handler's answer: ``accept`` with ``content`` (the values; fields it leaves out
    take the schema's defaults), ``decline`` or ``cancel``."""

    action: ElicitationAction
    content: Mapping[str, Any] | None = None

    @classmethod
    def accept(cls, content: Mapping[str, Any] | None = None) -> ElicitationResponse:
        return cls("accept", dict(content or {}))

    @classmethod
    def decline(cls) -> ElicitationResponse:
        return cls("decline")

    @classmethod
    def cancel(cls) -> ElicitationResponse:
        return cls("cancel")


ElicitationHandler = Callable[
    [ElicitationRequest], ElicitationResponse | Awaitable[ElicitationResponse]
]
