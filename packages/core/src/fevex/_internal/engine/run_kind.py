"""What a kind of run (agent, workflow, team) gives the kernel.

A kind owns its runs' checkpoint format: it builds a new run and its first driver, decides
an approval and receives an event by editing its own checkpoint, and rebuilds the driver
that continues a stored run. The kernel holds the kinds it was created with, by name, and
only ever calls these methods: it never reads or writes a checkpoint's inside itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fevex._internal.engine.execution import StepDriver
from fevex.errors import FevexRunError
from fevex.models import Usage
from fevex.runtime.approval import ApprovalDecision
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import AgentRun, Session

__all__ = [
    "Driver",
    "LaunchRequest",
    "NewRun",
    "ReadSession",
    "RunKind",
    "approval_not_found",
]

# How a launch reads the session a new run continues (the store's get_session).
ReadSession = Callable[[str], Awaitable[Session | None]]


class Driver(StepDriver, Protocol):
    """A step driver as the kernel holds it: its steps, its usage so far, its checkpoint."""

    @property
    def usage(self) -> Usage: ...

    def checkpoint(self) -> dict[str, Any]: ...


# Plain (not frozen) slotted records: one of each is made per run, and a frozen dataclass
# costs several times as much to make; nothing changes them once made.
@dataclass(slots=True)
class LaunchRequest:
    """A caller's request for a new run, as given: the definition (its name or itself),
    the input, the context (checked as the run starts, into the JSON its kind stores) and
    what only some kinds take (an agent's session and run id, a workflow's or a team's
    limits). A run id the caller chose is the launcher's to apply."""

    reference: Any
    input: Any
    context: ExecutionContext | Mapping[str, Any] | None = None
    timeout: float | None = None
    session_id: str | None = None
    run_id: str | None = None
    limits: Any = None


@dataclass(slots=True)
class NewRun:
    """A run not stored yet, the driver that executes it, and what its ``run.started``
    event says; ``session_revision`` is the revision of the session it continues."""

    run: AgentRun
    driver: Driver
    opening: dict[str, Any]
    session_revision: int | None = None


class RunKind(Protocol):
    """A kind of run, as the kernel and the launcher use it."""

    @property
    def names(self) -> Collection[str]:
        """The names of the definitions of this kind the app has."""
        ...

    @property
    def reads_session(self) -> bool:
        """Whether :meth:`driver` needs the run's session (an agent continues its
        conversation; a workflow or a team keeps none), so that a takeover reads it only
        then."""
        ...

    @property
    def background_batching(self) -> bool:
        """Whether a run started in the background commits its events in batches (a
        workflow's passes) rather than each as it happens (an agent's output deltas,
        which a follower in another process reads live)."""
        ...

    async def launch(
        self, request: LaunchRequest, context: dict[str, Any] | None, read_session: ReadSession
    ) -> NewRun:
        """A new run of the definition ``request`` names, with ``context`` (the request's,
        as JSON), refused (``*_NOT_FOUND``, ``INVALID_INPUT``, ...) before anything is
        stored."""
        ...

    def check(self, run: AgentRun) -> None:
        """Raise when this app cannot continue ``run`` (its definition is missing)."""
        ...

    def driver(self, run: AgentRun, checkpoint: Any, session: Session | None) -> Driver:
        """The driver that continues ``run`` from its stored checkpoint;
        ``CHECKPOINT_UNSUPPORTED`` when it cannot be read."""
        ...

    def decide_approval(
        self, run: AgentRun, checkpoint: dict[str, Any], decision: ApprovalDecision
    ) -> None:
        """Record ``decision`` in the checkpoint; ``APPROVAL_NOT_FOUND`` (nothing written)
        unless the run waits for that approval."""
        ...

    def accept_event(self, run: AgentRun, name: str, payload: Any, actor: Any) -> Any:
        """The payload ``send_event`` stores for the run's wait, checked as the run's
        definition asks; raise to refuse it."""
        ...

    def receive_event(
        self, run: AgentRun, checkpoint: dict[str, Any], payload: Any, actor: Any
    ) -> None:
        """Settle the wait for the event the run's pause names with the accepted
        ``payload``, in the checkpoint."""
        ...


def approval_not_found(run_id: str, approval_id: str) -> FevexRunError:
    return FevexRunError(
        "APPROVAL_NOT_FOUND",
        f"Run {run_id} has no pending approval {approval_id!r}; nothing was changed.",
    )
