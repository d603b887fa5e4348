"""The 25-turn conversation both sides hold, and what they leave in their SQLite file.

Standard library only, so that fevex's and LangGraph's scripts share it. Each turn sends one
new user message; the fake model answers with the number of user messages it was shown, so
the last answer is :func:`reply_text` of :data:`TURNS` only if every earlier turn was read
back from the store. A side whose conversation loses history fails its check.
"""

from __future__ import annotations

import argparse
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

TURNS = 25
INSTRUCTIONS = "Answer in one short sentence."
# Per round: one conversation to warm up, then this many timed ones, per variant.
CONVERSATIONS = 4


def user_text(turn: int) -> str:
    return f"Message {turn}: please keep this in mind for later."


def reply_text(user_messages: int) -> str:
    return f"Noted, that makes {user_messages} messages so far."


def stored_totals(path: Path, tables: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """Rows and content bytes (every column, as stored) of ``tables`` in the file."""
    totals = {}
    with closing(sqlite3.connect(path)) as connection:
        for table in tables:
            columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
            if not columns:
                # A renamed table must fail the benchmark, never count as empty.
                raise LookupError(f"{path} has no table {table!r}")
            lengths = " + ".join(f"COALESCE(length(CAST({c} AS BLOB)), 0)" for c in columns)
            rows, size = connection.execute(
                f"SELECT count(*), COALESCE(sum({lengths}), 0) FROM {table}"
            ).fetchone()
            totals[table] = {"rows": int(rows), "bytes": int(size)}
    return totals


def per_conversation(totals: dict[str, dict[str, int]], conversations: int) -> dict[str, Any]:
    return {
        "rows": sum(table["rows"] for table in totals.values()) / conversations,
        "bytes": sum(table["bytes"] for table in totals.values()) / conversations,
        "tables": totals,
    }


def round_arguments(description: str, argv: list[str] | None) -> argparse.Namespace:
    """The arguments every side's round script takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--directory", type=Path, required=True, help="where the files go")
    parser.add_argument("--conversations", type=int, default=CONVERSATIONS)
    return parser.parse_args(argv)
