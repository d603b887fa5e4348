"""fevex's hexadecimal ids as OpenTelemetry's integers, and the id generator through which
the SDK's tracer gives a span exactly the ids fevex chose.

The SDK's ``Tracer.start_span`` accepts no ids from its caller: it draws a new span's span id,
and a root span's trace id, from the tracer's ``id_generator``. The exporter's own tracer gets
a :class:`PresetIdGenerator`, which answers with the ids :func:`preset_ids` sets around one
``start_span`` call and defers to the provider's generator otherwise. fevex derives its ids
from run ids, so a run continued in another process continues the same trace, and a child
span exported in one batch links to a parent exported in another.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

__all__ = ["IdGenerator", "PresetIdGenerator", "give_preset_ids", "parse_hex_id", "preset_ids"]

_HEX_DIGITS = re.compile(r"[0-9a-fA-F]+")

# Set only for the duration of one ``start_span`` of the exporter's tracer, in the thread
# that calls it; every other moment, and every other thread, sees None.
_PRESET: ContextVar[tuple[int, int] | None] = ContextVar("fevex_opentelemetry_ids", default=None)


def parse_hex_id(value: object, digits: int, field: str) -> int:
    """``value`` as the integer OpenTelemetry uses; a :class:`ValueError` naming ``field``
    unless it is exactly ``digits`` hexadecimal digits, not all zero (W3C's invalid id)."""
    if isinstance(value, str) and len(value) == digits and _HEX_DIGITS.fullmatch(value):
        number = int(value, 16)
        if number:
            return number
        raise ValueError(f"{field} is all zeros, which W3C trace context reserves as invalid")
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise ValueError(f"{field} must be {digits} hexadecimal digits, got {shown}")


class IdGenerator(Protocol):
    """What the SDK's tracer calls on its ``id_generator``
    (``opentelemetry.sdk.trace.id_generator.IdGenerator``)."""

    def generate_span_id(self) -> int: ...

    def generate_trace_id(self) -> int: ...


class PresetIdGenerator:
    """Answers with the ids of :func:`preset_ids` while they are set, and with ``fallback``'s
    (the provider's generator) otherwise."""

    def __init__(self, fallback: IdGenerator) -> None:
        self.fallback = fallback

    def generate_trace_id(self) -> int:
        preset = _PRESET.get()
        return self.fallback.generate_trace_id() if preset is None else preset[0]

    def generate_span_id(self) -> int:
        preset = _PRESET.get()
        return self.fallback.generate_span_id() if preset is None else preset[1]

    def is_trace_id_random(self) -> bool:
        if _PRESET.get() is not None:
            # A fevex trace id is derived from a run id, not drawn at random: W3C's
            # random-trace-id flag must not claim it is.
            return False
        is_random = getattr(self.fallback, "is_trace_id_random", None)
        return bool(is_random()) if callable(is_random) else False


@contextmanager
def preset_ids(trace_id: int, span_id: int) -> Iterator[None]:
    """Within the block, a :class:`PresetIdGenerator` answers ``trace_id`` and ``span_id``."""
    token = _PRESET.set((trace_id, span_id))
    try:
        yield
    finally:
        _PRESET.reset(token)


def give_preset_ids(tracer: object) -> bool:
    """Give an SDK tracer a :class:`PresetIdGenerator` in front of its own generator (once).
    False for a tracer without an ``id_generator`` (the API's no-op and proxy tracers, or
    another implementation), whose span ids cannot be chosen."""
    generator: IdGenerator | None = getattr(tracer, "id_generator", None)
    if generator is None or not callable(getattr(generator, "generate_span_id", None)):
        return False
    if not isinstance(generator, PresetIdGenerator):
        # Only this tracer, which the provider keeps for the exporter's own instrumentation
        # scope, gets it: the provider's other tracers keep drawing random ids.
        setattr(tracer, "id_generator", PresetIdGenerator(generator))  # noqa: B010
    return True
