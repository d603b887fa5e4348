"""Time stamps and identifiers shared by runs, sessions and events."""

import itertools
import os
import time

_second = -1
_second_text = ""


def utc_now() -> str:
    """ISO 8601 UTC with microseconds, e.g. ``2026-11-30T07:12:27.541473Z``.

    The date and time of day are formatted once per second: this runs for every event.
    """
    global _second, _second_text
    now = time.time()
    second = int(now)
    if second != _second:
        _second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = second
    return f"{_second_text}.{int((now - second) * 1_000_000):06d}Z"


def new_id(prefix: str) -> str:
    """An unguessable id, for what users hold (runs, sessions, approvals)."""
    return f"{prefix}_{os.urandom(12).hex()}"


_process_key = os.urandom(8).hex()
_counter = itertools.count(1)


def _new_process() -> None:
    global _process_key, _counter
    _process_key = os.urandom(8).hex()
    _counter = itertools.count(1)


os.register_at_fork(after_in_child=_new_process)


def new_sequential_id(prefix: str) -> str:
    """A unique id that is cheap to make: a random key per process and a counter. Used for
    events, whose ids are cursors within a run the caller can already read."""
    return f"{prefix}_{_process_key}{next(_counter):x}"
