"""Agent runs as the kernel sees them: a new run's record and driver (or one restored from
an exported checkpoint), the driver that continues a stored one from its checkpoint, and
the approval decisions recorded in it."""

from __future__ import annotations

from typing import Any

from fevex._ground.clock import new_id, utc_now
from fevex._ground.names import did_you_mean
from fevex._internal.agents.agent_loop import AgentLoop
from fevex._internal.agents.portable_checkpoint import RestoredConversation
from fevex._internal.agents.run_input import run_input
from fevex._internal.agents.run_state import PendingCalls, RunState, record_decision
from fevex._internal.composition.connections import ConnectionResolver
from fevex._internal.composition.registry import Composition, PreparedAgent
from fevex._internal.engine.run_kind import LaunchRequest, NewRun, ReadSession
from fevex.agents import AgentDefinition, Limits
from fevex.errors import FevexRunError
from fevex.messages import Message, ToolCallPart
from fevex.runtime.approval import ApprovalDecision
from fevex.runtime.records import AgentRun, Session
from fevex.runtime.store_rules import check_session_id

__all__ = ["AgentKind"]


class AgentKind:
    """The :class:`~fevex._internal.engine.run_kind.RunKind` of agent runs."""

    # A resumed agent continues its session's conversation.
    reads_session = True
    # A background agent commits each output delta: a follower elsewhere reads them live.
    background_batching = False

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

    async def launch(
        self, request: LaunchRequest, context: dict[str, Any] | None, read_session: ReadSession
    ) -> NewRun:
        """A new run of the agent ``request`` names, in the session it names (read here:
        the run continues its conversation) or a new one."""
        restored = request.reference
        if isinstance(restored, RestoredConversation):
            name = restored.agent
        else:
            name = self.name_of(restored)
        session_id = request.session_id
        session = None
        if session_id is not None:
            # Before the store reads it: every store refuses it alike (store_rules).
            check_session_id(session_id)
            session = await read_session(session_id)
        else:
            session_id = new_id("ses")
        opening: dict[str, Any] = {}
        if isinstance(restored, RestoredConversation):
            run, loop = self.restored_run(restored, request.input, session_id, context, session)
            opening["restored_from"] = restored.source_run_id
        else:
            run, loop = self.new_run(name, request.input, session_id, context, session)
        return NewRun(
            run,
            loop,
            {"agent_name": name, "session_id": session_id, "input": run.input, **opening},
            None if session is None else session.revision,
        )

    def restored_run(
        self,
        restored: RestoredConversation,
        input: Any,
        session_id: str,
        context: dict[str, Any] | None,
        session: Session | None,
    ) -> tuple[AgentRun, AgentLoop]:
        """A new run of the agent a restored conversation names, continuing it: its pending
        calls (asked again for approval), or ``input`` as the next user message. The run's
        counters and limits start afresh, as any new run's."""
        prepared = self.agent(restored.agent)
        transcript = list(restored.transcript)
        if restored.pending is not None:
            if input is not None:
                raise FevexRunError(
                    "INVALID_ARGUMENT",
                    "The checkpoint is of a run paused on its tool calls; it is restored "
                    "without input (its calls are worked through first).",
                )
            input_json: Any = None
        else:
            if input is None:
                raise FevexRunError(
                    "INVALID_ARGUMENT",
                    "The checkpoint is of a run that ended; give the input that continues "
                    "its conversation.",
                )
            user_message, input_json = run_input(prepared, input)
            transcript.append(user_message)
        seen = {
            part.id
            for message in transcript
            for part in message.content
            if isinstance(part, ToolCallPart)
        }
        pending = restored.pending
        if pending is not None:
            # The step that asked for these calls was the exported run's, not this one's.
            pending = PendingCalls(0, list(pending.calls), list(pending.results))
        state = RunState(transcript, seen_call_ids=seen, pending=pending)
        now = utc_now()
        run = AgentRun(
            new_id("run"),
            session_id,
            restored.agent,
            "running",
            input_json,
            now,
            now,
            revision=1,
            context=context,
        )
        return run, self._loop(prepared, session, state)

    def name_of(self, reference: Any) -> str:
        """The name of one of this app's agents, given by name or definition;
        ``AGENT_NOT_FOUND`` otherwise."""
        agents = self.composition.agents
        if isinstance(reference, AgentDefinition):
            prepared = agents.get(reference.name)
            if prepared is None or (
                prepared.definition is not reference and prepared.definition != reference
            ):
                raise FevexRunError(
                    "AGENT_NOT_FOUND",
                    f"The agent definition {reference.name!r} is not one this app was created "
                    "with; pass it in create_fevex(agents=[...]).",
                )
            return reference.name
        if not isinstance(reference, str) or reference not in agents:
            suggestion = did_you_mean(reference, agents) if isinstance(reference, str) else ""
            raise FevexRunError(
                "AGENT_NOT_FOUND", f"There is no agent named {reference!r}.{suggestion}"
            )
        return reference

    def check(self, run: AgentRun) -> None:
        self.agent(run.agent_name)

    def driver(self, run: AgentRun, checkpoint: Any, session: Session | None) -> AgentLoop:
        prepared = self.agent(run.agent_name)
        return self._loop(prepared, session, RunState.from_checkpoint(run.id, checkpoint))

    def decide_approval(
        self, run: AgentRun, checkpoint: dict[str, Any], decision: ApprovalDecision
    ) -> None:
        record_decision(checkpoint, run.id, decision)

    def accept_event(self, run: AgentRun, name: str, payload: Any, actor: Any) -> Any:
        raise FevexRunError(
            "EVENT_NOT_EXPECTED",
            f"Run {run.id} is an agent run; agent runs wait for approvals, not events.",
            details={"run_id": run.id, "event": name, "status": run.status},
        )

    def receive_event(
        self, run: AgentRun, checkpoint: dict[str, Any], payload: Any, actor: Any
    ) -> None:
        # Never reached: accept_event refuses every event first.
        self.accept_event(run, str((run.pause or {}).get("event")), payload, actor)

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
            models=self.composition.models,
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
