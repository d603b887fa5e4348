"""``handle_channel_input``: one message of a channel in, one agent run, its answer out.

Each delivery id is handled once, durably: the run a delivery starts has an id derived from
the channel's name and the delivery id (:func:`delivery_run_id`), and a store never keeps
two runs with one id. A redelivery finds that run (also after the process that handled the
first delivery crashed, and also when two deliveries race: the second one's creation is
refused) and is ignored; the run itself, if its process died, is recovered as any other
run. The run being the record, what a delivery led to stays consultable by its id.

Channel events (:class:`ChannelEvent`) tell the host what happened around the run, in this
order: ``channel.message.received``; then ``channel.message.ignored`` for a delivery
handled before, or ``channel.run.started``, one of ``channel.run.completed``,
``channel.run.paused`` (an approval: nothing is delivered until the run completes, which is
the host's to follow) and ``channel.run.failed``, and after a completed run's answer went
back, ``channel.message.delivered``.

A conversation is one session: without ``resolve_session_id``, each message runs in the
session :func:`conversation_session_id` derives from the channel and the conversation id,
so that the agent sees what was said before in it, across processes too.
:func:`handle_channel_input_sync` is the blocking twin, for a synchronous webhook handler.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from fevex._ground.clock import utc_now
from fevex._internal.launch.run_arguments import RunContext
from fevex._internal.launch.sync import run_sync
from fevex.app import Fevex
from fevex.channels.adapter import ChannelAdapter, ChannelMessage, ChannelOutput
from fevex.errors import FevexError, FevexRunError
from fevex.runtime.records import TERMINAL_STATUSES, AgentRun

__all__ = [
    "ChannelEvent",
    "ChannelResult",
    "conversation_session_id",
    "delivery_run_id",
    "handle_channel_input",
    "handle_channel_input_sync",
]

logger = logging.getLogger("fevex")

ResolveSessionId = Callable[[ChannelMessage], str | Awaitable[str | None] | None]
OnChannelEvent = Callable[["ChannelEvent"], Any]


@dataclass(frozen=True, slots=True)
class ChannelEvent:
    """Something that happened to a channel message: ``type`` (``channel.message.received``
    and the others of :mod:`fevex.channels.handling`), the ``channel``, the message's ids,
    the run it concerns (if any) and a JSON ``payload``."""

    type: str
    channel: str
    message_id: str
    delivery_id: str
    conversation_id: str
    occurred_at: str
    run_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChannelResult:
    """The outcome: ``ignored`` when the delivery was handled before (``run`` is then the
    run it started then); otherwise ``run`` is the run as it ended or paused and
    ``delivery`` what the adapter's ``deliver`` returned (``None`` unless it completed).
    ``events`` are the channel events emitted, in order."""

    ignored: bool
    message: ChannelMessage
    run: AgentRun | None
    delivery: Any = None
    events: tuple[ChannelEvent, ...] = ()


def delivery_run_id(channel: str, delivery_id: str) -> str:
    """The id of the run that delivery ``delivery_id`` of channel ``channel`` starts."""
    digest = hashlib.sha256(f"{channel}\0{delivery_id}".encode()).hexdigest()
    return f"run_ch_{digest[:40]}"


def conversation_session_id(channel: str, conversation_id: str) -> str:
    """The id of the session conversation ``conversation_id`` of channel ``channel``
    continues (the first message's run creates it)."""
    digest = hashlib.sha256(f"{channel}\0{conversation_id}".encode()).hexdigest()
    return f"ses_ch_{digest[:40]}"


async def handle_channel_input(
    input: Any,
    *,
    fevex: Fevex,
    agent_name: str,
    adapter: ChannelAdapter,
    resolve_session_id: ResolveSessionId | None = None,
    context: RunContext = None,
    on_event: OnChannelEvent | None = None,
) -> ChannelResult:
    """Parse ``input`` with ``adapter``, run agent ``agent_name`` on the message in the
    conversation's session (:func:`conversation_session_id`), or in the one
    ``resolve_session_id(message)`` names (``None``: a new one), and deliver a completed
    run's output with the adapter.

    ``context`` is the run's :class:`~fevex.runtime.ExecutionContext` (the host builds it
    from what the adapter verified). ``on_event`` (may be async) sees every channel event
    as it happens. A delivery id handled before is ignored, durably (see the module).
    A run that fails raises its error after ``channel.run.failed``; an adapter that fails
    to deliver raises after the run completed (the delivery stays handled: a redelivery
    is ignored, and the run holds the answer)."""
    message = await adapter.parse(input)
    if not isinstance(message, ChannelMessage):
        raise FevexRunError(
            "INVALID_ARGUMENT",
            f"The adapter {adapter.name!r} parsed the input into {type(message).__name__}, "
            "not a ChannelMessage.",
        )
    events = _ChannelEvents(adapter.name, message, on_event)
    await events.emit("channel.message.received")
    run_id = delivery_run_id(adapter.name, message.delivery_id)
    handled = await _existing_run(fevex, run_id)
    if handled is not None:
        return await events.ignored(handled)

    session_id: str | None = conversation_session_id(adapter.name, message.conversation_id)
    if resolve_session_id is not None:
        resolved = resolve_session_id(message)
        session_id = await resolved if inspect.isawaitable(resolved) else resolved
    handled = await _run_agent(fevex, agent_name, message, session_id, context, run_id, events)
    if handled is not None:
        return await events.ignored(handled)

    run = await fevex.get_run(run_id)
    if run.status not in TERMINAL_STATUSES:
        await events.emit("channel.run.paused", run_id, status=run.status)
        return ChannelResult(False, message, run, events=tuple(events.emitted))
    await events.emit("channel.run.completed", run_id)
    delivery = await adapter.deliver(ChannelOutput(message, run, run.output))
    await events.emit("channel.message.delivered", run_id)
    return ChannelResult(False, message, run, delivery, tuple(events.emitted))


class _ChannelEvents:
    """The channel events of one message: kept for its result, and shown to ``on_event``
    as each happens."""

    def __init__(
        self, channel: str, message: ChannelMessage, on_event: OnChannelEvent | None
    ) -> None:
        self.channel = channel
        self.message = message
        self.on_event = on_event
        self.emitted: list[ChannelEvent] = []

    async def emit(self, type: str, run_id: str | None = None, **payload: Any) -> None:
        message = self.message
        event = ChannelEvent(
            type,
            self.channel,
            message.id,
            message.delivery_id,
            message.conversation_id,
            utc_now(),
            run_id,
            payload,
        )
        self.emitted.append(event)
        if self.on_event is None:
            return
        # An observer's failure never affects the run, as for the app's on_event.
        try:
            outcome = self.on_event(event)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.warning("channel on_event observer failed on %s", type, exc_info=True)

    async def ignored(self, handled: AgentRun) -> ChannelResult:
        """The result of a delivery handled before, by the run it started then."""
        await self.emit("channel.message.ignored", handled.id, status=handled.status)
        return ChannelResult(True, self.message, handled, events=tuple(self.emitted))


async def _run_agent(
    fevex: Fevex,
    agent_name: str,
    message: ChannelMessage,
    session_id: str | None,
    context: RunContext,
    run_id: str,
    events: _ChannelEvents,
) -> AgentRun | None:
    """Run the agent on the message under ``run_id``, to its end or its pause; the run a
    concurrent delivery of the same id created first, when that refused this one's."""
    content: Any = message.content if isinstance(message.content, str) else list(message.content)
    started = False
    try:
        async with aclosing(
            fevex.stream_agent(
                agent_name, content, session_id=session_id, context=context, run_id=run_id
            )
        ) as stream:
            async for event in stream:
                if event.type == "run.started":
                    started = True
                    await events.emit(
                        "channel.run.started", run_id, session_id=event.payload.get("session_id")
                    )
    except FevexError as error:
        if started:
            await events.emit("channel.run.failed", run_id, code=error.code)
        elif error.code == "RUN_CONFLICT":
            # Refused at creation: a concurrent delivery of the same id created the run first
            # (ignored, as any redelivery), or the conversation's session is busy (raised).
            handled = await _existing_run(fevex, run_id)
            if handled is not None:
                return handled
        raise
    return None


def handle_channel_input_sync(
    input: Any,
    *,
    fevex: Fevex,
    agent_name: str,
    adapter: ChannelAdapter,
    resolve_session_id: ResolveSessionId | None = None,
    context: RunContext = None,
    on_event: OnChannelEvent | None = None,
) -> ChannelResult:
    """:func:`handle_channel_input` as a blocking call, on the thread's event loop of the
    app's other blocking twins (``run_agent_sync``, ...); not from inside a running loop."""
    return run_sync(
        handle_channel_input(
            input,
            fevex=fevex,
            agent_name=agent_name,
            adapter=adapter,
            resolve_session_id=resolve_session_id,
            context=context,
            on_event=on_event,
        )
    )


async def _existing_run(fevex: Fevex, run_id: str) -> AgentRun | None:
    try:
        return await fevex.get_run(run_id)
    except FevexError as error:
        if error.code == "RUN_NOT_FOUND":
            return None
        raise
