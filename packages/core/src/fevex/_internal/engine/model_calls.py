"""The model calls of one run tree, while a group of child runs holds the tree's gate.

Children run in the process of their parent, so the bounds a root run sets for its whole
tree (``max_concurrent_model_calls`` in flight, ``max_model_calls`` in all) are kept here,
in process, by root run id: the kernel hands the gate of a run's tree to every execution
of that tree it starts while the gate is held, and the agent loop takes a slot of it
around each model call. A run whose tree holds no gate pays one ``None`` check per call.

A *share* is one child's part of the tree's budget: at most ``max_calls`` model calls
(over the child and every run under it), of which ``reserve`` were set aside for it when
its group started: other runs of the tree may spend only what is not reserved.
"""

from __future__ import annotations

import asyncio
import dataclasses

from fevex.errors import FevexRunError
from fevex.runtime.records import AgentRun

__all__ = ["ModelCallGate", "ModelCallShare"]


@dataclasses.dataclass(slots=True)
class ModelCallShare:
    """One child's part of its tree's model calls."""

    child_run_id: str
    max_calls: int | None
    reserve: int
    used: int = 0


class ModelCallGate:
    """The in-flight slots and the model-call budget of one run tree, in this process."""

    def __init__(self, root_run_id: str, *, in_flight: int | None, budget: int | None, used: int):
        self.root_run_id = root_run_id
        self.budget = budget
        # What the tree had used when the gate was made (read from the store), and every
        # call counted here since.
        self.used = used
        self.in_flight = 0
        self.holders = 0
        self._slots = None if in_flight is None else asyncio.Semaphore(in_flight)
        self._reserved = 0
        # Any run of a share (the child and the runs under it) -> the share.
        self._owners: dict[str, ModelCallShare] = {}

    @property
    def reserved(self) -> int:
        """The calls set aside for shares and not spent yet."""
        return self._reserved

    def available(self) -> int | None:
        """The calls neither used nor reserved (``None``: no budget)."""
        if self.budget is None:
            return None
        return max(0, self.budget - self.used - self._reserved)

    def add_share(self, share: ModelCallShare) -> None:
        """Set ``share``'s reservation aside (what it spent already counts against it)."""
        left = max(0, share.reserve - share.used)
        share.reserve = left
        self._reserved += left
        self._owners[share.child_run_id] = share

    def end_share(self, child_run_id: str) -> None:
        """Give back what the share of ``child_run_id`` did not spend of its reservation."""
        share = self._owners.get(child_run_id)
        if share is None or share.child_run_id != child_run_id:
            return
        self._reserved -= share.reserve
        share.reserve = 0
        for run_id in [r for r, s in self._owners.items() if s is share]:
            del self._owners[run_id]

    def adopt(self, run: AgentRun) -> None:
        """A run of the tree starts executing here: a run under a share counts in it."""
        if run.id in self._owners or run.parent_run_id is None:
            return
        share = self._owners.get(run.parent_run_id)
        if share is not None:
            self._owners[run.id] = share

    async def acquire(self, run_id: str) -> None:
        """A slot for one model call of ``run_id``, counted against its share and the
        tree's budget; ``MAX_MODEL_CALLS_EXCEEDED`` when either is spent."""
        if self._slots is not None:
            await self._slots.acquire()
        try:
            self._count(self._owners.get(run_id))
        except BaseException:
            if self._slots is not None:
                self._slots.release()
            raise
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1
        if self._slots is not None:
            self._slots.release()

    def _count(self, share: ModelCallShare | None) -> None:
        if share is not None and share.max_calls is not None and share.used >= share.max_calls:
            raise FevexRunError(
                "MAX_MODEL_CALLS_EXCEEDED",
                f"Child run {share.child_run_id} needed more than its {share.max_calls} "
                "model calls.",
                details={"limit": share.max_calls, "scope": "child"},
            )
        reserved = share is not None and share.reserve > 0
        if not reserved and self.budget is not None and self.used + self._reserved >= self.budget:
            raise FevexRunError(
                "MAX_MODEL_CALLS_EXCEEDED",
                f"The run tree of {self.root_run_id} needed more than its {self.budget} model "
                f"calls ({self._reserved} of them reserved for child runs).",
                details={"limit": self.budget, "scope": "tree"},
            )
        if share is not None:
            if reserved:
                share.reserve -= 1
                self._reserved -= 1
            share.used += 1
        self.used += 1
