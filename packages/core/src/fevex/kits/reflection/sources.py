"""Where a reflection reads history: the app's runs (:func:`run_history_source`) or an
app-owned structured log such as exported fevex spans (:func:`log_source`).

A source answers two queries, discovering runs and reading one run's records, and asks the
app's ``authorize(query, context)`` before each: the query (plain JSON, the caller's own
copy) and the caller's :class:`~fevex.runtime.ExecutionContext`, whose actor is the
account and whose namespace is the scope. It returns only fixed metadata; the reflection
projects every item again before its model sees it (:mod:`.metadata`).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from fevex._ground.worker_threads import in_worker_thread
from fevex.agents import AgentDefinition
from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.kits.callbacks import call_assertion, check_callable, frozen_json, json_copy
from fevex.kits.reflection.metadata import event_metadata, run_metadata, span_metadata
from fevex.knowledge import MemoryStore
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import AgentRun, RunStatus

__all__ = [
    "HistoryApp",
    "LogReader",
    "ReflectionSource",
    "SourcePage",
    "SourceScope",
    "log_source",
    "run_history_source",
]

# How many of the store's runs one discovery page looks at, whatever it keeps: a scope
# with few runs among many must not make one page read the whole store.
_SCAN_RUNS = 1_000
_STORE_PAGE = 100
# How many records of one trace a log source loads for one query.
_SCAN_RECORDS = 5_000
_LOG_CHUNK = 500

LogReader = Callable[[str, int, int], "Sequence[Any] | Awaitable[Sequence[Any]]"]


class HistoryApp(Protocol):
    """What a reflection uses of the app (a :class:`fevex.Fevex`): its agents, the run
    listing and events a source reads, the agent run it streams and its memory store."""

    @property
    def agents(self) -> tuple[str, ...]: ...

    @property
    def memory_store(self) -> MemoryStore | None: ...

    async def get_run(self, run_id: str) -> AgentRun: ...

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        kind: str | None = None,
        name: str | None = None,
        limit: int = 50,
        after: str | None = None,
    ) -> list[AgentRun]: ...

    async def list_events(
        self, run_id: str, *, after: str | None = None, limit: int | None = None
    ) -> list[RunEvent]: ...

    def stream_agent(
        self,
        agent: AgentDefinition[Any],
        input: str,
        *,
        timeout: float | None = None,
        context: dict[str, Any] | None = None,
        run_id: str | None = None,
    ) -> AsyncGenerator[RunEvent, None]: ...


@dataclass(frozen=True, slots=True)
class SourceScope:
    """Who asks and where: the app whose history is read, the caller's context (actor:
    the account; namespace: the scope) and the reflection's own run, which no discovery
    returns."""

    app: HistoryApp
    context: ExecutionContext
    reflection_run_id: str


@dataclass(frozen=True, slots=True)
class SourcePage:
    """One page of items; ``cursor`` continues it (``None``: nothing more), ``complete``
    is false when the source could not look at everything the query covers."""

    items: tuple[Mapping[str, Any], ...]
    cursor: str | None = None
    complete: bool = True


@runtime_checkable
class ReflectionSource(Protocol):
    """What a reflection reads; ``id`` names it in evidence and coverage.

    ``discover(scope, filters, cursor, limit)`` pages the runs the caller may see
    (``filters``: any of ``status``, ``kind``, ``name``); ``read(scope, run_id, cursor,
    limit)`` pages one run's records. Each authorizes its query first, raising
    ``REFLECTION_QUERY_REFUSED`` when the app refuses it, and raises
    ``REFLECTION_RUN_OUT_OF_SCOPE`` for a run the caller may not see."""

    id: str

    async def discover(
        self, scope: SourceScope, filters: Mapping[str, str], cursor: str | None, limit: int
    ) -> SourcePage: ...

    async def read(
        self, scope: SourceScope, run_id: str, cursor: str | None, limit: int
    ) -> SourcePage: ...


def run_history_source(
    *, authorize: Callable[..., Any], id: str = "run_history"
) -> ReflectionSource:
    """The app's own runs and events (``list_runs``, ``list_events``): only runs whose
    stored context has the caller's namespace, each query authorized first."""
    check_callable("authorize", authorize, required=True)
    return _RunHistorySource(id, authorize)


def log_source(
    reader: LogReader, *, id: str, trace_id: str, authorize: Callable[..., Any]
) -> ReflectionSource:
    """An app-owned structured log of spans, read one trace at a time: ``reader(trace_id,
    offset, limit)`` (sync or async) returns up to ``limit`` records of that trace from
    ``offset`` on, each a fevex :class:`~fevex.observability.Span` or a mapping of its
    fields (with an optional ISO ``expires_at`` when the log's retention ends). The trace
    is fixed here: a query never reaches another one. The app owns the log, its accounts
    and its retention; ``authorize`` decides whether the caller may read this trace."""
    check_callable("reader", reader, required=True)
    check_callable("authorize", authorize, required=True)
    for name, value in (("id", id), ("trace_id", trace_id)):
        if not isinstance(value, str) or not value:
            raise FevexRunError(
                "KIT_REQUEST_INVALID", f"log_source {name} must be a non-empty string."
            )
    return _LogSource(id, trace_id, reader, authorize)


async def _authorize(
    authorize: Callable[..., Any], scope: SourceScope, query: dict[str, Any]
) -> None:
    context = scope.context
    frozen = frozen_json({**query, "namespace": context.namespace, "actor": context.actor}, "query")
    await call_assertion(
        "authorize",
        authorize,
        json_copy(frozen),
        ExecutionContext.of(context.to_json()),
        rejected="REFLECTION_QUERY_REFUSED",
    )


