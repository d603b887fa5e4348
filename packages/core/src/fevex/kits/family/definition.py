"""``define_agent_family``: versions of an agent's state, with branches, merges and an
explicitly promoted active version, kept as one record in the app's record store.

Every operation takes the app first (``await family.promote(app, ...)``) and works on the
app's ``record_store``, in the namespace of the caller's :class:`ExecutionContext`: a
caller reads and changes only its namespace's families. An operation freezes its request
(ids, state, checkpoint, context) as plain JSON before its first await, reads the
family's record once, asks ``authorize`` (every change) and ``validate`` (every version
made or promoted) with copies, and writes the whole next record with one
compare-and-swap against the revision it read. A swap that loses, a ``revision=`` or an
``expected_active_id=`` that is no longer the family's, is ``FAMILY_CONFLICT`` and nothing
is written: a caller reads the family again and decides again.

A version restores no identity, budget, tool or running function: the checkpoint it may
carry is what ``app.export_checkpoint`` returned, and :meth:`AgentFamily.restore` starts
a new run of it with the app's current definitions (``app.restore_checkpoint``). A
checkpoint is checked, its signature included, when a version takes it and again when it
is restored: the record store is no more trusted than the hand that gave it; ``trusted=``
is passed on to the app.
"""

from __future__ import annotations

import functools
import inspect
import re
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from fevex._ground.clock import new_id
from fevex._ground.worker_threads import in_worker_thread
from fevex._internal.engine.thread_loop import run_sync
from fevex.errors import FevexConfigurationError, FevexRunError
from fevex.kits.callbacks import call_assertion, check_callable, frozen_json, json_copy
from fevex.kits.family.versions import (
    Family,
    FamilyMerge,
    FamilyVersion,
    common_base,
    instant,
    live,
    promoted,
    with_room,
    with_version,
    without,
)
from fevex.kits.record_swap import swap_record
from fevex.knowledge.memory_store import namespace_of
from fevex.runtime.context import ExecutionContext
from fevex.runtime.record_store import RecordStore
from fevex.runtime.run_result import RunResult
from fevex.schemas.schema import compile_schema, ensure_json

__all__ = ["AgentFamily", "FamilyApp", "define_agent_family"]

Context = ExecutionContext | Mapping[str, Any] | None
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,100}")
P = ParamSpec("P")
T = TypeVar("T")
SelfT = TypeVar("SelfT")
# What fork copies from the parent unless told otherwise.
_FROM_PARENT: Any = object()


