"""The state of a run between steps, and its checkpoint: plain JSON only.

A checkpoint is enough to continue the run in another process: this run's own messages,
the counters its limits need, the tool calls of the current step with their results and
the approval decisions taken, and the step journal (which effects started and ended). The
prompt's prefix (instructions, session summary and history) is rebuilt from the session,
which the run holds for its whole life. ``provider_state`` is never checkpointed.

Version 2 keeps effects in the journal; a version-1 checkpoint (its ``in_flight`` call)
written by an earlier fevex is read into the same state, so stored runs continue.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from fevex._internal.engine.journal import StepJournal
from fevex._internal.engine.run_kind import approval_not_found
from fevex.agents import Limits
from fevex.errors import FevexRunError
from fevex.events.cost import Cost
from fevex.messages import Message, ToolResultPart, content_part_from_json, message_from_json
from fevex.models import ToolCall, Usage
from fevex.runtime.approval import ApprovalDecision

CHECKPOINT_VERSION = 2
_READABLE_VERSIONS = (1, 2)


@dataclass(slots=True)
class PendingCalls:
    """The tool calls of one model step, worked through in order.

    The JSON of the calls and of each result is made once, when they are: a checkpoint at
    every call of a long step copies lists of references instead of serializing the whole
    step again. Results and admissions go through :meth:`add_result` and :meth:`admit`.
    """

    step: int
    calls: list[ToolCall]
    results: list[ToolResultPart] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)
    approval: dict[str, Any] | None = None
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    _calls_json: list[dict[str, Any]] = field(init=False, repr=False, compare=False)
    _results_json: list[dict[str, Any]] = field(init=False, repr=False, compare=False)
    _admitted: set[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Never changed once made: every checkpoint of the step shares this one list.
        self._calls_json = [{"id": c.id, "name": c.name, "input": c.input} for c in self.calls]
        self._results_json = [result.to_json() for result in self.results]
        self._admitted = set(self.admitted)

    @property
    def next_call(self) -> ToolCall | None:
        index = len(self.results)
        return self.calls[index] if index < len(self.calls) else None

    def add_result(self, result: ToolResultPart) -> None:
        self.results.append(result)
        self._results_json.append(result.to_json())

    def is_admitted(self, call_id: str) -> bool:
        return call_id in self._admitted

    def admit(self, call_id: str) -> None:
        self._admitted.add(call_id)
        self.admitted.append(call_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "calls": self._calls_json,
            "results": list(self._results_json),
            "admitted": list(self.admitted),
            "approval": self.approval,
            "decisions": self.decisions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PendingCalls:
        results = []
        for item in data["results"]:
            part = content_part_from_json(item)
            if not isinstance(part, ToolResultPart):
                raise ValueError("a pending result must be a tool result")
            results.append(part)
        return cls(
            step=int(data["step"]),
            calls=[ToolCall(str(c["id"]), str(c["name"]), c.get("input")) for c in data["calls"]],
            results=results,
            admitted=[str(i) for i in data.get("admitted", [])],
            approval=data.get("approval"),
            decisions=dict(data.get("decisions") or {}),
        )


@dataclass(slots=True)
class RunState:
    transcript: list[Message]
    # The transcript's JSON, kept alongside: checkpoints repeat it at every durable point.
    transcript_json: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0
    tool_calls: int = 0
    seen_call_ids: set[str] = field(default_factory=set)
    usage: Usage = field(default_factory=Usage)
    pending: PendingCalls | None = None
    journal: StepJournal = field(default_factory=StepJournal)
    # Bounds narrower than the agent's, given when the run started (a workflow's
    # remaining token budget); the agent's own limits apply over them on every takeover.
    limits: Limits | None = None
    # What the run's model steps cost so far, when the app prices them.
    cost: Cost | None = None
    # What the run's context providers and memory search returned at its start, so that
    # a run continued elsewhere never reads them again (see knowledge_context.py).
    knowledge: list[dict[str, Any]] | None = None

    # Sorted once, kept sorted: a checkpoint lists the ids in order without sorting them.
    _sorted_call_ids: list[str] = field(init=False, repr=False, compare=False)
    # The lists the last checkpoint holds, until the state they copy changes: the calls of
    # one step commit twice each with the same transcript and call ids.
    _transcript_copy: list[dict[str, Any]] | None = field(init=False, repr=False, compare=False)
    _call_ids_copy: list[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.transcript_json) != len(self.transcript):
            self.transcript_json = [message.to_json() for message in self.transcript]
        self._sorted_call_ids = sorted(self.seen_call_ids)
        self._transcript_copy = None
        self._call_ids_copy = None

    def add(self, message: Message) -> None:
        self.transcript.append(message)
        self.transcript_json.append(message.to_json())
        self._transcript_copy = None

    def see_call_id(self, call_id: str) -> None:
        self.seen_call_ids.add(call_id)
        bisect.insort(self._sorted_call_ids, call_id)
        self._call_ids_copy = None

    def checkpoint(self) -> dict[str, Any]:
        """The checkpoint of the state as it is now. Nothing in it changes afterwards: the
        state copies what it will change and shares the JSON it will only add to."""
        if self._transcript_copy is None:
            self._transcript_copy = list(self.transcript_json)
        if self._call_ids_copy is None:
            self._call_ids_copy = list(self._sorted_call_ids)
        checkpoint = {
            "version": CHECKPOINT_VERSION,
            "transcript": self._transcript_copy,
            "step": self.step,
            "tool_calls": self.tool_calls,
            "seen_call_ids": self._call_ids_copy,
            "usage": self.usage.to_json(),
            "pending": None if self.pending is None else self.pending.to_json(),
            "journal": self.journal.to_json(),
        }
        if self.limits is not None:
            checkpoint["limits"] = self.limits.to_json()
        if self.cost is not None:
            checkpoint["cost"] = self.cost.to_json()
        if self.knowledge is not None:
            checkpoint["knowledge"] = self.knowledge
        return checkpoint

    @classmethod
    def from_checkpoint(cls, run_id: str, data: Any) -> RunState:
        """The state a checkpoint holds; ``CHECKPOINT_UNSUPPORTED`` otherwise, with
        ``details["reason"]`` ``"version"`` for a checkpoint of a newer fevex (another
        worker may continue it) or ``"malformed"`` for one no version can read."""
        version = data.get("version") if isinstance(data, dict) else None
        if (
            isinstance(version, int)
            and not isinstance(version, bool)
            and version > CHECKPOINT_VERSION
        ):
            raise FevexRunError(
                "CHECKPOINT_UNSUPPORTED",
                f"Run {run_id} has a checkpoint of version {version}; this fevex reads "
                f"version {CHECKPOINT_VERSION}. A newer fevex can continue it.",
                details={"run_id": run_id, "reason": "version"},
            )
        try:
            if version not in _READABLE_VERSIONS:
                raise ValueError("no checkpoint of a known version")
            pending_json = data.get("pending")
            pending = None if pending_json is None else PendingCalls.from_json(pending_json)
            if version == 1:
                journal = _journal_of_version_1(pending, pending_json)
            else:
                journal = StepJournal.from_json(data["journal"])
            transcript_json = list(data["transcript"])
            limits = data.get("limits")
            if limits is not None:
                # A limit added since the checkpoint was written keeps its default.
                limits = Limits(
                    **{name: limits[name] for name in Limits.__slots__ if name in limits}
                )
                limits.check()
            return cls(
                transcript=[message_from_json(m) for m in transcript_json],
                transcript_json=transcript_json,
                step=int(data["step"]),
                tool_calls=int(data["tool_calls"]),
                seen_call_ids={str(i) for i in data["seen_call_ids"]},
                usage=Usage.from_json(data.get("usage")),
                pending=pending,
                journal=journal,
                limits=limits,
                cost=Cost.from_json(data.get("cost")),
                knowledge=_knowledge(data.get("knowledge")),
            )
        except Exception as error:
            # Whatever the stored JSON holds, reading it is a plain-data walk: any failure
            # means the checkpoint is malformed, never an error that stops a recovery sweep.
            raise FevexRunError(
                "CHECKPOINT_UNSUPPORTED",
                f"The checkpoint of run {run_id} is malformed ({type(error).__name__}); "
                "no version of fevex can continue the run.",
                details={"run_id": run_id, "reason": "malformed"},
            ) from None


def record_decision(checkpoint: dict[str, Any], run_id: str, decision: ApprovalDecision) -> None:
    """Record ``decision`` on the approval the checkpoint's pending tool calls wait for;
    ``APPROVAL_NOT_FOUND`` unless they wait for that one. The loop reads it on its next
    pass (:class:`PendingCalls` ``decisions``, by tool call id)."""
    pending = checkpoint.get("pending")
    approval = pending.get("approval") if isinstance(pending, dict) else None
    if not isinstance(approval, dict) or approval.get("id") != decision.approval_id:
        raise approval_not_found(run_id, decision.approval_id)
    assert isinstance(pending, dict)
    decisions = pending.get("decisions")
    pending["decisions"] = {
        **(decisions if isinstance(decisions, dict) else {}),
        str(approval.get("tool_call_id")): {
            "decision": decision.decision,
            "actor": dict(decision.actor),
            **({"reason": decision.reason} if decision.reason is not None else {}),
        },
    }


def tool_step_id(call_id: str) -> str:
    """The journal's step id for the effect of one tool call."""
    return f"tool:{call_id}"


def _journal_of_version_1(pending: PendingCalls | None, pending_json: Any) -> StepJournal:
    """Version 1 named the one call whose effect may be in flight; nothing else."""
    journal = StepJournal()
    in_flight = pending_json.get("in_flight") if isinstance(pending_json, dict) else None
    if pending is not None and in_flight is not None:
        call = next(c for c in pending.calls if c.id == in_flight)
        journal.started(tool_step_id(call.id), "tool", call.input)
    return journal


def _knowledge(data: Any) -> list[dict[str, Any]] | None:
    if data is None:
        return None
    if not isinstance(data, list) or not all(
        isinstance(block, dict) and isinstance(block.get("items"), list) for block in data
    ):
        raise ValueError("knowledge must be a list of blocks with items")
    return data
