"""The error taxonomy: every error a user can meet carries a stable ``code``.

``category`` says which part of the system raised it, ``severity`` how bad it is and
``recoverable`` whether retrying the same operation later can succeed. An error raised
from a run carries that run's ``run_id``.

The approvals a :class:`RunPausedError` carries (:class:`PendingApproval`, and the
:class:`ApprovalDecision` each one builds) live here, beside the error that carries them:
the taxonomy sits below every other package and needs nothing above it. So do the inputs a
running run lists (:class:`PendingInput`, and the :class:`InputAnswer` each one builds),
which a tool's context returns. Their public home is ``fevex.runtime`` (and ``fevex``),
which re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fevex._ground.storable_text import UNSTORABLE_TEXT

ErrorCategory = Literal["configuration", "validation", "model", "tool", "run", "store", "plugin"]
ErrorSeverity = Literal["fatal", "error", "warning"]

__all__ = [
    "ErrorCategory",
    "ErrorSeverity",
    "FevexConfigurationError",
    "FevexError",
    "FevexRunError",
    "InputAction",
    "InputAnswer",
    "PendingInput",
    "RunCancelledError",
    "RunPausedError",
]


class FevexError(Exception):
    """Base of every error fevex raises on purpose."""

    category: ErrorCategory = "run"
    severity: ErrorSeverity = "error"

    def __init__(
        self,
        code: str,
        message: str,
        *,
        recoverable: bool = False,
        details: dict[str, Any] | None = None,
        category: ErrorCategory | None = None,
        run_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.recoverable = recoverable
        self.details = dict(details or {})
        if category is not None:
            self.category = category
        # The run it was raised from, when it was raised from one (also in ``details``).
        self.run_id: str | None = None
        if run_id is None and isinstance(self.details.get("run_id"), str):
            run_id = self.details["run_id"]
        if run_id is not None:
            self.for_run(run_id)

    def for_run(self, run_id: str) -> FevexError:
        """Mark the error as raised from run ``run_id``; a run id already set is kept (the
        innermost run is the one that failed). Returns the error, to re-raise it."""
        if self.run_id is None:
            self.run_id = run_id
            self.details.setdefault("run_id", run_id)
        return self

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def to_json(self) -> dict[str, Any]:
        """A safe, JSON-ready description: code, message and classification only.

        The message can quote what failed (an exception's text), so characters no store can
        keep (NUL, lone surrogates) are replaced: a run's failure must always be storable.
        """
        return {
            "code": self.code,
            "message": UNSTORABLE_TEXT.sub("\ufffd", self.message),
            "category": self.category,
            "severity": self.severity,
            "recoverable": self.recoverable,
        }


class FevexConfigurationError(FevexError):
    """The composition given to ``create_fevex`` or a ``define_*`` function is invalid.

    ``problems`` lists every problem found, each an error with its own ``code`` and
    ``message``; the error's own ``code`` is the first one's. An error about one problem
    lists itself.
    """

    category: ErrorCategory = "configuration"
    severity: ErrorSeverity = "fatal"

    def __init__(
        self,
        code: str,
        message: str,
        *,
        recoverable: bool = False,
        details: dict[str, Any] | None = None,
        category: ErrorCategory | None = None,
        problems: Sequence[FevexConfigurationError] = (),
    ) -> None:
        super().__init__(code, message, recoverable=recoverable, details=details, category=category)
        self.problems: tuple[FevexConfigurationError, ...] = tuple(problems) or (self,)

    @classmethod
    def of(cls, problems: Sequence[FevexConfigurationError]) -> FevexConfigurationError:
        """One error that reports every one of ``problems`` (at least one), with the first
        one's code; a single problem is returned as it is."""
        if len(problems) == 1:
            return problems[0]
        listed = "\n".join(f"- [{problem.code}] {problem.message}" for problem in problems)
        return cls(
            problems[0].code,
            f"{len(problems)} problems in the configuration:\n{listed}",
            problems=problems,
        )

    def to_json(self) -> dict[str, Any]:
        described = super().to_json()
        if len(self.problems) > 1:
            described["problems"] = [
                {"code": problem.code, "message": problem.message} for problem in self.problems
            ]
        return described


class FevexRunError(FevexError):
    """A run could not start, continue or finish."""

    category: ErrorCategory = "run"


class RunCancelledError(FevexRunError):
    """The run was cancelled; ``reason`` is ``aborted`` or ``timeout``."""

    def __init__(self, run_id: str, reason: Literal["aborted", "timeout"]) -> None:
        super().__init__(
            "RUN_TIMEOUT" if reason == "timeout" else "RUN_CANCELLED",
            f"Run {run_id} was cancelled ({reason}).",
            details={"run_id": run_id, "reason": reason},
        )
        self.run_id = run_id
        self.reason = reason


Actor = str | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """A person's decision on a pending approval; ``actor`` must carry an ``id``.
    ``reason`` (for a rejection) is what the model reads about it."""

    approval_id: str
    decision: Literal["approve", "reject"]
    actor: Mapping[str, Any]
    type: Literal["approval"] = "approval"
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A tool call that waits for a person's decision: ``id`` is the approval's, which the
    decision names; ``input`` the call's arguments (valid for the tool) as JSON; ``run_id``
    the run to resume with the decision: the paused run itself, or for a workflow or a
    team, the child run whose approval it waits for.

    ``approve(actor=...)`` and ``reject(actor=..., reason=...)`` build the
    :class:`ApprovalDecision` to pass to ``resume_run``; the actor is an id or a mapping
    with an ``id``.
    """

    id: str
    tool_name: str
    tool_call_id: str
    input: Any
    risk: str | None = None
    run_id: str | None = None

    def approve(self, *, actor: Actor) -> ApprovalDecision:
        return ApprovalDecision(self.id, "approve", _actor(actor))

    def reject(self, *, actor: Actor, reason: str | None = None) -> ApprovalDecision:
        return ApprovalDecision(self.id, "reject", _actor(actor), reason=reason)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], run_id: str | None = None) -> PendingApproval:
        risk = data.get("risk")
        return cls(
            id=str(data.get("id", "")),
            tool_name=str(data.get("tool_name", "")),
            tool_call_id=str(data.get("tool_call_id", "")),
            input=data.get("input"),
            risk=risk if isinstance(risk, str) else None,
            run_id=run_id,
        )


def _actor(actor: Actor) -> Mapping[str, Any]:
    described: Mapping[str, Any] = {"id": actor} if isinstance(actor, str) else dict(actor)
    check_actor(described)
    return described


def check_actor(actor: Any) -> None:
    """``INVALID_ARGUMENT`` unless ``actor`` is a mapping with a non-empty ``id``."""
    if not isinstance(actor, Mapping) or not isinstance(actor.get("id"), str) or not actor["id"]:
        raise FevexRunError("INVALID_ARGUMENT", "actor must be a mapping with a non-empty 'id'.")


InputAction = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True)
class InputAnswer:
    """A person's answer to a pending input: ``accept`` with ``content`` (a mapping of
    the requested values), ``decline`` or ``cancel``; ``actor`` must carry an ``id``."""

    input_id: str
    action: InputAction
    actor: Mapping[str, Any]
    content: Mapping[str, Any] | None = None
    type: Literal["input"] = "input"


@dataclass(frozen=True, slots=True)
class PendingInput:
    """A request a running tool call waits on: ``id`` is the request's, which the answer
    names; ``kind`` what asks (``"elicitation"``: an MCP server), ``message`` what it asks
    (remote text, cleaned and bounded), ``schema`` the JSON Schema of the values it wants,
    ``connection`` and ``tool_call_id`` where it comes from, ``expires_at`` (ISO 8601,
    UTC) when the call stops waiting, ``run_id`` the run to answer.

    ``answer(content=..., actor=...)``, ``decline(actor=...)`` and ``cancel(actor=...)``
    build the :class:`InputAnswer` to pass to ``resume_run``.
    """

    id: str
    kind: str
    message: str
    schema: Mapping[str, Any] = field(default_factory=dict)
    connection: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    expires_at: str | None = None
    run_id: str | None = None

    def answer(self, *, content: Mapping[str, Any], actor: Actor) -> InputAnswer:
        return InputAnswer(self.id, "accept", _actor(actor), dict(content))

    def decline(self, *, actor: Actor) -> InputAnswer:
        return InputAnswer(self.id, "decline", _actor(actor))

    def cancel(self, *, actor: Actor) -> InputAnswer:
        return InputAnswer(self.id, "cancel", _actor(actor))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "message": self.message,
            "schema": dict(self.schema),
            "connection": self.connection,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "expires_at": self.expires_at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], run_id: str | None = None) -> PendingInput:
        schema = data.get("schema")
        return cls(
            id=str(data.get("id", "")),
            kind=str(data.get("kind", "")),
            message=str(data.get("message", "")),
            schema=dict(schema) if isinstance(schema, Mapping) else {},
            connection=_text(data.get("connection")),
            tool_name=_text(data.get("tool_name")),
            tool_call_id=_text(data.get("tool_call_id")),
            expires_at=_text(data.get("expires_at")),
            run_id=run_id,
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class RunPausedError(FevexRunError):
    """The run paused, for example to wait for a human approval; ``pause`` says why (as
    stored JSON) and ``approvals`` lists the pending approvals, each with ``approve()`` and
    ``reject()`` to build the decision ``resume_run`` takes."""

    severity: ErrorSeverity = "warning"

    def __init__(
        self, run_id: str, pause: Any, *, approvals: Sequence[PendingApproval] = ()
    ) -> None:
        super().__init__(
            "RUN_PAUSED",
            f"Run {run_id} is paused and waits to be resumed.",
            recoverable=True,
            details={"run_id": run_id},
        )
        self.run_id: str = run_id
        self.pause = pause
        self.approvals: tuple[PendingApproval, ...] = tuple(approvals)
