"""Building blocks of the run-store conformance suite: runs, events, commits and checks
the suite repeats. Private to :mod:`fevex.testing.run_store_contract`."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fevex._ground.clock import new_id, utc_now
from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.messages import Message
from fevex.models import Completed, ModelInput, ModelResult, ModelStreamEvent, OutputDelta
from fevex.runtime.records import AgentRun, Session
from fevex.runtime.run_store import (
    EventOrder,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
    RunStore,
)

RunStoreFactory = Callable[[], RunStore | Awaitable[RunStore]]

SHORT_LEASE = 0.2  # seconds; the suite lets these leases expire
LONG = 60.0  # seconds; these leases must outlive a check on a slow machine
CHECK_TIMEOUT = 60.0
RACERS = 100
# More expired runs than a shared storage holds besides the check's own.
_ALL_EXPIRED = 10_000
_ORDERS: tuple[EventOrder, ...] = ("asc", "desc")
_JSON_SCALARS = (str, int, float, bool, type(None))
T = TypeVar("T")


class ManualClock:
    """A store clock that moves only when told; it starts at the current time.

    Give one instance to the store (``InMemoryRunStore(clock=clock)``) and to the suite
    (``check_run_store(factory, clock=clock)``).
    """

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# -- building blocks ----------------------------------------------------------------------


def _ensure(condition: bool, message: str) -> None:
    # Not ``assert``: the suite must keep checking under ``python -O``.
    if not condition:
        raise AssertionError(message)


def _found(value: T | None, message: str) -> T:
    if value is None:
        raise AssertionError(message)
    return value


async def _refused(codes: str | tuple[str, ...], attempt: Awaitable[object], what: str) -> None:
    """Check that ``attempt`` raises FevexRunError with one of ``codes``."""
    wanted = " or ".join((codes,) if isinstance(codes, str) else codes)
    try:
        await attempt
    except FevexRunError as error:
        _ensure(error.code in wanted.split(" or "), f"{what}: want {wanted}, got {error}")
        return
    raise AssertionError(f"{what}: want FevexRunError {wanted}, but it succeeded")


@asynccontextmanager
async def _opened(factory: RunStoreFactory) -> AsyncIterator[RunStore]:
    opened = factory()
    store: RunStore = await opened if inspect.isawaitable(opened) else opened
    try:
        yield store
    finally:
        await store.close()


def _new_run(session_id: str | None = None, agent_name: str = "contract") -> AgentRun:
    now = utc_now()
    data = {"text": "héllo ✓", "items": [1, 2.5, True, None], "nested": {"empty": {}}}
    session_id = session_id or new_id("ses")
    return AgentRun(new_id("run"), session_id, agent_name, "running", data, now, now, revision=1)


def _event(run_id: str, sequence: int) -> RunEvent:
    kind = "run.started" if sequence == 1 else "model.started"
    payload = {"step": sequence, "note": "ünïcode ✓", "values": [0.5, None, False, {"k": "v"}]}
    return RunEvent(new_id("evt"), run_id, sequence, kind, utc_now(), payload)


def _creation(
    run: AgentRun,
    session_revision: int | None,
    owner: str = "worker-a",
    seconds: float = LONG,
    checkpoint: dict[str, Any] | None = None,
) -> ExecutionCreate:
    return ExecutionCreate(run, session_revision, (_event(run.id, 1),), checkpoint, owner, seconds)


def _history(question: str, answer: str) -> tuple[dict[str, Any], ...]:
    return (Message.user(question).to_json(), Message.assistant(answer).to_json())


@dataclass
class _Run:
    """A run a check writes and what the store must hold for it: the run's revision and
    its event ids in sequence order, as the worker holding ``lease`` sees them."""

    run: AgentRun
    lease: RunLease
    revision: int = 1
    event_ids: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.run.id

    def next_commit(
        self, *, events: int = 1, lease: RunLease | None = None, **fields: Any
    ) -> ExecutionCommit:
        """The commit the store expects next (not sent)."""
        first = len(self.event_ids) + 1
        new_events = tuple(_event(self.id, n) for n in range(first, first + events))
        return ExecutionCommit(
            self.id, self.revision + 1, utc_now(), lease or self.lease, new_events, **fields
        )

    def taken_over(self, lease: RunLease) -> _Run:
        """The run as the worker that now holds ``lease`` sees it."""
        return _Run(self.run, lease, self.revision, list(self.event_ids))


async def _create(
    store: RunStore,
    *,
    session_id: str | None = None,
    session_revision: int | None = None,
    owner: str = "worker-a",
    seconds: float = LONG,
    checkpoint: dict[str, Any] | None = None,
    agent_name: str = "contract",
) -> _Run:
    run = _new_run(session_id, agent_name)
    create = _creation(run, session_revision, owner, seconds, checkpoint)
    return _Run(create.run, await store.create_execution(create), 1, [create.events[0].id])


async def _commit(store: RunStore, run: _Run, **fields: Any) -> ExecutionCommit:
    commit = run.next_commit(**fields)
    await store.commit_execution(commit)
    run.revision = commit.revision
    run.event_ids.extend(event.id for event in commit.events)
    return commit


async def _finish(
    store: RunStore, run: _Run, status: str = "completed", **fields: Any
) -> ExecutionCommit:
    """Commit a terminal step that frees the session and the lease."""
    changes = {"status": status, **fields.pop("changes", {})}
    return await _commit(
        store, run, changes=changes, release_session=True, release_lease=True, **fields
    )


async def _let_short_leases_expire(clock: ManualClock | None) -> None:
    if clock is None:
        await asyncio.sleep(SHORT_LEASE + 0.2)
    else:
        clock.advance(SHORT_LEASE + 1.0)


def _assert_plain_json(value: object, where: str) -> None:
    # Exact types: a subclass (an ordered dict, a Decimal, an enum) is not what JSON holds.
    if isinstance(value, dict) and type(value) is dict:
        for key, item in value.items():
            _ensure(type(key) is str, f"{where} has a non-string key {key!r}")
            _assert_plain_json(item, f"{where}[{key!r}]")
    elif isinstance(value, list) and type(value) is list:
        for index, item in enumerate(value):
            _assert_plain_json(item, f"{where}[{index}]")
    else:
        kind = type(value).__name__
        _ensure(type(value) in _JSON_SCALARS, f"{where} is a {kind} ({value!r}), not JSON")


async def _session(store: RunStore, session_id: str) -> Session:
    session = _found(await store.get_session(session_id), f"session {session_id} is missing")
    _assert_plain_json(session.to_json(), "the session")
    return session


async def _holds(store: RunStore, run: _Run, when: str) -> dict[str, Any]:
    """Everything stored for ``run`` as plain JSON, checked to have ``run``'s revision and
    exactly its events."""
    stored = _found(await store.get_run(run.id), f"{when}: run {run.id} is missing")
    snapshot: dict[str, Any] = {
        "run": stored.to_json(),
        "events": [event.to_json() for event in await store.list_events(run.id)],
        "checkpoint": await store.get_checkpoint(run.id),
        "session": (await _session(store, stored.session_id)).to_json(),
    }
    for name, value in snapshot.items():
        _assert_plain_json(value, f"{when}: the {name}")
    _ensure(
        stored.revision == run.revision,
        f"{when}: the run's revision is {stored.revision}, want {run.revision}",
    )
    ids = [event["id"] for event in snapshot["events"]]
    _ensure(ids == run.event_ids, f"{when}: the run's events are {ids}, want {run.event_ids}")
    return snapshot


def _codes(outcomes: list[Any]) -> list[str]:
    """How each failed outcome of a race failed: its error code or exception type."""
    return [
        o.code if isinstance(o, FevexRunError) else type(o).__name__
        for o in outcomes
        if isinstance(o, BaseException)
    ]


# -- the checks -----------------------------------------------------------------------


class _GatedModel:
    """Answers once its gate is open, counting its calls; ``overrun`` is set by the call
    after the ``expected`` ones."""

    def __init__(self, expected: int) -> None:
        self.gate = asyncio.Event()
        self.overrun = asyncio.Event()
        self.expected = expected
        self.calls = 0

    async def stream(self, input: ModelInput) -> AsyncIterator[ModelStreamEvent]:
        self.calls += 1
        if self.calls > self.expected:
            self.overrun.set()
        await self.gate.wait()
        yield OutputDelta("done")
        yield Completed(ModelResult(output="done"))
