"""Run and session snapshots as stores keep them: every field is plain JSON or a scalar."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from fevex.messages import Message, message_from_json
from fevex.models import Usage
from fevex.runtime.approval import PendingApproval, pending_approvals
from fevex.runtime.inputs import PendingInput, pending_inputs

__all__ = ["AgentRun", "JsonValue", "RunStatus", "Session", "changed_session"]

# A value as stores keep it: what json.loads returns.
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"

RunStatus = Literal["running", "paused", "completed", "failed", "cancelled"]
TERMINAL_STATUSES = frozenset(("completed", "failed", "cancelled"))


@dataclass(slots=True)
class AgentRun:
    """A consultable snapshot of one run.

    ``output`` is the JSON form of the validated output, ``error`` the failure's safe JSON
    description, ``revision`` the store-managed counter that fences concurrent writers.

    ``kind`` (``"agent"``, ``"workflow"``, ``"team"``) and ``name`` say what runs: the
    definition's name, which for an agent run is ``agent_name`` (the default when ``name``
    is left empty). ``version`` is the definition's version, if it has one.
    ``parent_run_id`` is the run that started this one, ``root_run_id`` the first run of
    that tree (this run's own id, the default, when it has no parent). ``context`` is the
    JSON of the run's :class:`~fevex.runtime.ExecutionContext` (``None``: none was given);
    stores keep it as plain JSON and never rebuild it.

    ``cancel_requested`` is set by the store's ``request_cancel`` on a running run (from
    ``cancel_run`` in a process that does not execute it) and never cleared: the run's
    owner learns of it at its next lease renewal and cancels the run, and whoever takes the
    run over next (a recovery, a resume) cancels it instead of continuing it.

    ``wake_at`` (seconds since the epoch, by the store's clock) is when a paused run is due
    to be woken: its timer, or the moment one of its child runs ended. Workers claim due
    runs (``claim_due_run``); ``None`` means nothing wakes it but a caller (an approval, an
    event).
    """

    id: str
    session_id: str
    agent_name: str
    status: RunStatus
    input: Any
    created_at: str
    updated_at: str
    output: JsonValue = None
    usage: dict[str, int] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    pause: dict[str, Any] | None = None
    revision: int = 0
    kind: str = "agent"
    name: str = ""
    version: str | None = None
    parent_run_id: str | None = None
    root_run_id: str = ""
    context: dict[str, Any] | None = None
    cancel_requested: bool = False
    wake_at: float | None = None

    def __post_init__(self) -> None:
        # The defaults that depend on other fields are set once, here, so that a snapshot
        # always holds them and reads back equal from every store.
        if not self.name:
            self.name = self.agent_name
        if not self.root_run_id:
            self.root_run_id = self.id

    @property
    def approvals(self) -> tuple[PendingApproval, ...]:
        """The approvals this paused run waits for itself (see :class:`PendingApproval`);
        a workflow or team waiting for a child lists the child's on ``RunPausedError``."""
        return pending_approvals(self.pause, self.id)

    @property
    def inputs(self) -> tuple[PendingInput, ...]:
        """The requests a tool call of this running run waits on a person for (see
        :class:`PendingInput`): the run stays ``running`` while they are pending."""
        if self.status != "running":
            return ()
        return pending_inputs(self.pause, self.id)

    @property
    def usage_totals(self) -> Usage:
        return Usage.from_json(self.usage)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "agent_name": self.agent_name,
            "status": self.status,
            "input": self.input,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "output": self.output,
            "usage": self.usage,
            "error": self.error,
            "pause": self.pause,
            "revision": self.revision,
            "kind": self.kind,
            "name": self.name,
            "version": self.version,
            "parent_run_id": self.parent_run_id,
            "root_run_id": self.root_run_id,
            "context": self.context,
            "cancel_requested": self.cancel_requested,
            "wake_at": self.wake_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AgentRun:
        """The snapshot ``data`` holds; a run stored before ``name``, ``version``, the run
        tree, the context, cancel requests and wake-ups existed gets their defaults (its
        agent's name, no version, no parent, itself as root, no context, no cancel request,
        no wake-up)."""
        return cls(
            id=str(data["id"]),
            session_id=str(data["session_id"]),
            agent_name=str(data["agent_name"]),
            status=data["status"],
            input=data.get("input"),
            created_at=str(data["created_at"]),
            updated_at=str(data["updated_at"]),
            output=data.get("output"),
            usage=dict(data.get("usage") or {}),
            error=data.get("error"),
            pause=data.get("pause"),
            revision=int(data.get("revision", 0)),
            kind=str(data.get("kind", "agent")),
            name=str(data.get("name") or ""),
            version=_text_or_none(data.get("version")),
            parent_run_id=_text_or_none(data.get("parent_run_id")),
            root_run_id=str(data.get("root_run_id") or ""),
            context=data.get("context"),
            cancel_requested=bool(data.get("cancel_requested", False)),
            wake_at=_number_or_none(data.get("wake_at")),
        )


def _text_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _number_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(slots=True)
class Session:
    """A conversation: completed runs' messages in ``history`` (JSON), an optional
    ``summary`` that replaced older history, the run holding the session, if any, and
    the store-managed ``revision`` checked on every change."""

    id: str
    created_at: str
    updated_at: str
    history: tuple[dict[str, Any], ...] = ()
    summary: str | None = None
    active_run_id: str | None = None
    revision: int = 0
    # The history as Message values, built by the first messages() call and carried to the
    # session a turn extends (session_with_turn), so that a turn on a long session does
    # not rebuild every earlier message. A history is never changed in place: a snapshot
    # is replaced, and dataclasses.replace starts a new snapshot without it.
    _messages: tuple[Message, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def messages(self) -> list[Message]:
        """The history rebuilt as :class:`~fevex.messages.Message` values."""
        built = self._messages
        if built is None:
            built = tuple(message_from_json(item) for item in self.history)
            self._messages = built
        return list(built)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "history": list(self.history),
            "summary": self.summary,
            "active_run_id": self.active_run_id,
            "revision": self.revision,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Session:
        return cls(
            id=str(data["id"]),
            created_at=str(data["created_at"]),
            updated_at=str(data["updated_at"]),
            history=tuple(data.get("history") or ()),
            summary=data.get("summary"),
            active_run_id=data.get("active_run_id"),
            revision=int(data.get("revision", 0)),
        )


def changed_session(
    session: Session, appended: tuple[dict[str, Any], ...] = (), **changes: Any
) -> Session:
    """``session`` with ``appended`` messages (JSON) after its history and ``changes``
    made (never to ``history``), keeping the Message values it has already built: how a
    store that keeps sessions in memory reserves a session and ends a turn, at a cost that
    does not grow with the history."""
    history = session.history + appended if appended else session.history
    extended = dataclasses.replace(session, history=history, **changes)
    built = session._messages
    if built is not None:
        if not appended:
            extended._messages = built
            return extended
        try:
            added = tuple(message_from_json(item) for item in appended)
        except (KeyError, TypeError, ValueError):
            # A message that does not parse fails messages(), later, as it always did.
            return extended
        extended._messages = built + added
    return extended
