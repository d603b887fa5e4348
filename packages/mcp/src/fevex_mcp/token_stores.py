"""Where a provider keeps what an OAuth flow gave it: the tokens, and the client a dynamic
registration created. Both are credentials.

A store holds one plain-JSON record per MCP server URL, ``{"tokens": {...}, "client":
{...}}`` (the fields of RFC 6749's token response and of RFC 7591's registration
response); the app supplies the store, and nothing else of fevex ever sees the record:
not the run store, events, traces, logs or error messages.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio

__all__ = ["FileTokenStore", "InMemoryTokenStore", "TokenStore"]


@runtime_checkable
class TokenStore(Protocol):
    """What an app implements to keep OAuth records somewhere of its own (a secret manager,
    an encrypted table): one JSON object per MCP server URL."""

    async def get(self, server: str) -> Mapping[str, Any] | None:
        """The record saved for ``server``, or ``None``."""
        ...

    async def set(self, server: str, record: Mapping[str, Any]) -> None:
        """Replace the record of ``server``."""
        ...


class InMemoryTokenStore:
    """Records in this process only, gone when it exits: the default."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}

    async def get(self, server: str) -> Mapping[str, Any] | None:
        record = self._records.get(server)
        return None if record is None else json.loads(json.dumps(record))

    async def set(self, server: str, record: Mapping[str, Any]) -> None:
        self._records[server] = json.loads(json.dumps(dict(record)))

    def __repr__(self) -> str:
        return f"InMemoryTokenStore(servers={len(self._records)})"


class FileTokenStore:
    """Records in one JSON file (``{server: record}``), readable and writable by its owner
    only: the file is created with mode 0600 and replaced whole on each write, through a
    temporary file of the same mode in the same folder."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = anyio.Lock()

    async def get(self, server: str) -> Mapping[str, Any] | None:
        records = await anyio.to_thread.run_sync(self._read)
        record = records.get(server)
        return record if isinstance(record, dict) else None

    async def set(self, server: str, record: Mapping[str, Any]) -> None:
        async with self._lock:
            records = await anyio.to_thread.run_sync(self._read)
            records[server] = dict(record)
            await anyio.to_thread.run_sync(self._write, records)

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        records = json.loads(text)
        return records if isinstance(records, dict) else {}

    def _write(self, records: dict[str, Any]) -> None:
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            # An existing temporary file keeps its mode through O_CREAT: set it again.
            os.fchmod(descriptor, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(records, handle, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        os.replace(temporary, self.path)

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"
