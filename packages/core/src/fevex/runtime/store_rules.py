"""The rules every run store follows, written once so that each fault has one code in every
store, and the errors they raise (:func:`run_conflict`, :func:`lease_lost`,
:func:`run_not_found`, :func:`store_error` for a failure of the storage itself, ...).
:mod:`fevex.runtime` exports every name of this module: a store plugin imports them there,
with the contract's values, and never this module by name.

A store reads what a rule needs and calls the rule with those plain values; the rule
returns, or raises the fault's :class:`~fevex.FevexRunError`. A store shared between
processes reads the values inside the transaction that then writes (locking the rows it
read), so that what a rule accepted still holds when the store writes. A refused operation
writes nothing.

Every store applies the rules of an operation in one order, so that a call with several
faults gets the same code everywhere:

1. the arguments alone, before anything is read: ``INVALID_ARGUMENT``
   (:func:`check_commit_arguments`, :func:`check_create_arguments`,
   :func:`check_event_page`, :func:`check_expired_run_limit`, :func:`claimable_names`,
   :func:`check_session_id`); text that no store can hold (a NUL character, a lone
   surrogate) is refused here, never sent to a store, so that no store answers it with
   ``STORE_ERROR`` while another finds nothing: in a filter, ``INVALID_ARGUMENT``; in a
   cursor, ``INVALID_CURSOR`` (it names nothing);
2. the run exists: ``RUN_NOT_FOUND`` (:func:`run_not_found`);
3. the lease: ``LEASE_LOST`` (:func:`check_lease`); for a renewal, then the run's cancel
   request: ``RUN_CANCEL_REQUESTED`` (:func:`check_renewal`);
4. the revision: ``RUN_CONFLICT`` (:func:`check_revision`);
5. the events: their sequence continues the run's, and their ids are new: ``RUN_CONFLICT``
   (:func:`check_sequence`, :func:`check_event_ids_new`, :func:`event_id_taken`).

:func:`check_commit` applies 2 to 4 and the sequence in that order. Creating a run checks
its arguments, then that the run id is new, that the session is free and still at the
revision the caller read (all ``RUN_CONFLICT``), then its events. Saving a session checks
that it exists (``SESSION_NOT_FOUND``), is free (``RUN_CONFLICT``) and is at the expected
revision (``SESSION_CONFLICT``). Listing events checks its arguments, then the cursor
(``INVALID_CURSOR``); an unknown run has no events. Listing runs checks its arguments
(:func:`check_run_page`), then the cursor (:func:`run_cursor`, ``INVALID_CURSOR``).
Requesting a cancel checks that the run exists (``RUN_NOT_FOUND``), then records the
request only on a run that :func:`records_cancel_request` names. A commit that ends a child
run wakes its parent (:func:`parent_to_wake`); ``claim_due_run`` takes a run that
:func:`is_due` accepts.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeGuard, get_args

from fevex._ground.storable_text import is_storable
from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.runtime.executions import (
    RUN_FIELDS_A_COMMIT_CHANGES,
    ExecutionCommit,
    ExecutionCreate,
    RunLease,
)
from fevex.runtime.records import TERMINAL_STATUSES, RunStatus

__all__ = [
    "RunListing",
    "RunQuery",
    "StoredRun",
    "check_acquirable",
    "check_commit",
    "check_commit_arguments",
    "check_create_arguments",
    "check_event_ids_new",
    "check_event_page",
    "check_expired_run_limit",
    "check_lease",
    "check_new_session",
    "check_renewal",
    "check_revision",
    "check_run_is_new",
    "check_run_page",
    "check_session_reservable",
    "check_session_saveable",
    "check_sequence",
    "check_session_id",
    "claimable_names",
    "cursor_sequence",
    "ended_statuses",
    "ends_run",
    "event_id_taken",
    "invalid_argument",
    "invalid_cursor",
    "is_claimable",
    "is_due",
    "lease_is_live",
    "lease_lost",
    "parent_to_wake",
    "records_cancel_request",
    "run_cancel_requested",
    "run_conflict",
    "run_cursor",
    "run_not_found",
    "session_not_found",
    "store_error",
]

_EVENT_ORDERS = ("asc", "desc")
_RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
_ENDED_STATUSES = tuple(sorted(TERMINAL_STATUSES))
# The most runs one list_runs call returns.
_MAX_RUN_PAGE = 1000
# The longest session id a run may name: every store can index it (PostgreSQL refuses a
# btree entry of more than about 2,700 bytes; this is at most 1,024 bytes of UTF-8).
MAX_SESSION_ID_LENGTH = 256


class RunListing(TypedDict, total=False):
    """What a ``list_runs`` call asks for, the keywords of :meth:`RunStore.list_runs
    <fevex.runtime.RunStore.list_runs>`: the filters a run must hold, the page's size and
    the id of the last run of the previous page. Every key may be left out; a store turns
    it into a :class:`RunQuery` once, with :func:`check_run_page`, and reads that."""

    status: RunStatus | None
    kind: str | None
    name: str | None
    session_id: str | None
    parent_run_id: str | None
    limit: int
    after: str | None


@dataclass(frozen=True, slots=True)
class RunQuery:
    """A ``list_runs`` call whose arguments passed :func:`check_run_page`: ``filters`` maps
    each filter given (``status``, ``kind``, ``name``, ``session_id``, ``parent_run_id``:
    run fields, and columns of a SQL store) to the value a run must hold in it, ``limit``
    is 1 to 1000 and ``after`` a run id or ``None``.

    A page holds the runs that match every filter, newest first: ``created_at``
    descending, then ``id`` descending among runs created at the same instant (both
    compared as text, code point by code point). ``after`` names a run and the page starts
    below it in that order; a run's ``created_at`` and ``id`` never change, so a run created
    after a page was read never shifts a later page. The cursor is a position: the run it
    names need not match the filters any more (its status changed since the page that
    ended with it), only exist (:func:`run_cursor`)."""

    filters: Mapping[str, str]
    limit: int
    after: str | None

    def matches(self, run: Mapping[str, Any]) -> bool:
        """Whether the run ``run`` (its JSON) passes every filter."""
        return all(run.get(field) == value for field, value in self.filters.items())


@dataclass(slots=True)
class StoredRun:
    """What a commit is checked against, as the store holds it: the run's revision, its
    lease (owner, generation and expiry by the store's clock) and the sequence of its last
    event (0 when it has none)."""

    revision: int
    lease: RunLease
    last_sequence: int


# -- errors ------------------------------------------------------------------------------


def invalid_argument(message: str) -> FevexRunError:
    """A call no store can serve as asked; nothing was read or written."""
    return FevexRunError("INVALID_ARGUMENT", message)


def run_conflict(message: str, **details: Any) -> FevexRunError:
    """What is stored refuses the call (another writer, a taken session, a repeated id);
    the caller may read again and retry."""
    return FevexRunError("RUN_CONFLICT", message, recoverable=True, details=details)


def lease_lost(run_id: str, lease: RunLease) -> FevexRunError:
    return FevexRunError(
        "LEASE_LOST",
        f"The lease of run {run_id} (generation {lease.generation}) is no longer live; "
        "another worker may own the run now, and nothing was written.",
        category="store",
        details={"run_id": run_id, "generation": lease.generation},
    )


def invalid_cursor(run_id: str, cursor: str) -> FevexRunError:
    return FevexRunError(
        "INVALID_CURSOR",
        f"Event cursor {cursor!r} does not belong to run {run_id}.",
        details={"run_id": run_id},
    )


def store_error(
    operation: str, error: BaseException, *, code: str = "STORE_ERROR"
) -> FevexRunError:
    """A store failure as users see it: a stable code and the operation, never the driver's
    message (it can quote SQL and its parameters). Raise it ``from error`` so that the
    original stays available as ``__cause__`` to whoever debugs the store."""
    return FevexRunError(
        code,
        f"The run store failed during {operation} ({type(error).__name__}); nothing of this "
        "operation was written.",
        category="store",
        recoverable=True,
        details={"operation": operation},
    )


def run_not_found(run_id: str) -> FevexRunError:
    return FevexRunError("RUN_NOT_FOUND", f"Run {run_id} does not exist.")


def run_cancel_requested(run_id: str) -> FevexRunError:
    """A renewal refused because another process asked to cancel the run: the lease was
    not renewed, and its owner cancels the run while the lease still runs."""
    return FevexRunError(
        "RUN_CANCEL_REQUESTED",
        f"Run {run_id} was asked to cancel; its lease was not renewed, and its owner must "
        "commit the cancellation before the lease expires.",
        details={"run_id": run_id},
    )


def session_not_found(session_id: str) -> FevexRunError:
    return FevexRunError("SESSION_NOT_FOUND", f"Session {session_id} does not exist.")


def event_id_taken(run_id: str) -> FevexRunError:
    """An event id of the step is already stored (for any run) or given twice. A store
    whose storage enforces unique event ids raises this when that refuses the insert."""
    return run_conflict(
        f"An event id given for run {run_id} is already stored or repeated; nothing was written.",
        run_id=run_id,
    )


# -- 1. arguments ------------------------------------------------------------------------


def check_create_arguments(create: ExecutionCreate) -> None:
    """``INVALID_ARGUMENT`` when the run's session id is not one every store can keep
    (:func:`check_session_id`) or an opening event belongs to another run."""
    check_session_id(create.run.session_id)
    _check_events_belong(create.run.id, create.events)


def check_session_id(session_id: object) -> None:
    """``INVALID_ARGUMENT`` unless ``session_id`` is a non-empty string of at most
    :data:`MAX_SESSION_ID_LENGTH` characters that every store can keep."""
    if not isinstance(session_id, str) or not session_id:
        raise invalid_argument("session_id must be a non-empty string.")
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        raise invalid_argument(f"session_id is longer than {MAX_SESSION_ID_LENGTH} characters.")
    if not is_storable(session_id):
        raise invalid_argument(
            "session_id holds a NUL character or a lone surrogate, which no store keeps."
        )


def check_commit_arguments(commit: ExecutionCommit) -> None:
    """``INVALID_ARGUMENT`` when the commit changes a run field outside
    :data:`~fevex.runtime.run_store.RUN_FIELDS_A_COMMIT_CHANGES` or carries an event of
    another run. Checked before anything else: such a commit is wrong whatever is stored."""
    _check_changes(commit.changes)
    _check_events_belong(commit.run_id, commit.events)


def _check_changes(changes: Mapping[str, Any] | None) -> None:
    if not changes:
        return
    refused = sorted(str(field) for field in changes if field not in RUN_FIELDS_A_COMMIT_CHANGES)
    if refused:
        allowed = ", ".join(sorted(RUN_FIELDS_A_COMMIT_CHANGES))
        raise invalid_argument(
            f"A commit cannot change {', '.join(refused)} of a run; it changes only {allowed}."
        )
    wake_at = changes.get("wake_at")
    if wake_at is not None and not (
        isinstance(wake_at, int | float)
        and not isinstance(wake_at, bool)
        and math.isfinite(wake_at)
    ):
        raise invalid_argument("wake_at must be seconds since the epoch (a finite number) or None.")


def ends_run(changes: Mapping[str, Any] | None) -> bool:
    """Whether a commit with ``changes`` ends its run: its ``status`` changes to
    completed, failed or cancelled."""
    return changes is not None and changes.get("status") in TERMINAL_STATUSES


def ended_statuses() -> tuple[str, ...]:
    """The statuses of a run that has ended (completed, failed, cancelled), sorted: what a
    SQL store names when it wakes a parent only if that has not ended
    (:func:`parent_to_wake`)."""
    return _ENDED_STATUSES


def parent_to_wake(changes: Mapping[str, Any] | None, parent_run_id: str | None) -> str | None:
    """The run a commit wakes besides its own: the parent of a run the commit ends
    (:func:`ends_run`). The store sets that parent's ``wake_at`` to its now, in the commit's
    transaction, unless the parent has ended."""
    return parent_run_id if ends_run(changes) else None


def _check_events_belong(run_id: str, events: Sequence[RunEvent]) -> None:
    for event in events:
        if event.run_id != run_id:
            raise invalid_argument(
                f"Event {event.id} belongs to run {event.run_id}, not to run {run_id}."
            )


def check_event_page(after: object, limit: object, order: object) -> None:
    """``INVALID_ARGUMENT`` unless ``after`` is an event id (a string) or ``None``,
    ``limit`` a positive integer or ``None``, and ``order`` ``"asc"`` or ``"desc"``; an
    ``after`` no store can keep is ``INVALID_CURSOR``."""
    if after is not None and not isinstance(after, str):
        raise invalid_argument(f"after must be an event id or None, not {type(after).__name__}.")
    if after is not None and not is_storable(after):
        raise _unstorable_cursor("Event", after)
    if limit is not None and (not _is_whole(limit) or limit < 1):
        raise invalid_argument(f"limit must be a positive integer or None, not {limit!r}.")
    if order not in _EVENT_ORDERS:
        raise invalid_argument(f"order must be 'asc' or 'desc', not {order!r}.")


def check_expired_run_limit(limit: object) -> None:
    """``INVALID_ARGUMENT`` unless ``limit`` is a whole number, 0 or more."""
    if not _is_whole(limit) or limit < 0:
        raise invalid_argument(f"limit must be a whole number, 0 or more, not {limit!r}.")


def check_run_page(
    *,
    status: object = None,
    kind: object = None,
    name: object = None,
    session_id: object = None,
    parent_run_id: object = None,
    limit: object = 50,
    after: object = None,
) -> RunQuery:
    """The page a ``list_runs`` call asks for (the keys of a :class:`RunListing`, as
    keywords; the defaults are a listing's), or ``INVALID_ARGUMENT`` unless ``status``
    is ``None`` or a run status, ``kind``, ``name``, ``session_id`` and ``parent_run_id``
    are ``None`` or non-empty strings that a store can keep, ``limit`` is an integer from 1
    to 1000 and ``after`` is a run id (a string) or ``None``, checked in that order; an
    ``after`` no store can keep is ``INVALID_CURSOR``."""
    if status is not None and status not in _RUN_STATUSES:
        allowed = ", ".join(repr(value) for value in _RUN_STATUSES)
        raise invalid_argument(f"status must be one of {allowed} or None, not {status!r}.")
    given = {
        "status": status,
        "kind": kind,
        "name": name,
        "session_id": session_id,
        "parent_run_id": parent_run_id,
    }
    filters: dict[str, str] = {}
    for field, value in given.items():
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise invalid_argument(f"{field} must be a non-empty string or None, not {value!r}.")
        if not is_storable(value):
            raise invalid_argument(
                f"{field} holds a NUL character or a lone surrogate, which no run holds."
            )
        filters[field] = value
    if not _is_whole(limit) or not 1 <= limit <= _MAX_RUN_PAGE:
        raise invalid_argument(
            f"limit must be an integer from 1 to {_MAX_RUN_PAGE}, not {limit!r}."
        )
    if after is not None and not isinstance(after, str):
        raise invalid_argument(f"after must be a run id or None, not {type(after).__name__}.")
    if after is not None and not is_storable(after):
        raise _unstorable_cursor("Run", after)
    return RunQuery(filters, limit, after)


def _unstorable_cursor(kind: str, after: str) -> FevexRunError:
    # Its text is never repeated: it is what no store could keep, nor print.
    return FevexRunError(
        "INVALID_CURSOR",
        f"{kind} cursor holds a NUL character or a lone surrogate: it names nothing; pass "
        "the id of the last item of the previous page.",
    )


def claimable_names(names: Collection[str] | None) -> frozenset[str] | None:
    """The run names a claim is limited to (``None``: any), or ``INVALID_ARGUMENT``
    unless ``names`` is ``None`` or a collection of strings. A single string is refused:
    it is a collection of its characters, and never what a caller means."""
    if names is None:
        return None
    if isinstance(names, str | bytes) or not isinstance(names, Collection):
        raise invalid_argument(
            f"names must be a collection of run names or None, not {type(names).__name__}."
        )
    chosen = frozenset(names)
    if not all(isinstance(name, str) for name in chosen):
        raise invalid_argument("names must hold run names (strings) only.")
    return chosen


def _is_whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# -- 2-5. against what is stored ---------------------------------------------------------


def lease_is_live(lease: RunLease, now: float) -> bool:
    """A lease is live until its ``expires_at``, exclusive, by the store's clock."""
    return lease.expires_at > now


def check_lease(run_id: str, lease: RunLease, stored: RunLease, now: float) -> None:
    """``LEASE_LOST`` unless ``lease`` is the stored one (owner and generation) and that is
    live at ``now``: a worker that lost its lease never writes again."""
    if (
        stored.owner != lease.owner
        or stored.generation != lease.generation
        or not lease_is_live(stored, now)
    ):
        raise lease_lost(run_id, lease)


def check_renewal(
    run_id: str, lease: RunLease, stored: RunLease, now: float, cancel_requested: bool
) -> None:
    """A renewal of ``lease``: ``LEASE_LOST`` unless it is live (:func:`check_lease`), then
    ``RUN_CANCEL_REQUESTED`` (:func:`run_cancel_requested`) when the run has a cancel
    request. Either way the store renews nothing: the owner learns of the request at its
    renewal, with the rest of its lease (about two thirds of it) to commit the
    cancellation, and a lapsed owner's run is taken over and cancelled by another."""
    check_lease(run_id, lease, stored, now)
    if cancel_requested:
        raise run_cancel_requested(run_id)


def records_cancel_request(status: str) -> bool:
    """Whether ``request_cancel`` records a request on a run in ``status``: only on a
    running run, whose owner obeys it at its next renewal. A paused run is cancelled by
    taking its lease; a finished one has nothing to cancel. Either is returned unchanged.
    Checked after the run was found (``RUN_NOT_FOUND``)."""
    return status == "running"


def check_revision(run_id: str, stored_revision: int, revision: int) -> None:
    """``RUN_CONFLICT`` unless ``revision`` is the stored one plus one."""
    if stored_revision + 1 != revision:
        raise run_conflict(
            f"Run {run_id} was changed by another writer (revision {stored_revision}).",
            run_id=run_id,
        )


def check_sequence(run_id: str, last_sequence: int, events: Sequence[RunEvent]) -> int:
    """The run's new last sequence; ``RUN_CONFLICT`` unless the events continue the stored
    ``last_sequence`` one by one, without a gap or a repeat."""
    for event in events:
        if event.sequence != last_sequence + 1:
            raise run_conflict(
                f"Event sequence {event.sequence} of run {run_id} is out of order "
                f"(the next is {last_sequence + 1}).",
                run_id=run_id,
            )
        last_sequence = event.sequence
    return last_sequence


def check_event_ids_new(run_id: str, events: Sequence[RunEvent], stored: Container[str]) -> None:
    """``RUN_CONFLICT`` (:func:`event_id_taken`) when an event id is in ``stored`` (the ids
    of every run's events) or given twice: an event id names one event of one run, and is
    a cursor."""
    seen: set[str] = set()
    for event in events:
        if event.id in stored or event.id in seen:
            raise event_id_taken(run_id)
        seen.add(event.id)


def check_commit(commit: ExecutionCommit, stored: StoredRun | None, now: float) -> int:
    """Check a commit whose arguments passed :func:`check_commit_arguments` against what is
    stored for its run: the run exists (``RUN_NOT_FOUND``), the lease is live
    (``LEASE_LOST``), the revision is next (``RUN_CONFLICT``) and the events continue the
    sequence (``RUN_CONFLICT``), in that order. Returns the run's new last sequence. The
    store then inserts the events, refusing ids already stored (:func:`event_id_taken`)."""
    if stored is None:
        raise run_not_found(commit.run_id)
    check_lease(commit.run_id, commit.lease, stored.lease, now)
    check_revision(commit.run_id, stored.revision, commit.revision)
    return check_sequence(commit.run_id, stored.last_sequence, commit.events)


def check_acquirable(
    run_id: str, status: str, stored_status: str, stored_lease: RunLease, now: float
) -> None:
    """``RUN_CONFLICT`` unless the run is in ``status`` and its lease expired or was
    released; checked after the run was found (``RUN_NOT_FOUND``)."""
    if stored_status != status:
        raise run_conflict(f"Run {run_id} is {stored_status}, not {status}.", run_id=run_id)
    if lease_is_live(stored_lease, now):
        raise run_conflict(
            f"Run {run_id} is leased to {stored_lease.owner} for "
            f"{stored_lease.expires_at - now:.1f} s more.",
            run_id=run_id,
        )


def is_claimable(
    status: str, name: str, lease: RunLease, now: float, names: frozenset[str] | None
) -> bool:
    """Whether ``claim_expired_run`` may take the run: running, its lease expired, and its
    ``name`` among ``names`` (from :func:`claimable_names`; ``None``: any). A SQL store puts
    the same three conditions in the ``WHERE`` clause of its claim."""
    return (
        status == "running" and not lease_is_live(lease, now) and (names is None or name in names)
    )


def is_due(
    status: str,
    name: str,
    wake_at: float | None,
    lease: RunLease,
    now: float,
    names: frozenset[str] | None,
) -> bool:
    """Whether ``claim_due_run`` may take the run: paused, its ``wake_at`` come (at or
    before ``now``), its lease not live, and its ``name`` among ``names``. A SQL store puts
    the same conditions in the ``WHERE`` clause of its claim, ordered by ``wake_at``."""
    return (
        status == "paused"
        and wake_at is not None
        and wake_at <= now
        and not lease_is_live(lease, now)
        and (names is None or name in names)
    )


def check_run_is_new(run_id: str, exists: bool) -> None:
    """``RUN_CONFLICT`` when a run with this id is stored already."""
    if exists:
        raise run_conflict(f"Run {run_id} already exists.", run_id=run_id)


def check_new_session(session_id: str, expected_revision: int | None) -> None:
    """Creating a run on a session that is not stored: ``RUN_CONFLICT`` when the caller
    read a revision of it (it existed then)."""
    if expected_revision is not None:
        raise run_conflict(f"Session {session_id} no longer exists.", session_id=session_id)


def check_session_reservable(
    session_id: str, active_run_id: str | None, revision: int, expected_revision: int | None
) -> None:
    """Creating a run on a stored session: ``RUN_CONFLICT`` when another run holds it, or
    when it changed since the caller read ``expected_revision``."""
    _check_session_free(session_id, active_run_id)
    if revision != expected_revision:
        raise run_conflict(
            f"Session {session_id} changed while the run was being created.",
            session_id=session_id,
        )


def check_session_saveable(
    session_id: str, active_run_id: str | None, revision: int, expected_revision: int
) -> None:
    """Replacing a stored session: ``RUN_CONFLICT`` while a run holds it,
    ``SESSION_CONFLICT`` when its revision is not ``expected_revision``."""
    _check_session_free(session_id, active_run_id)
    if revision != expected_revision:
        raise FevexRunError(
            "SESSION_CONFLICT",
            f"Session {session_id} changed (revision {revision}, expected "
            f"{expected_revision}); reload it and decide again.",
            recoverable=True,
            details={"session_id": session_id},
        )


def _check_session_free(session_id: str, active_run_id: str | None) -> None:
    if active_run_id is not None:
        raise run_conflict(
            f"Session {session_id} is held by run {active_run_id}; finish, resume or cancel "
            "that run first.",
            session_id=session_id,
            active_run_id=active_run_id,
        )


def run_cursor(after: str, position: tuple[str, str] | None) -> tuple[str, str]:
    """The ``(created_at, id)`` a run page starts below, from the position the store found
    for the run ``after`` names (``None``: no such run); ``INVALID_CURSOR`` for an unknown
    run. Checked after :func:`check_run_page`."""
    if position is None:
        raise FevexRunError(
            "INVALID_CURSOR",
            f"Run cursor {after!r} names no stored run; pass the id of the last run of the "
            "previous page.",
            details={"after": after},
        )
    return position


def cursor_sequence(run_id: str, after: str, cursor: tuple[str, int] | None) -> int:
    """The sequence of the event ``after`` names, from the ``(run_id, sequence)`` the
    store found for that id (``None``: no such event); ``INVALID_CURSOR`` unless the event
    belongs to ``run_id``."""
    if cursor is None or cursor[0] != run_id:
        raise invalid_cursor(run_id, after)
    return cursor[1]
