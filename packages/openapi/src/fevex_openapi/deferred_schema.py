"""A checked schema that the core's JSON Schema engine compiles when a value first needs it.

Every schema a provider holds was checked against the subset when its operation was read
(:mod:`fevex_openapi.schema_subset`), which is what refuses a document at definition time.
Compiling it is the engine's own work, and for a big schema (GitHub's issue, with every
object it embeds) a good part of a second: a provider should not pay that for every status
of every operation it allows, nor on the event loop. So the first value that needs a
schema compiles it, once, in a worker thread.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import anyio.to_thread

from fevex.errors import FevexRunError
from fevex.schemas import CompiledJsonSchema, JsonSchemaError, compile_json_schema
from fevex_openapi.errors import run_error

__all__ = ["DeferredSchema"]


class DeferredSchema:
    """``document`` (a standalone JSON Schema 2020-12 document), compiled on first use."""

    __slots__ = ("_compiled", "_lock", "document", "location", "operation_id")

    def __init__(self, document: Mapping[str, Any], *, operation_id: str, location: str) -> None:
        self.document = document
        self.operation_id = operation_id
        self.location = location
        self._compiled: CompiledJsonSchema | FevexRunError | None = None
        self._lock = threading.Lock()

    async def problems(self, value: Any, name: str) -> list[str]:
        """What makes ``value`` (called ``name`` in messages) break the schema."""
        compiled = self._compiled
        if compiled is None:
            # A cancelled call does not wait for the engine: the thread finishes on its
            # own and leaves the compiled schema for the next call.
            compiled = await anyio.to_thread.run_sync(self._compile, abandon_on_cancel=True)
        if isinstance(compiled, FevexRunError):
            raise compiled
        return compiled.problems(value, name)

    def _compile(self) -> CompiledJsonSchema | FevexRunError:
        with self._lock:
            if self._compiled is None:
                try:
                    self._compiled = compile_json_schema(self.document)
                except JsonSchemaError as error:
                    self._compiled = run_error(
                        "OPENAPI_SCHEMA_INVALID",
                        f"Operation {self.operation_id}: the schema at {self.location} is "
                        f"refused by the JSON Schema engine: {error.problem}.",
                        details={"operation": self.operation_id, "location": self.location},
                    )
            return self._compiled
