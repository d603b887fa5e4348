"""Checks of the run-store conformance suite for ``list_runs``: filters, the newest-first
order, paging by cursor, and the arguments a store refuses. Part of
:mod:`fevex.testing.run_store_contract`, which documents and runs them."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fevex._ground.clock import new_id
from fevex.errors import FevexRunError
from fevex.runtime.records import AgentRun
from fevex.runtime.run_store import RunStore
from fevex.testing._run_store_steps import (
    LONG,
    ManualClock,
    RunStoreFactory,
    _assert_plain_json,
    _commit,
    _creation,
    _ensure,
    _finish,
    _new_run,
    _opened,
    _refused,
    _Run,
    _session,
)

_MAX_PAGE = 1000
# Neither an integer from 1 to 1000: ``True`` is an int to Python, never a count here.
_BAD_RUN_LIMITS: tuple[Any, ...] = (0, -1, _MAX_PAGE + 1, True, False, "3", 1.5, None)
_BAD_STATUSES: tuple[Any, ...] = ("done", "Running", "", 3)
_BAD_FILTERS: tuple[Any, ...] = ("", 3, ["x"], b"x")
_FILTERS = ("kind", "name", "session_id", "parent_run_id")
# More runs than a listing without ``limit`` returns.
_MORE_THAN_A_DEFAULT_PAGE = 51
# A bound on the pages a walk reads, in case a broken store pages forever.
_MAX_PAGES = 500


@dataclass
class _Listed:
    """A run a check created and the fields a listing filters and orders it by."""

    run: _Run
    status: str

    @property
    def id(self) -> str:
        return self.run.id

    @property
    def key(self) -> tuple[str, str]:
        return (self.run.run.created_at, self.run.id)

    def matches(self, filters: dict[str, str]) -> bool:
        fields = {**self.run.run.to_json(), "status": self.status}
        return all(fields[field] == value for field, value in filters.items())


def _newest_first(runs: Collection[_Listed], **filters: str) -> list[str]:
    """The ids of the runs that match ``filters``, in the order a listing must give."""
    matching = [run for run in runs if run.matches(filters)]
    return [run.id for run in sorted(matching, key=lambda run: run.key, reverse=True)]


def _at(base: datetime, step: int) -> str:
    """An ISO 8601 creation time ``step`` seconds after ``base``, as ``utc_now`` writes it."""
    return (base + timedelta(seconds=step)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def _created(
    store: RunStore,
    created_at: str,
    *,
    name: str,
    kind: str = "agent",
    parent: AgentRun | None = None,
    session_id: str | None = None,
    session_revision: int | None = None,
) -> _Run:
    run = dataclasses.replace(
        _new_run(session_id, name),
        kind=kind,
        created_at=created_at,
        updated_at=created_at,
        parent_run_id=None if parent is None else parent.id,
        root_run_id="" if parent is None else parent.root_run_id,
    )
    create = _creation(run, session_revision)
    return _Run(run, await store.create_execution(create), 1, [create.events[0].id])


async def _settle(store: RunStore, run: _Run, status: str) -> _Listed:
    """Leave ``run`` in ``status``: a paused run releases its lease, a running one keeps it."""
    if status == "paused":
        await _commit(store, run, changes={"status": "paused"}, release_lease=True)
    elif status != "running":
        await _finish(store, run, status=status)
    return _Listed(run, status)


async def _end(store: RunStore, listed: _Listed) -> None:
    """Finish a run the check left running or paused."""
    if listed.status == "paused":
        listed.run.lease = await store.acquire_lease(listed.id, "ender", LONG, status="paused")
    if listed.status in ("running", "paused"):
        await _finish(store, listed.run, status="cancelled")
        listed.status = "cancelled"


async def _walk(
    store: RunStore,
    limit: int,
    filters: dict[str, str],
    *,
    until: Collection[str] = (),
) -> list[AgentRun]:
    """Every page of ``list_runs(**filters, limit=limit)``, each after the last run of the
    one before, checked to hold at most ``limit`` runs that match the filters, newest first
    and never twice. With ``until``, stop once all those runs were listed: a shared storage
    may hold many other runs."""
    listed: list[AgentRun] = []
    after: str | None = None
    what = f"list_runs({', '.join(f'{k}={v!r}' for k, v in filters.items())}, limit={limit})"
    for _ in range(_MAX_PAGES):
        arguments: dict[str, Any] = {**filters, "limit": limit, "after": after}
        page = list(await store.list_runs(**arguments))
        _ensure(len(page) <= limit, f"{what} returned a page of {len(page)} runs")
        for run in page:
            _ensure(isinstance(run, AgentRun), f"{what} returned {run!r}, not an AgentRun")
            _assert_plain_json(run.to_json(), f"{what}: a listed run")
            fields = run.to_json()
            wrong = {k: fields[k] for k, v in filters.items() if fields[k] != v}
            _ensure(not wrong, f"{what} listed run {run.id}, which has {wrong}")
        listed += page
        ids = [run.id for run in listed]
        _ensure(len(set(ids)) == len(ids), f"paging {what} listed a run twice: {ids}")
        keys = [(run.created_at, run.id) for run in listed]
        _ensure(
            keys == sorted(keys, reverse=True),
            f"paging {what} must list runs newest first (created_at, then id, descending): {keys}",
        )
        if not page or (until and set(until) <= set(ids)):
            return listed
        after = page[-1].id
    raise AssertionError(f"paging {what} never ends")


async def check_run_listing(factory: RunStoreFactory, clock: ManualClock | None = None) -> None:
    async with _opened(factory) as store:
        # Names and a session of this check only: a shared storage may hold other runs.
        tag = new_id("listing")
        flow, name_a, name_b, many = (f"{tag}-{suffix}" for suffix in ("flow", "a", "b", "m"))
        base = datetime.now(UTC) + timedelta(hours=1)
        runs = await _create_listed_runs(store, base, flow, name_a, name_b)
        root, session_id = runs[0].run, runs[-1].run.run.session_id
        exact: list[dict[str, str]] = [
            {"name": name_a},
            {"name": name_b},
            {"name": flow},
            {"name": f"{tag}-nobody"},
            {"parent_run_id": root.id},
            {"parent_run_id": root.id, "name": name_a},
            {"parent_run_id": root.id, "status": "paused"},
            {"session_id": session_id},
            {"session_id": session_id, "status": "failed"},
            {"name": name_a, "kind": "agent"},
            {"name": name_a, "kind": "team"},
            {"name": name_a, "status": "running"},
            {"name": name_a, "status": "completed"},
            {"name": flow, "kind": "workflow", "status": "completed"},
        ]
        await _check_filters(store, runs, exact, name_a)
        await _check_paging_is_stable(store, runs, base, name_a)
        await _check_default_limit(store, base, many)
        cursors = ((new_id("run"), "an unknown run"), (root.event_ids[0], "an event id"))
        for cursor, what in cursors:
            for named in (None, name_a):
                attempt = store.list_runs(name=named, after=cursor)
                await _refused("INVALID_CURSOR", attempt, f"list_runs(name={named}) after {what}")
        for listed_run in runs:
            await _end(store, listed_run)


async def _create_listed_runs(
    store: RunStore, base: datetime, flow: str, name_a: str, name_b: str
) -> list[_Listed]:
    """The runs the listing check lists: first a completed workflow run (the parent of some
    of the others), last two runs one after the other on one session (failed, then
    cancelled). Creation times are set, a little in the future and out of creation order,
    with ties (same instant, ordered by id), so that neither the insertion order nor the
    time alone gives the page order."""
    root = await _created(store, _at(base, 0), name=flow, kind="workflow")
    tree = root.run
    runs = [await _settle(store, root, "completed")]
    plan: list[tuple[int, str, str, str, AgentRun | None]] = [
        (5, name_a, "agent", "running", tree),
        (2, name_b, "agent", "paused", tree),
        (2, name_a, "agent", "completed", tree),
        (1, name_a, "agent", "running", tree),
        (4, name_a, "team", "running", None),
        (5, name_a, "agent", "paused", None),
        (5, name_a, "agent", "completed", tree),
    ]
    for step, name, kind, status, parent in plan:
        run = await _created(store, _at(base, step), name=name, kind=kind, parent=parent)
        runs.append(await _settle(store, run, status))
    first = await _created(store, _at(base, 3), name=name_a)
    runs.append(await _settle(store, first, "failed"))
    session = await _session(store, first.run.session_id)
    second = await _created(
        store,
        _at(base, 3),
        name=name_a,
        session_id=session.id,
        session_revision=session.revision,
    )
    runs.append(await _settle(store, second, "cancelled"))
    return runs


async def _check_filters(
    store: RunStore, runs: list[_Listed], exact: list[dict[str, str]], name: str
) -> None:
    """Filters only ``runs`` match list them, page by page at every limit; filters that
    other runs of a shared storage may match list them in order among the others."""
    mine = {run.id for run in runs}
    for filters in exact:
        want = _newest_first(runs, **filters)
        for limit in (1, 2, 3, _MAX_PAGE):
            got = [run.id for run in await _walk(store, limit, filters)]
            _ensure(
                got == want,
                f"paging list_runs({filters}, limit={limit}) listed {got}, want {want}",
            )
    listed = await store.list_runs(name=name, limit=_MAX_PAGE)
    for snapshot in listed:
        stored = await store.get_run(snapshot.id)
        _ensure(snapshot == stored, f"list_runs listed {snapshot}, but get_run reads {stored}")

    shared: list[dict[str, str]] = [{}]
    shared += [{"status": status} for status in ("running", "paused", "completed")]
    shared += [{"kind": kind} for kind in ("agent", "workflow", "team")]
    for filters in shared:
        want = _newest_first(runs, **filters)
        walked = await _walk(store, _MAX_PAGE, filters, until=want)
        got = [run.id for run in walked if run.id in mine]
        _ensure(got == want, f"list_runs({filters}) listed these runs as {got}, want {want}")


async def _check_paging_is_stable(
    store: RunStore, runs: list[_Listed], base: datetime, name: str
) -> None:
    # Runs created after a page was read come before it: the pages after it never change.
    want = _newest_first(runs, name=name)
    first = [run.id for run in await store.list_runs(name=name, limit=3)]
    _ensure(first == want[:3], f"list_runs(name=..., limit=3) listed {first}, want {want[:3]}")
    for step in (6, 7):
        late = await _created(store, _at(base, step), name=name)
        runs.append(await _settle(store, late, "completed"))
    rest: list[str] = []
    after = first[-1]
    while page := [run.id for run in await store.list_runs(name=name, limit=3, after=after)]:
        _ensure(len(rest) < len(want), "paging list_runs never ends")
        rest += page
        after = page[-1]
    _ensure(
        first + rest == want,
        f"runs created while list_runs(name=..., limit=3) was paged shifted its pages: it "
        f"listed {first} and then {rest}, want {want}",
    )
    newest = [run.id for run in await store.list_runs(name=name, limit=2)]
    want = _newest_first(runs, name=name)
    _ensure(newest == want[:2], f"after new runs, list_runs(limit=2) listed {newest}")

    # The cursor is a position: its run may stop matching the filters (it finished), and
    # the next page still starts below it.
    running = _newest_first(runs, name=name, status="running")
    page = [run.id for run in await store.list_runs(name=name, status="running", limit=1)]
    _ensure(page == running[:1], f"list_runs(status='running', limit=1) listed {page}")
    cursor = next(run for run in runs if run.id == page[0])
    await _end(store, cursor)
    try:
        continued = await store.list_runs(name=name, status="running", after=page[0], limit=10)
    except FevexRunError as error:
        raise AssertionError(
            "list_runs(status='running') refused the last run of its previous page as the "
            f"cursor once that run had finished: {error}"
        ) from error
    rest = [run.id for run in continued]
    _ensure(
        rest == running[1:],
        "after the run that ended a page of list_runs(status='running') finished, the next "
        f"page after it listed {rest}, want {running[1:]}",
    )


async def _check_default_limit(store: RunStore, base: datetime, name: str) -> None:
    # Groups of three runs created at the same instant: pages of 7 split the ties.
    created = []
    for n in range(_MORE_THAN_A_DEFAULT_PAGE):
        run = await _created(store, _at(base, -1 - n // 3), name=name)
        created.append(await _settle(store, run, "completed"))
    want = _newest_first(created, name=name)
    page = [run.id for run in await store.list_runs(name=name)]
    _ensure(page == want[:50], f"list_runs() without a limit listed {len(page)} runs, want 50")
    walked = [run.id for run in await _walk(store, 7, {"name": name})]
    _ensure(walked == want, f"paging 7 at a time over ties listed {walked}, want {want}")


async def check_run_listing_arguments(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        name = new_id("listing")
        run = await _created(store, _at(datetime.now(UTC), 0), name=name)
        bad: Any
        for bad in _BAD_RUN_LIMITS:
            attempt = store.list_runs(name=name, limit=bad)
            await _refused("INVALID_ARGUMENT", attempt, f"list_runs(limit={bad!r})")
        for bad in _BAD_STATUSES:
            attempt = store.list_runs(status=bad)
            await _refused("INVALID_ARGUMENT", attempt, f"list_runs(status={bad!r})")
        for field in _FILTERS:
            for bad in _BAD_FILTERS:
                attempt = store.list_runs(**{field: bad})
                await _refused("INVALID_ARGUMENT", attempt, f"list_runs({field}={bad!r})")
        for bad in (3, [run.id], run.id.encode()):
            attempt = store.list_runs(after=bad)
            await _refused("INVALID_ARGUMENT", attempt, f"list_runs(after={bad!r})")
        # Arguments before the cursor: a bad limit or status with an unknown cursor.
        unknown = new_id("run")
        attempt = store.list_runs(after=unknown, limit=0)
        await _refused("INVALID_ARGUMENT", attempt, "list_runs(limit=0) after an unknown run")
        bad = "done"
        attempt = store.list_runs(after=unknown, status=bad)
        await _refused("INVALID_ARGUMENT", attempt, "list_runs(status='done'), unknown cursor")
        for limit in (1, _MAX_PAGE):
            page: Sequence[AgentRun] = await store.list_runs(name=name, limit=limit)
            _ensure(
                [listed.id for listed in page] == [run.id],
                f"list_runs(name=..., limit={limit}) listed {page}, want run {run.id}",
            )
        await _finish(store, run)