def _blocking(
    method: Callable[Concatenate[SelfT, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[SelfT, P], T]:
    """``name_sync = _blocking(name)`` in the class body: the blocking twin of an
    operation, with its parameters and result, on the thread's loop the app's twins use."""

    def twin(family: SelfT, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(method(family, *args, **kwargs))

    functools.update_wrapper(twin, method)
    twin.__name__ = f"{method.__name__}_sync"
    twin.__qualname__ = f"{method.__qualname__}_sync"
    twin.__doc__ = f"The blocking twin of :meth:`{method.__name__}`."
    return twin


class FamilyApp(Protocol):
    """What a family uses of the app (a :class:`fevex.Fevex`): its record store, and its
    checkpoint methods for the versions that carry a run's conversation."""

    record_store: RecordStore

    async def check_checkpoint(
        self, checkpoint: dict[str, Any], *, trusted: bool = False
    ) -> None: ...

    async def restore_checkpoint(
        self,
        checkpoint: dict[str, Any],
        input: Any = None,
        *,
        context: Any = None,
        session_id: str | None = None,
        timeout: float | None = None,
        run_id: str | None = None,
        trusted: bool = False,
    ) -> RunResult[Any]: ...


@dataclass(frozen=True, slots=True)
class _Request:
    """An operation's request, frozen: its namespace, key, context and JSON fields."""

    family_id: str
    namespace: str
    key: str
    context: dict[str, Any]
    fields: dict[str, Any]


class AgentFamily:
    """A defined family kind; its operations take the app first. Each has a blocking
    ``_sync`` twin for scripts."""

    def __init__(
        self,
        name: str,
        state: Any,
        max_versions: int,
        retention: float,
        authorize: Callable[..., Any],
        validate: Callable[..., Any] | None,
        merge: Callable[..., Any] | None,
    ) -> None:
        self.name = name
        self.state = state
        self.max_versions = max_versions
        self.retention = retention
        self._schema = compile_schema(state) if isinstance(state, type) else None
        self._authorize = authorize
        self._validate = validate
        self._merge = merge

    # -- reads ----------------------------------------------------------------------

    async def get(self, app: FamilyApp, family_id: str, *, context: Context = None) -> Family:
        """The family ``family_id`` of the caller's namespace, without its expired
        versions; ``FAMILY_NOT_FOUND`` when that namespace has none."""
        request = self._request(family_id, context, {})
        family = await self._read(app, request)
        return live(family, instant(time.time()))

    # -- changes --------------------------------------------------------------------

    async def create(
        self,
        app: FamilyApp,
        state: Any,
        *,
        checkpoint: dict[str, Any] | None = None,
        family_id: str | None = None,
        context: Context = None,
        trusted: bool = False,
    ) -> Family:
        """A new family whose first version (a candidate, with no base) holds ``state``
        and optionally an exported run ``checkpoint`` (checked as
        ``app.check_checkpoint(checkpoint, trusted=trusted)`` does); promote it to make it
        active. ``family_id`` names it (default: a fresh id); an id the namespace has
        already is ``FAMILY_CONFLICT``."""
        chosen = new_id("fam") if family_id is None else family_id
        request = self._request(
            chosen, context, {"state": self._state_json(state), "checkpoint": checkpoint}
        )
        if request.fields["checkpoint"] is not None:
            await app.check_checkpoint(json_copy(request.fields["checkpoint"]), trusted=trusted)
        now = instant(time.time())
        version = self._new_version(request.fields, (), None, now)
        await self._assert("create", request, None, version)
        family = Family(request.family_id, self.name, 0, None, (version,), now, now)
        return await self._write(app, request, 0, family, now)

    async def fork(
        self,
        app: FamilyApp,
        *,
        family_id: str,
        parent_id: str,
        state: Any = _FROM_PARENT,
        checkpoint: dict[str, Any] | None = _FROM_PARENT,
        revision: int | None = None,
        context: Context = None,
        trusted: bool = False,
    ) -> Family:
        """A new candidate whose parent is ``parent_id`` (any version the family keeps): a
        copy of the parent's state and checkpoint, or the ``state`` and ``checkpoint`` given;
        its base is the version active now. A checkpoint the app would not restore (with
        ``trusted``) is refused here: one naming an agent, model or tool the app lacks is
        ``CHECKPOINT_DEPENDENCY_MISSING``. The new version is the family's
        :attr:`~Family.newest`."""
        fields: dict[str, Any] = {"parent_id": self._id(parent_id, "parent_id")}
        if state is not _FROM_PARENT:
            fields["state"] = self._state_json(state)
        if checkpoint is not _FROM_PARENT:
            fields["checkpoint"] = checkpoint
        request = self._request(family_id, context, fields)
        stored = await self._read(app, request)
        self._check_revision(stored, revision)
        now = instant(time.time())
        family = live(stored, now)
        parent = family.version(fields["parent_id"])
        made = {
            "state": request.fields.get("state", json_copy(parent.state)),
            "checkpoint": request.fields.get("checkpoint", json_copy(parent.checkpoint)),
        }
        if made["checkpoint"] is not None:
            await app.check_checkpoint(json_copy(made["checkpoint"]), trusted=trusted)
        version = self._new_version(made, (parent.id,), family.active_id, now)
        await self._assert("fork", request, stored, version)
        family = with_version(with_room(family, self.max_versions), version)
        return await self._write(app, request, stored.revision, family, now)

    async def merge(
        self,
        app: FamilyApp,
        *,
        family_id: str,
        target_id: str,
        source_id: str,
        revision: int | None = None,
        context: Context = None,
    ) -> Family:
        """A new candidate merging ``source_id`` into ``target_id`` (its parents; its base
        is the version active now): the app's
        ``merge(base, target, source)`` is given the three states (copies) of the nearest
        common base and the two versions (``FAMILY_MERGE_NO_BASE`` when they share none)
        and returns a :class:`FamilyMerge`; its conflicts refuse the merge
        (``FAMILY_MERGE_CONFLICT``, ``details["conflicts"]``). The merged version carries
        no checkpoint: two conversations do not merge."""
        if self._merge is None:
            raise FevexConfigurationError(
                "FAMILY_MERGE_UNSUPPORTED",
                f"Family {self.name!r} was defined without merge=; it cannot merge versions.",
            )
        fields = {
            "target_id": self._id(target_id, "target_id"),
            "source_id": self._id(source_id, "source_id"),
        }
        if fields["target_id"] == fields["source_id"]:
            raise _invalid("merge takes two different versions (target_id and source_id).")
        request = self._request(family_id, context, fields)
        stored = await self._read(app, request)
        self._check_revision(stored, revision)
        now = instant(time.time())
        family = live(stored, now)
        target = family.version(fields["target_id"])
        source = family.version(fields["source_id"])
        base_id = common_base(family, target.id, source.id)
        if base_id is None:
            raise FevexRunError(
                "FAMILY_MERGE_NO_BASE",
                f"Versions {target.id} and {source.id} of family {family.id} share no base "
                "the family still keeps; nothing was written.",
                details={"family_id": family.id, "target_id": target.id, "source_id": source.id},
            )
        base = family.version(base_id)
        merged = await self._merged(base, target, source)
        version = self._new_version(
            {"state": merged, "checkpoint": None}, (target.id, source.id), family.active_id, now
        )
        await self._assert("merge", request, stored, version)
        family = with_version(with_room(family, self.max_versions), version)
        return await self._write(app, request, stored.revision, family, now)

    async def promote(
        self,
        app: FamilyApp,
        *,
        family_id: str,
        revision: int,
        candidate_id: str,
        expected_active_id: str | None,
        context: Context = None,
    ) -> Family:
        """Make ``candidate_id`` the active version, against the family as the caller saw
        it: ``revision`` and ``expected_active_id`` (``None``: no version is active yet)
        must still be the family's, else ``FAMILY_CONFLICT``. Only a candidate whose base
        is the active version is promoted (``FAMILY_BASE_STALE`` otherwise); its state is
        checked again (the state type, ``validate``) and ``authorize`` asked again, then
        the active version and the version set change in one compare-and-swap. The
        version it replaces is retired."""
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
            raise _invalid("revision must be the family's revision, an integer of 1 or more.")
        fields = {
            "candidate_id": self._id(candidate_id, "candidate_id"),
            "expected_active_id": None
            if expected_active_id is None
            else self._id(expected_active_id, "expected_active_id"),
            "revision": revision,
        }
        request = self._request(family_id, context, fields)
        stored = await self._read(app, request)
        self._check_revision(stored, revision)
        if stored.active_id != fields["expected_active_id"]:
            raise _conflict(
                stored,
                "active_id",
                f"its active version is {stored.active_id!r}, not {fields['expected_active_id']!r}",
            )
        now = time.time()
        family = live(stored, instant(now))
        candidate = family.version(candidate_id)
        if candidate.status != "candidate":
            raise FevexRunError(
                "FAMILY_NOT_CANDIDATE",
                f"Version {candidate.id} of family {family.id} is {candidate.status}; only a "
                "candidate is promoted.",
                details={"family_id": family.id, "version_id": candidate.id},
            )
        if candidate.base_id != family.active_id:
            raise FevexRunError(
                "FAMILY_BASE_STALE",
                f"Candidate {candidate.id} was made against {candidate.base_id!r}, not the "
                f"active version {family.active_id!r}, which was promoted since; make it again "
                "from the active version.",
                details={
                    "family_id": family.id,
                    "version_id": candidate.id,
                    "base_id": candidate.base_id,
                    "active_id": family.active_id,
                },
            )
        self._state_json(candidate.state)
        await self._assert("promote", request, stored, candidate)
        family = promoted(family, candidate.id, instant(now + self.retention))
        return await self._write(app, request, stored.revision, family, instant(now))

    async def reject(
        self,
        app: FamilyApp,
        *,
        family_id: str,
        candidate_id: str,
        revision: int | None = None,
        context: Context = None,
    ) -> Family:
        """Remove the candidate ``candidate_id`` (``FAMILY_NOT_CANDIDATE`` for a version
        that is active or retired)."""
        fields = {"candidate_id": self._id(candidate_id, "candidate_id")}
        request = self._request(family_id, context, fields)
        stored = await self._read(app, request)
        self._check_revision(stored, revision)
        now = instant(time.time())
        family = live(stored, now)
        candidate = family.version(fields["candidate_id"])
        if candidate.status != "candidate":
            raise FevexRunError(
                "FAMILY_NOT_CANDIDATE",
                f"Version {candidate.id} of family {family.id} is {candidate.status}; only a "
                "candidate is rejected.",
                details={"family_id": family.id, "version_id": candidate.id},
            )
        await self._assert("reject", request, stored, None)
        return await self._write(app, request, stored.revision, without(family, candidate.id), now)

    async def restore(
        self,
        app: FamilyApp,
        *,
        family_id: str,
        version_id: str,
        input: Any = None,
        context: Context = None,
        timeout: float | None = None,
        trusted: bool = False,
    ) -> RunResult[Any]:
        """Continue the conversation the version ``version_id`` carries as a new run
        (``app.restore_checkpoint``, with ``trusted``), under ``context``;
        ``FAMILY_NO_CHECKPOINT`` for a version that carries none."""
        family = await self.get(app, family_id, context=context)
        version = family.version(self._id(version_id, "version_id"))
        if version.checkpoint is None:
            raise FevexRunError(
                "FAMILY_NO_CHECKPOINT",
                f"Version {version.id} of family {family.id} carries no run checkpoint.",
                details={"family_id": family.id, "version_id": version.id},
            )
        return await app.restore_checkpoint(
            version.checkpoint, input, context=context, timeout=timeout, trusted=trusted
        )

    get_sync = _blocking(get)
    create_sync = _blocking(create)
    fork_sync = _blocking(fork)
    merge_sync = _blocking(merge)
    promote_sync = _blocking(promote)
    reject_sync = _blocking(reject)
    restore_sync = _blocking(restore)

    # -- the steps every operation shares -------------------------------------------

    def _request(self, family_id: Any, context: Context, fields: dict[str, Any]) -> _Request:
        """The request frozen: nothing the caller changes after this counts."""
        checked = self._id(family_id, "family_id")
        frozen_context = frozen_json(ExecutionContext.of(context).to_json(), "context")
        frozen = {key: frozen_json(value, key) for key, value in fields.items()}
        return _Request(
            checked,
            namespace_of(frozen_context),
            f"agent-family:{self.name}:{checked}",
            frozen_context,
            frozen,
        )

    async def _read(self, app: FamilyApp, request: _Request) -> Family:
        record = await app.record_store.read(request.namespace, request.key)
        if record is None or record.value.get("family") != self.name:
            raise FevexRunError(
                "FAMILY_NOT_FOUND",
                f"There is no family {request.family_id!r} of {self.name!r} in this namespace.",
                details={"family_id": request.family_id},
            )
        return Family.from_json(record.value, record.revision, record.updated_at)

    def _check_revision(self, stored: Family, revision: int | None) -> None:
        if revision is not None and revision != stored.revision:
            raise _conflict(
                stored, "revision", f"it is at revision {stored.revision}, not {revision}"
            )

    async def _assert(
        self, action: str, request: _Request, stored: Family | None, version: FamilyVersion | None
    ) -> None:
        """``authorize(operation, family, context)`` then ``validate(version)``, each
        with its own copies."""
        operation = {"action": action, "family": self.name, "family_id": request.family_id}
        operation.update(json_copy(request.fields))
        await call_assertion(
            "authorize",
            self._authorize,
            operation,
            None if stored is None else _copy(stored),
            ExecutionContext.of(json_copy(request.context)),
            rejected="FAMILY_UNAUTHORIZED",
        )
        if version is not None and self._validate is not None:
            await call_assertion(
                "validate",
                self._validate,
                FamilyVersion.from_json(json_copy(version.to_json())),
                rejected="FAMILY_VERSION_INVALID",
            )

    async def _write(
        self, app: FamilyApp, request: _Request, revision: int, family: Family, now: str
    ) -> Family:
        """The whole next record, in one compare-and-swap against ``revision``, awaited to
        its receipt: a store answering anything but ``True`` or ``False``, or failing, is
        ``RECORD_COMMIT_UNCERTAIN``, never a family reported written."""
        written = await swap_record(
            app.record_store, request.namespace, request.key, revision, family.to_json()
        )
        if not written and revision == 0:
            raise _conflict(family, "exists", "this namespace has a family of that id already")
        if not written:
            raise _conflict(
                family, "raced", f"another change was written after revision {revision}"
            )
        return Family.from_json(json_copy(family.to_json()), revision + 1, now)

    def _new_version(
        self, made: dict[str, Any], parents: tuple[str, ...], base_id: str | None, now: str
    ) -> FamilyVersion:
        expires = instant(time.time() + self.retention)
        return FamilyVersion(
            new_id("ver"),
            "candidate",
            made["state"],
            parents,
            base_id,
            now,
            expires,
            made["checkpoint"],
        )

    async def _merged(
        self, base: FamilyVersion, target: FamilyVersion, source: FamilyVersion
    ) -> Any:
        merge = self._merge
        assert merge is not None
        states = (json_copy(base.state), json_copy(target.state), json_copy(source.state))
        if inspect.iscoroutinefunction(merge):
            result = await merge(*states)
        else:
            result = await in_worker_thread(merge, *states)
            if inspect.isawaitable(result):
                result = await result
        if not isinstance(result, FamilyMerge):
            raise FevexRunError(
                "KIT_CALLBACK_CONTRACT",
                f"merge returned {type(result).__name__}; it returns a FamilyMerge (the merged "
                "state, or its conflicts).",
                details={"callback": "merge", "returned": type(result).__name__},
            )
        if result.conflicts:
            conflicts = [str(each) for each in result.conflicts]
            raise FevexRunError(
                "FAMILY_MERGE_CONFLICT",
                f"merge found conflicts ({', '.join(conflicts)[:300]}); nothing was written.",
                details={"target_id": target.id, "source_id": source.id, "conflicts": conflicts},
            )
        return self._state_json(result.state)

    def _state_json(self, value: Any) -> Any:
        """``value`` as the JSON a version keeps; ``FAMILY_STATE_INVALID`` when the state
        type or predicate refuses it."""
        schema = self._schema
        try:
            if schema is not None:
                value = schema.to_json(schema.validate(value))
            ensure_json(value)
        except Exception as error:
            raise _state_invalid(self.name, f"{type(error).__name__}: {error}") from None
        if schema is None and self.state is not None and not self.state(value):
            raise _state_invalid(self.name, "the state predicate refused it")
        return frozen_json(value, "state")

    @staticmethod
    def _id(value: Any, what: str) -> str:
        if not isinstance(value, str) or _ID.fullmatch(value) is None:
            raise _invalid(f"{what} must be 1 to 100 letters, digits or the characters _ . : -")
        return value


def define_agent_family(
    *,
    name: str,
    authorize: Callable[..., Any],
    state: Any = None,
    max_versions: int = 16,
    retention: float = 7 * 86_400,
    validate: Callable[..., Any] | None = None,
    merge: Callable[..., Any] | None = None,
) -> AgentFamily:
    """Define a family of agent versions named ``name`` (its records' key prefix).

    ``state`` is the versions' state type (a pydantic model or any type pydantic
    validates), a predicate of its JSON, or ``None`` for any JSON. ``authorize(operation,
    family, context)`` is asked before every change (``operation`` is a dict naming its
    ``action``, the ``family_id`` and the request's fields; ``family`` is ``None`` for
    ``create``); ``validate(version)`` before a version is made and again before it is
    promoted; both return ``None`` and raise to refuse (``FAMILY_UNAUTHORIZED``,
    ``FAMILY_VERSION_INVALID``). ``merge(base, target, source)`` merges three states into a
    :class:`FamilyMerge`. A family keeps at most ``max_versions`` versions, and those that
    are not active for ``retention`` seconds."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise _config("name must be 1 to 64 letters, digits or the characters _ . -")
    check_callable("authorize", authorize, required=True)
    check_callable("validate", validate)
    check_callable("merge", merge)
    if state is not None and not isinstance(state, type) and not callable(state):
        raise _config(f"Family {name}: state must be a type, a predicate or None.")
    if isinstance(state, type):
        compile_schema(state)
    if not isinstance(max_versions, int) or isinstance(max_versions, bool) or max_versions < 2:
        raise _config(f"Family {name}: max_versions must be an integer of 2 or more.")
    if not isinstance(retention, (int, float)) or isinstance(retention, bool) or not retention > 0:
        raise _config(f"Family {name}: retention must be a positive number of seconds.")
    return AgentFamily(name, state, max_versions, float(retention), authorize, validate, merge)


def _copy(family: Family) -> Family:
    return Family.from_json(json_copy(family.to_json()), family.revision, family.updated_at)


def _conflict(family: Family, reason: str, why: str) -> FevexRunError:
    return FevexRunError(
        "FAMILY_CONFLICT",
        f"Family {family.id} changed: {why}; nothing was written. Read it again and decide again.",
        details={"family_id": family.id, "reason": reason},
    )


def _state_invalid(name: str, why: str) -> FevexRunError:
    return FevexRunError(
        "FAMILY_STATE_INVALID",
        f"Family {name}: the state is not valid ({why[:300]}); nothing was written.",
        category="validation",
        details={"family": name},
    )


def _invalid(message: str) -> FevexRunError:
    return FevexRunError("INVALID_ARGUMENT", message)


def _config(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_CONFIG", message)
