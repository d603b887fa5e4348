"""Agent runs as the kernel sees them: a new run's record and driver, and the driver that
continues a stored one from its checkpoint."""

from __future__ import annotations

from typing import Any

from fevex._ground.clock import new_id, utc_now
from fevex._internal.agents.agent_loop import AgentLoop
from fevex._internal.agents.run_input import run_input
from fevex._internal.agents.run_state import RunState
from fevex._internal.composition.connections import ConnectionResolver
from fevex._internal.composition.registry import Composition, PreparedAgent
from fevex.agents import Limits
from fevex.errors import FevexRunError
from fevex.messages import Message
from fevex.runtime.records import AgentRun, Session

__all__ = ["AgentKind"]


class AgentKind:
    """The :class:`~fevex._internal.engine.kernel.RunKind` of agent runs."""

    # A resumed agent continues its session's conversation.
    reads_session = True

    def __init__(self, composition: Composition, connections: ConnectionResolver) -> None:
        self.composition = composition
        self.connections = connections

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.composition.agents)

    def agent(self, name: str) -> PreparedAgent:
        prepared = self.composition.agents.get(name)
        if prepared is None:
            raise FevexRunError("AGENT_NOT_FOUND", f"There is no agent named {name!r}.")
        return prepared

    def new_run(
        self,
        name: str,
        input: Any,
        session_id: str,
        context: dict[str, Any] | None,
        session: Session | None,
        limits: Limits | None = None,
    ) -> tuple[AgentRun, AgentLoop]:
        """A new run of agent ``name`` (``INVALID_INPUT`` for input its schema refuses)
        and the loop that executes it; ``limits`` narrows the agent's for this run."""
        prepared = self.agent(name)
        user_message, input_json = run_input(prepared, input)
        now = utc_now()
        run = AgentRun(
            new_id("run"),
            session_id,
            name,
            "running",
            input_json,
            now,
            now,
            revision=1,
            context=context,
        )
        return run, self._loop(prepared, session, RunState([user_message], limits=limits))

    def check(self, run: AgentRun) -> None:
        self.agent(run.agent_name)

    def driver(self, run: AgentRun, checkpoint: Any, session: Session | None) -> AgentLoop:
        prepared = self.agent(run.agent_name)
        return self._loop(prepared, session, RunState.from_checkpoint(run.id, checkpoint))

    def accept_event(self, run: AgentRun, name: str, payload: Any, actor: Any) -> Any:
        raise FevexRunError(
            "EVENT_NOT_EXPECTED",
            f"Run {run.id} is an agent run; agent runs wait for approvals, not events.",
            details={"run_id": run.id, "event": name, "status": run.status},
        )

    def _loop(self, prepared: PreparedAgent, session: Session | None, state: RunState) -> AgentLoop:
        return AgentLoop(
            prepared,
            _prefix(prepared, session),
            state,
            policies=self.composition.policies,
            credentials=self.composition.credentials,
            on_tool_exception=self.composition.on_tool_exception,
            connections=self.connections,
            calculate_cost=self.composition.calculate_cost,
        )


def _prefix(prepared: PreparedAgent, session: Session | None) -> list[Message]:
    """The prompt before the run's own messages: instructions, then the session's summary
    and history."""
    messages = []
    if prepared.definition.instructions:
        messages.append(Message.system(prepared.definition.instructions))
    if session is not None:
        if session.summary:
            messages.append(
                Message.system(f"Summary of the conversation so far:\n{session.summary}")
            )
        messages.extend(session.messages())
    return messages