def _out_of_scope(run_id: str) -> FevexRunError:
    # The same answer for a run that does not exist: existence is not disclosed.
    return FevexRunError(
        "REFLECTION_RUN_OUT_OF_SCOPE",
        f"No run {run_id!r} is visible to this reflection.",
        details={"run_id": run_id},
    )


class _RunHistorySource:
    def __init__(self, id: str, authorize: Callable[..., Any]) -> None:
        self.id = id
        self._authorize = authorize

    async def discover(
        self, scope: SourceScope, filters: Mapping[str, str], cursor: str | None, limit: int
    ) -> SourcePage:
        query = {"source": self.id, "action": "discover", "filters": dict(filters)}
        await _authorize(self._authorize, scope, query)
        items: list[Mapping[str, Any]] = []
        scanned = 0
        after = cursor
        while scanned < _SCAN_RUNS:
            page = await scope.app.list_runs(
                status=cast("RunStatus | None", filters.get("status")),
                kind=filters.get("kind"),
                name=filters.get("name"),
                limit=_STORE_PAGE,
                after=after,
            )
            for run in page:
                scanned += 1
                after = run.id
                if run.id != scope.reflection_run_id and _in_scope(run.context, scope):
                    items.append(run_metadata(run))
                    if len(items) == limit:
                        return SourcePage(tuple(items), after)
            if len(page) < _STORE_PAGE:
                return SourcePage(tuple(items), None)
        return SourcePage(tuple(items), after, complete=False)

    async def read(
        self, scope: SourceScope, run_id: str, cursor: str | None, limit: int
    ) -> SourcePage:
        query = {"source": self.id, "action": "read", "run_id": run_id}
        await _authorize(self._authorize, scope, query)
        try:
            run = await scope.app.get_run(run_id)
        except FevexRunError as error:
            if error.code == "RUN_NOT_FOUND":
                raise _out_of_scope(run_id) from None
            raise
        if not _in_scope(run.context, scope):
            raise _out_of_scope(run_id)
        events = await scope.app.list_events(run_id, after=cursor, limit=limit)
        items = tuple(event_metadata(event) for event in events)
        more = len(events) == limit
        return SourcePage(items, events[-1].id if more and events else None)


def _in_scope(context: Mapping[str, Any] | None, scope: SourceScope) -> bool:
    namespace = None if context is None else context.get("namespace")
    return bool(namespace == scope.context.namespace)


class _LogSource:
    def __init__(
        self, id: str, trace_id: str, reader: LogReader, authorize: Callable[..., Any]
    ) -> None:
        self.id = id
        self.trace_id = trace_id
        self._reader = reader
        self._authorize = authorize

    async def discover(
        self, scope: SourceScope, filters: Mapping[str, str], cursor: str | None, limit: int
    ) -> SourcePage:
        query = {
            "source": self.id,
            "action": "discover",
            "trace_id": self.trace_id,
            "filters": dict(filters),
        }
        await _authorize(self._authorize, scope, query)
        records, complete = await self._load()
        runs = [
            item
            for item in (span_metadata(record) for record in records)
            if item.get("span_kind") == "run"
            and item.get("run_id") not in (None, scope.reflection_run_id)
            and all(item.get(_FILTER_FIELDS[key]) == value for key, value in filters.items())
        ]
        return _page_of(runs, cursor, limit, complete)

    async def read(
        self, scope: SourceScope, run_id: str, cursor: str | None, limit: int
    ) -> SourcePage:
        query = {"source": self.id, "action": "read", "trace_id": self.trace_id, "run_id": run_id}
        await _authorize(self._authorize, scope, query)
        records, complete = await self._load()
        items = [span_metadata(record) for record in records]
        # A run's model and tool spans name it through their parent, its execution span.
        own = {item.get("span_id") for item in items if item.get("run_id") == run_id}
        own.discard(None)
        if not own:
            raise _out_of_scope(run_id)
        selected = [
            item
            for item in items
            if item.get("run_id") == run_id or item.get("parent_span_id") in own
        ]
        return _page_of(selected, cursor, limit, complete)

    async def _load(self) -> tuple[list[Any], bool]:
        records: list[Any] = []
        while len(records) < _SCAN_RECORDS:
            chunk = await self._call(len(records), _LOG_CHUNK)
            records.extend(chunk)
            if len(chunk) < _LOG_CHUNK:
                return records, True
        return records, False

    async def _call(self, offset: int, limit: int) -> list[Any]:
        if inspect.iscoroutinefunction(self._reader):
            chunk = await self._reader(self.trace_id, offset, limit)
        else:
            chunk = await in_worker_thread(self._reader, self.trace_id, offset, limit)
            if inspect.isawaitable(chunk):
                chunk = await chunk
        if isinstance(chunk, str | bytes | Mapping) or not isinstance(chunk, Sequence):
            raise FevexRunError(
                "REFLECTION_SOURCE_INVALID",
                f"The reader of log source {self.id!r} returned {type(chunk).__name__}; it "
                "returns a list of span records.",
            )
        return list(chunk)[:limit]


_FILTER_FIELDS = {"status": "status", "kind": "kind", "name": "name"}


def _page_of(
    items: Sequence[Mapping[str, Any]], cursor: str | None, limit: int, complete: bool
) -> SourcePage:
    start = int(cursor) if cursor is not None and cursor.isdigit() else 0
    page = tuple(items[start : start + limit])
    end = start + len(page)
    return SourcePage(page, str(end) if end < len(items) else None, complete)
