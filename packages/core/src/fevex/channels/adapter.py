"""The channel adapter contract: how messages of another surface (a chat, a mailbox, a
webhook) become agent runs and how their answers go back.

An adapter ``parse``\\ s what the surface sent into a :class:`ChannelMessage` (verifying it
first: the adapter is where a signature or a token is checked) and ``deliver``\\ s a
completed run's :class:`ChannelOutput` back. ``delivery_id`` identifies one delivery of one
message by the surface: a surface that redelivers (after a timeout, a crash) sends the same
id again, and :func:`~fevex.channels.handle_channel_input` handles each id once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fevex.messages import ContentPart
from fevex.runtime.records import AgentRun

__all__ = ["ChannelAdapter", "ChannelMessage", "ChannelOutput"]


@dataclass(frozen=True, slots=True)
class ChannelMessage:
    """One message from a channel: its ``id``, the ``delivery_id`` of this delivery of it,
    the ``conversation_id`` it belongs to (what maps to a session), its ``content`` (text
    or content parts: the agent's input) and free ``metadata``."""

    id: str
    delivery_id: str
    conversation_id: str
    content: str | tuple[ContentPart, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChannelOutput:
    """What goes back to the channel: the ``message`` answered, the completed ``run`` and
    its ``output`` (the agent's validated output as JSON)."""

    message: ChannelMessage
    run: AgentRun
    output: Any


@runtime_checkable
class ChannelAdapter(Protocol):
    """A channel: a ``name`` (it scopes delivery ids: two channels may reuse one id),
    ``parse`` and ``deliver``, both coroutines."""

    name: str

    async def parse(self, input: Any) -> ChannelMessage:
        """The message that ``input`` (what the surface sent) carries; raise to refuse it
        (a bad signature, a malformed payload): nothing runs then."""
        ...

    async def deliver(self, output: ChannelOutput) -> Any:
        """Send a completed run's answer back; what it returns is the result's
        ``delivery``."""
        ...
