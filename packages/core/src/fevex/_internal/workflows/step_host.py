"""The port a workflow's and a team's steps talk to: their run, as the steps may use it.

Steps (:mod:`~fevex._internal.workflows.workflow_steps`, the team's delegations) never
see the driver's kernel, store, composition or event sink: they look a step up in the
journal, start, complete and fail it, wait, start a child run, run a tool and emit named
events through a :class:`StepHost`, which the workflow driver implements (as Temporal's
workflow code talks to its runtime, never to the worker). The names a run's events go
by are a value, :class:`StepEvents`, that the run's kind hands to its driver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from fevex.agents import AgentDefinition, Limits
from fevex.errors import FevexError
from fevex.events import RunEvent
from fevex.models import Usage
from fevex.runtime.records import AgentRun
from fevex.schemas.schema import CompiledSchema
from fevex.tools import ToolDefinition

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from fevex._internal.engine.journal import JournalEntry
    from fevex._internal.engine.model_calls import ModelCallGate
    from fevex._internal.engine.run_kind import Driver

__all__ = ["AgentChild", "Announcement", "ChildRun", "RunTree", "StepEvents", "StepHost"]


def _as_it_is(event: RunEvent, step_id: str, agent_name: str) -> RunEvent:
    return event


@dataclasses.dataclass(frozen=True, slots=True)
class StepEvents:
    """The names a run's stream tells its steps by (a workflow's, a team's), and how a
    child's events join that stream.

    A step's events are ``<prefix>.started``, ``.completed`` and ``.failed``: the prefix
    of its kind in ``prefixes``, else ``step``. ``names_kind`` says whether their payload
    names the step's kind (needed when one prefix serves every kind)."""

    waiting: str
    step: str
    event_received: str
    compensation: str
    prefixes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    names_kind: bool = True
    # A child run's event as the parent's stream yields it: (event, step id, agent name).
    relay: Callable[[RunEvent, str, str], RunEvent] = _as_it_is

    def of_step(self, kind: str, ending: str) -> str:
        return f"{self.prefixes.get(kind, self.step)}.{ending}"


@dataclasses.dataclass(frozen=True, slots=True)
class Announcement:
    """What a step's events say beyond the step's own fields (a team's: the agent a
    delegation runs on each, the branches of a parallel step when it starts), and an event
    of its own committed with the step's start (a team's handoff)."""

    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    on_start: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    preface: tuple[str, dict[str, Any]] | None = None


NO_ANNOUNCEMENT = Announcement()


@dataclasses.dataclass(frozen=True, slots=True)
class AgentChild:
    """A child run a step asked for (an agent's, or a workflow's), not started yet:
    ``input`` as its record keeps it (the step's identity), the ``output_schema`` its
    result is read with; the rest is the host's, to start it. ``opening`` is what its
    ``run.started`` says (``None``: an agent run's)."""

    name: str
    input: Any
    output_schema: CompiledSchema | None
    run: AgentRun
    driver: Driver
    session_revision: int | None
    opening: Mapping[str, Any] | None = None


# The general name: a child of any kind.
ChildRun = AgentChild


@dataclasses.dataclass(frozen=True, slots=True)
class RunTree:
    """The run tree a run belongs to, as the store holds it now: the root's id and
    limits, how deep the run is (the root: 0), every run under the root, and the model
    calls each of the tree's agent runs has made (by run id)."""

    root_run_id: str
    root_limits: Mapping[str, int | None]
    depth: int
    runs: tuple[AgentRun, ...]
    model_calls_of: Mapping[str, int]

    @property
    def model_calls(self) -> int:
        return sum(self.model_calls_of.values())

    def calls_under(self, run_id: str) -> int:
        """The model calls of ``run_id`` and of every run under it."""
        below: dict[str, list[str]] = {}
        for run in self.runs:
            if run.parent_run_id is not None:
                below.setdefault(run.parent_run_id, []).append(run.id)
        total, frontier = 0, [run_id]
        while frontier:
            current = frontier.pop()
            total += self.model_calls_of.get(current, 0)
            frontier.extend(below.get(current, ()))
        return total


