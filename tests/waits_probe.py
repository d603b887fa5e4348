"""A run kind for testing the kernel's waits before workflows exist: a "probe" run works
through a plan of steps (wait for an event, sleep, start children and wait for them),
each a journal entry, replaying the plan from the start on every takeover as a workflow
function will."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Collection, Sequence
from typing import Any

from fevex import Fevex
from fevex._ground.clock import new_id, utc_now
from fevex._internal.engine.execution import Execution
from fevex._internal.engine.journal import StepJournal
from fevex._internal.engine.kernel import Kernel, child_run
from fevex._internal.engine.run_kind import (
    LaunchRequest,
    NewRun,
    ReadSession,
    approval_not_found,
)
from fevex._internal.engine.waits import children_pause, event_pause, receive_event, timer_pause
from fevex.app import _create_fevex
from fevex.errors import FevexRunError
from fevex.events import RunEvent
from fevex.models import Usage
from fevex.runtime import AgentRun, ApprovalDecision, ExecutionContext, Session

KIND = "probe"


class ProbeDriver:
    def __init__(self, kernel: Kernel, plan: list[Any], journal: StepJournal) -> None:
        self.kernel = kernel
        self.plan = plan
        self.journal = journal
        self.usage = Usage()

    def checkpoint(self) -> dict[str, Any]:
        return {"version": 1, "plan": self.plan, "journal": self.journal.to_json()}

    async def steps(self, execution: Execution) -> AsyncGenerator[RunEvent, None]:
        results = []
        for index, (kind, argument) in enumerate(self.plan):
            step_id = f"step-{index}"
            entry = self.journal.lookup(step_id, kind, argument)
            if entry is not None and entry.status == "failed":
                assert entry.error is not None
                raise FevexRunError(entry.error["code"], entry.error["message"])
            if entry is not None and entry.status == "completed":
                results.append(entry.output)
                continue
            if entry is None:
                self.journal.started(step_id, kind, argument)
            if kind == "event":
                pause = event_pause(step_id, argument["name"], wake_at=argument.get("wake_at"))
            elif kind == "sleep":
                pause = timer_pause(step_id, argument)
            else:
                run_ids = []
                for child in range(argument):
                    run_ids.append(
                        await self._start_child(execution.sink.run, f"{step_id}-{child}")
                    )
                pause = children_pause(step_id, run_ids)
            yield await execution.suspend(pause, self.checkpoint)
            return
        yield await execution.complete(results, results, {}, ())

    async def _start_child(self, parent: AgentRun, name: str) -> str:
        """A child probe that waits for the event ``finish``."""
        own = ExecutionContext(actor={"id": "impostor"}, attributes={"child": name})
        run = child_run(parent, probe_run([("event", {"name": "finish"})], name="child"), own)
        driver = ProbeDriver(self.kernel, list(run.input), StepJournal())
        execution = await self.kernel.start(
            run, driver, session_revision=None, opening={}, deadline=None, batching=True
        )
        async for _ in self.kernel.events(execution):
            pass
        return run.id


class ProbeKind:
    reads_session = False
    background_batching = True

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.refuse_events: set[str] = set()

    @property
    def names(self) -> Collection[str]:
        return ("probe", "child")

    async def launch(
        self, request: LaunchRequest, context: dict[str, Any] | None, read_session: ReadSession
    ) -> NewRun:
        run = probe_run(request.input, context=context)
        return NewRun(run, ProbeDriver(self.kernel, list(run.input), StepJournal()), {})

    def check(self, run: AgentRun) -> None:
        return None

    def decide_approval(
        self, run: AgentRun, checkpoint: dict[str, Any], decision: ApprovalDecision
    ) -> None:
        raise approval_not_found(run.id, decision.approval_id)

    def receive_event(
        self, run: AgentRun, checkpoint: dict[str, Any], payload: Any, actor: Any
    ) -> None:
        receive_event(checkpoint, run.pause or {}, payload, actor)

    def driver(self, run: AgentRun, checkpoint: Any, session: Session | None) -> ProbeDriver:
        return ProbeDriver(
            self.kernel, checkpoint["plan"], StepJournal.from_json(checkpoint["journal"])
        )

    def accept_event(self, run: AgentRun, name: str, payload: Any, actor: Any) -> Any:
        if name in self.refuse_events:
            raise FevexRunError("EVENT_NOT_EXPECTED", f"{name} is refused")
        return payload


def probe_run(
    plan: Sequence[Any], *, name: str = "probe", context: dict[str, Any] | None = None
) -> AgentRun:
    now = utc_now()
    return AgentRun(
        new_id("run"),
        new_id("ses"),
        "",
        "running",
        [list(step) for step in plan],
        now,
        now,
        revision=1,
        kind=KIND,
        name=name,
        context=context,
    )


def create_probe_app(**options: Any) -> Fevex:
    """``create_fevex(**options)``, with the probe kind registered besides the app's own."""
    return _create_fevex({KIND: ProbeKind}, **options)


def probe_kind(app: Fevex) -> ProbeKind:
    """The probe kind ``app`` was created with (by :func:`create_probe_app`)."""
    kind = app._kernel.kinds[KIND]
    assert isinstance(kind, ProbeKind)
    return kind


async def start_probe(
    app: Fevex, plan: Sequence[Any], context: dict[str, Any] | None = None
) -> AgentRun:
    """Start a probe run and drive it to its first pause or its end."""
    run = probe_run(plan, context=context)
    driver = ProbeDriver(app._kernel, list(run.input), StepJournal())
    execution = await app._kernel.start(
        run, driver, session_revision=None, opening={}, deadline=None, batching=True
    )
    async for _ in app._kernel.events(execution):
        pass
    return await app.get_run(run.id)


def soon(seconds: float) -> float:
    return time.time() + seconds
