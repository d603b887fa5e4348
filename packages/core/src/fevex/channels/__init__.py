from fevex.channels.adapter import ChannelAdapter, ChannelMessage, ChannelOutput
from fevex.channels.handling import (
    ChannelEvent,
    ChannelResult,
    conversation_session_id,
    delivery_run_id,
    handle_channel_input,
    handle_channel_input_sync,
)

__all__ = [
    "ChannelAdapter",
    "ChannelEvent",
    "ChannelMessage",
    "ChannelOutput",
    "ChannelResult",
    "conversation_session_id",
    "delivery_run_id",
    "handle_channel_input",
    "handle_channel_input_sync",
]
