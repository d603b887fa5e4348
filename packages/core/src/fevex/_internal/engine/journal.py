"""The step journal: what a run's effects did, by durable step id, kept in its checkpoint.

Every step with an effect outside the run (a tool call today; workflow steps and team
delegations next) is journalled twice: ``started`` in the commit before the effect, and
``completed`` or ``failed`` in the commit after it. On a resume or a recovery the run asks
the journal before it runs a step again:

- no entry: the step never started; run it.
- ``completed`` or ``failed``: return what was stored, never run it again.
- ``started``: the process stopped during the effect; only a step that is safe to repeat
  (a keyed tool, which the other side deduplicates by its idempotency key) runs again.

A step replayed with another kind or other input than the journal holds is a program
that changed under a stored run: ``STEP_MISMATCH``, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from fevex._ground.canonical_json import DIGEST_PREFIX, json_digest
from fevex.errors import FevexRunError

__all__ = ["JournalEntry", "StepJournal", "input_digest"]

StepStatus = Literal["started", "completed", "failed"]


def input_digest(value: Any) -> str:
    """A stable digest of a JSON value: key order and whitespace do not change it.

    The journal keeps the bare hexadecimal of :func:`json_digest`, as it has since its first
    format: a stored run replays only if the digests of its steps stay what they were.
    """
    return json_digest(value)[len(DIGEST_PREFIX) :]


# Replaced, never changed (see StepJournal); not frozen, since a frozen dataclass pays
# object.__setattr__ for every field of every entry it makes.
@dataclass(slots=True)
class JournalEntry:
    kind: str
    digest: str
    status: StepStatus
    output: Any = None
    error: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "digest": self.digest,
            "status": self.status,
            "output": self.output,
            "error": self.error,
        }


class StepJournal:
    """The entries of a run's steps, each with its JSON made once, when the entry is.

    An entry is replaced, never changed, so the JSON of each stays what it was: a checkpoint
    takes a copy of the mapping of entry JSON (:meth:`to_json`) instead of serializing the
    whole journal again at every commit, and the checkpoints committed earlier share the
    JSON of the entries they hold.
    """

    __slots__ = ("_json", "entries")

    def __init__(self, entries: dict[str, JournalEntry] | None = None) -> None:
        self.entries = entries or {}
        self._json = {step_id: entry.to_json() for step_id, entry in self.entries.items()}

    def lookup(self, step_id: str, kind: str, input: Any) -> JournalEntry | None:
        """The entry of ``step_id``, checked against what the replay asks for."""
        entry = self.entries.get(step_id)
        if entry is not None and (entry.kind != kind or entry.digest != input_digest(input)):
            raise FevexRunError(
                "STEP_MISMATCH",
                f"Step {step_id!r} was journalled as a {entry.kind} step with other input; the "
                "code that continues the run is not the code that started it.",
                details={"step_id": step_id, "journalled_kind": entry.kind, "kind": kind},
            )
        return entry

    def started(self, step_id: str, kind: str, input: Any) -> None:
        self._put(step_id, JournalEntry(kind, input_digest(input), "started"))

    def completed(self, step_id: str, output: Any) -> JournalEntry:
        entry = self.entries[step_id]
        return self._put(step_id, JournalEntry(entry.kind, entry.digest, "completed", output))

    def failed(self, step_id: str, error: dict[str, Any]) -> JournalEntry:
        entry = self.entries[step_id]
        return self._put(step_id, JournalEntry(entry.kind, entry.digest, "failed", None, error))

    def to_json(self) -> dict[str, Any]:
        return dict(self._json)

    def _put(self, step_id: str, entry: JournalEntry) -> JournalEntry:
        self.entries[step_id] = entry
        self._json[step_id] = entry.to_json()
        return entry

    @classmethod
    def from_json(cls, data: Any) -> StepJournal:
        if not isinstance(data, dict):
            raise ValueError("a journal is a JSON object")
        entries = {}
        for step_id, item in data.items():
            if item["status"] not in ("started", "completed", "failed"):
                raise ValueError("unknown journal status")
            entries[str(step_id)] = JournalEntry(
                str(item["kind"]),
                str(item["digest"]),
                item["status"],
                item.get("output"),
                item.get("error"),
            )
        return cls(entries)
