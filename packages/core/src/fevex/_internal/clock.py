"""Time stamps and identifiers shared by runs, sessions and events."""

import os
from datetime import UTC, datetime


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(12).hex()}"