class StepHost(Protocol):
    """The run a workflow's or a team's steps belong to, as they may use it."""

    @property
    def limits(self) -> Mapping[str, int | None]:
        """The run's limits, as its checkpoint keeps them."""
        ...

    @property
    def usage(self) -> Usage:
        """What the run's completed agent steps used."""
        ...

    @property
    def entries(self) -> Mapping[str, JournalEntry]:
        """The journal so far, by step id: read only (a step claims its entry with
        :meth:`lookup`)."""
        ...

    @property
    def workflow_name(self) -> str: ...

    @property
    def declared_events(self) -> Mapping[str, CompiledSchema | None]:
        """The events the workflow declares, each with the schema of its payload."""
        ...

    # -- the journal --------------------------------------------------------------

    def lookup(
        self, step_id: str, kind: str, identity: Any, announce: Announcement = NO_ANNOUNCEMENT
    ) -> JournalEntry | None:
        """The journal's entry for ``step_id`` (``None``: a new step), claimed for this
        pass (a second claim is ``STEP_MISMATCH``), with what its events announce;
        ``STEP_MISMATCH`` when the entry has another kind or identity."""
        ...

    async def start(self, step_id: str, kind: str, identity: Any, *, durable: bool) -> None:
        """Journal a new step ``started`` (within the run's limits) and announce it;
        ``durable`` commits it before the step's effect runs."""
        ...

    async def complete(self, step_id: str, output: Any, **announced: Any) -> Any:
        """Journal the step ``completed`` with ``output`` and return it."""
        ...

    async def fail(self, step_id: str, error: FevexError) -> FevexError:
        """Journal the step ``failed`` (a replay raises the same error) and return the
        error to raise."""
        ...

    async def replayed(self, step_id: str, entry: JournalEntry, event: str = "") -> Any:
        """A step the journal holds as ended: its stored result, or its failure raised."""
        ...

    def remember(self, step_id: str, compensate: Callable[[Any], Any] | None, output: Any) -> None:
        """Keep the compensation of a completed step for a failure of the run."""
        ...

    # -- waits: each pauses the run -----------------------------------------------

    async def wait_for_event(self, step_id: str, name: str) -> NoReturn: ...

    async def wait_for_timer(self, step_id: str, seconds: float) -> NoReturn:
        """Wait ``seconds`` from the step's start (a replay waits for the same time)."""
        ...

    async def wait_for_children(self, step_id: str, run_ids: Sequence[str]) -> NoReturn: ...

    # -- effects ------------------------------------------------------------------

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` on the run's behalf: async awaited, sync in a thread."""
        ...

    def tool(self, name: str) -> ToolDefinition[Any, Any] | None:
        """The app's tool ``name``, or ``None``."""
        ...

    async def run_tool(self, step_id: str, name: str, input: Any) -> Any:
        """Run the app's tool ``name`` as an agent's call runs it; its JSON output."""
        ...

    def agent(self, name: str) -> AgentDefinition[Any]:
        """The agent the app registered as ``name``; ``AGENT_NOT_FOUND`` when none."""
        ...

    # -- child runs ---------------------------------------------------------------

    async def agent_child(
        self, name: str, input: Any, *, session_id: str | None, limits: Limits
    ) -> AgentChild:
        """A child run of agent ``name`` (``INVALID_INPUT`` for input it refuses), in the
        session ``session_id`` (``None``: a new one), within ``limits``."""
        ...

    async def workflow_child(self, name: str, input: Any) -> AgentChild:
        """A child run of workflow ``name`` (its version registered last; ``INVALID_INPUT``
        for input it refuses), within its own limits."""
        ...

    async def cancel_child(self, step_id: str) -> None:
        """Cancel the child run of ``step_id`` (and its children) if it is stored and
        has not ended; its :meth:`run_child` returns it cancelled."""
        ...

    async def run_tree(self) -> RunTree:
        """The run tree this run belongs to, read from the store."""
        ...

    def model_calls(self, tree: RunTree) -> AbstractContextManager[ModelCallGate]:
        """The model-call gate of ``tree`` (made from its root's limits and what it used),
        held while the block runs: every run of the tree started meanwhile takes its
        slots."""
        ...

    def child_of(self, step_id: str) -> str | None:
        """The id kept for the child run of ``step_id`` until the child has ended."""
        ...

    def reserve_child(self, step_id: str) -> str:
        """A new id for the child of ``step_id``, checkpointed with the step's start:
        a recovery finds it and never starts a second child."""
        ...

    async def run_child(self, step_id: str, child: AgentChild) -> AgentRun:
        """Start the child reserved for ``step_id`` unless it is stored already, run it
        here to its end or its pause (its events join the run's stream; cancelling the
        run cancels it first) and return its stored record; once it has ended, its id
        is no longer kept."""
        ...

    # -- events -------------------------------------------------------------------

    async def emit(self, type: str, payload: dict[str, Any], *, durable: bool = True) -> None:
        """Commit the event named ``type`` (``durable``: now, with the checkpoint; else
        with the run's next commit) and hand it to the run's stream."""
        ...
