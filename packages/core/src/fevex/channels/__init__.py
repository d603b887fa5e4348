from fevex.channels.adapter import ChannelAdapter, ChannelMessage, ChannelOutput
from fevex.channels.handling import (
    ChannelEvent,
    ChannelResult,
    delivery_run_id,
    handle_channel_input,
)

__all__ = [
    "ChannelAdapter",
    "ChannelEvent",
    "ChannelMessage",
    "ChannelOutput",
    "ChannelResult",
    "delivery_run_id",
    "handle_channel_input",
]
