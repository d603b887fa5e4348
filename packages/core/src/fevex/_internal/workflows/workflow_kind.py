"""Workflow runs as the kernel sees them: a new run's record and driver, the driver that
continues a stored one, and the checks of the events it waits for."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from fevex._ground.clock import new_id, utc_now
from fevex._internal.agents.agent_kind import AgentKind
from fevex._internal.composition.registry import Composition, PreparedWorkflow
from fevex._internal.composition.tool_runner import summarize
from fevex._internal.engine.journal import StepJournal
from fevex._internal.engine.kernel import Kernel
from fevex._internal.engine.run_kind import (
    LaunchRequest,
    NewRun,
    ReadSession,
    approval_not_found,
)
from fevex._internal.engine.waits import receive_event
from fevex._internal.workflows.step_host import StepEvents
from fevex._internal.workflows.workflow_driver import WorkflowDriver
from fevex._internal.workflows.workflow_state import WorkflowState, limits_json
from fevex.agents import Limits
from fevex.errors import FevexRunError
from fevex.runtime.approval import ApprovalDecision
from fevex.runtime.records import AgentRun, Session
from fevex.schemas.schema import ensure_json
from fevex.workflows.definition import WorkflowDefinition

__all__ = ["WorkflowKind"]

KIND = "workflow"

# The names a workflow run's stream tells its steps by.
WORKFLOW_EVENTS = StepEvents(
    waiting="workflow.waiting",
    step="workflow.step",
    event_received="workflow.event.received",
    compensation="workflow.compensation",
)


class WorkflowKind:
    """The :class:`~fevex._internal.engine.run_kind.RunKind` of workflow runs."""

    # A workflow (and a team) keeps its state in its checkpoint, not in a conversation.
    reads_session = False
    step_events = WORKFLOW_EVENTS
    # Its events are committed as each pass ends or pauses, in the background too.
    background_batching = True

    def __init__(self, composition: Composition, kernel: Kernel, agents: AgentKind) -> None:
        self.composition = composition
        self.kernel = kernel
        self.agents = agents

    @property
    def names(self) -> Collection[str]:
        return {name for name, _ in self.composition.workflows}

    def workflow(self, name: str, version: str | None) -> PreparedWorkflow:
        """The workflow ``name`` at ``version`` (``None``: the one registered last)."""
        workflows = self.composition.workflows
        versions = [key for key in workflows if key[0] == name]
        if not versions:
            raise FevexRunError(
                "WORKFLOW_NOT_FOUND",
                f"There is no workflow named {name!r}; pass it in create_fevex(workflows=[...]).",
                details={"workflow": name},
            )
        if version is None:
            return workflows[versions[-1]]
        prepared = workflows.get((name, version))
        if prepared is None:
            raise FevexRunError(
                "WORKFLOW_VERSION_MISMATCH",
                f"This app has workflow {name!r} in version(s) "
                f"{', '.join(v for _, v in versions)}, not {version!r}; a run is only "
                "continued by the version that started it.",
                details={"workflow": name, "version": version},
            )
        return prepared

    def begin(
        self, reference: Any, input: Any, context: dict[str, Any] | None, limits: Any
    ) -> tuple[AgentRun, WorkflowDriver]:
        """A new run of the workflow ``reference`` names (its name: the version registered
        last; its definition: that version, which must be the app's own), and its driver."""
        if isinstance(reference, WorkflowDefinition):
            prepared = self.workflow(reference.name, reference.version)
            if prepared.definition is not reference and prepared.definition != reference:
                raise FevexRunError(
                    "WORKFLOW_NOT_FOUND",
                    f"The workflow definition {reference.name!r} is not one this app was "
                    "created with; pass it in create_fevex(workflows=[...]).",
                )
        elif isinstance(reference, str):
            prepared = self.workflow(reference, None)
        else:
            raise FevexRunError(
                "WORKFLOW_NOT_FOUND", f"{reference!r} is not a workflow name or definition."
            )
        return self.new_run(prepared, input, context, limits)

    def new_run(
        self,
        prepared: PreparedWorkflow,
        input: Any,
        context: dict[str, Any] | None,
        limits: Limits | None,
    ) -> tuple[AgentRun, WorkflowDriver]:
        """A new run (``INVALID_INPUT`` for input the schema refuses, before anything is
        stored) and the driver that executes it."""
        definition = prepared.definition
        schema = prepared.input_schema
        try:
            input_json = input if schema is None else schema.to_json(schema.validate(input))
            ensure_json(input_json)
        except Exception as error:
            raise FevexRunError(
                "INVALID_INPUT",
                f"The input of workflow {definition.name} is invalid: {summarize(error)}",
                category="validation",
            ) from None
        if limits is not None and not isinstance(limits, Limits):
            raise FevexRunError("INVALID_ARGUMENT", "limits must be a Limits value or None.")
        effective = definition.limits.narrowed(limits)
        now = utc_now()
        run = AgentRun(
            new_id("run"),
            new_id("ses"),
            definition.name,
            "running",
            input_json,
            now,
            now,
            revision=1,
            kind=KIND,
            name=definition.name,
            version=definition.version,
            context=context,
        )
        state = WorkflowState(input_json, limits_json(effective), StepJournal())
        return run, WorkflowDriver(self, prepared, state)

    async def launch(
        self, request: LaunchRequest, context: dict[str, Any] | None, read_session: ReadSession
    ) -> NewRun:
        run, driver = self.begin(request.reference, request.input, context, request.limits)
        return NewRun(
            run,
            driver,
            {
                f"{run.kind}_name": run.name,
                "version": run.version,
                "session_id": run.session_id,
                "input": run.input,
            },
        )

    def check(self, run: AgentRun) -> None:
        self.workflow(run.name, run.version or "")

    def driver(self, run: AgentRun, checkpoint: Any, session: Session | None) -> WorkflowDriver:
        prepared = self.workflow(run.name, run.version or "")
        return WorkflowDriver(self, prepared, WorkflowState.from_checkpoint(run.id, checkpoint))

    def decide_approval(
        self, run: AgentRun, checkpoint: dict[str, Any], decision: ApprovalDecision
    ) -> None:
        # Its approvals are its children's: each is decided on the child run.
        raise approval_not_found(run.id, decision.approval_id)

    def receive_event(
        self, run: AgentRun, checkpoint: dict[str, Any], payload: Any, actor: Any
    ) -> None:
        receive_event(checkpoint, run.pause or {}, payload, actor)

    def accept_event(self, run: AgentRun, name: str, payload: Any, actor: Any) -> Any:
        prepared = self.workflow(run.name, run.version or "")
        if name not in prepared.events:
            raise FevexRunError(
                "EVENT_NOT_EXPECTED",
                f"Workflow {run.name} does not declare the event {name!r}; nothing was changed.",
                details={"run_id": run.id, "event": name, "status": run.status},
            )
        if name in prepared.definition.require_actor and actor is None:
            raise FevexRunError(
                "EVENT_ACTOR_REQUIRED",
                f"The event {name!r} must be sent with an actor (send_event(..., actor=)); "
                "nothing was changed.",
                details={"run_id": run.id, "event": name},
            )
        schema = prepared.events[name]
        if schema is None:
            return payload
        try:
            return schema.to_json(schema.validate(payload))
        except Exception as error:
            raise FevexRunError(
                "EVENT_PAYLOAD_INVALID",
                f"The payload of the event {name!r} is invalid: {summarize(error)}; nothing "
                "was changed.",
                category="validation",
                details={"run_id": run.id, "event": name},
            ) from None
