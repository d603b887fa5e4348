"""``run_evaluation``: run every case of a dataset against one agent or workflow and score it.

Each case is a new run in a new session, so that no case sees another's history. Cases
run one after another unless ``concurrency`` allows more at once. A case whose run fails
(an error, a pause, a timeout) is recorded with its error and scored like the others; only
a target the app does not have stops the suite, since every case would fail alike.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from fevex.errors import FevexConfigurationError, FevexError
from fevex.evals.dataset import EvalCase, EvalDataset, checked_dataset
from fevex.evals.report import CaseResult, EvalReport, TargetKind, case_status
from fevex.evals.scoring import CaseOutcome, Score, ScoreFunction, Scorer, scorers_of
from fevex.events import RunEvent
from fevex.models import Usage

if TYPE_CHECKING:
    from fevex.app import Fevex

__all__ = ["run_evaluation"]

# Errors that say the target itself is missing: every case would fail alike.
_MISSING_TARGET = frozenset({"AGENT_NOT_FOUND", "WORKFLOW_NOT_FOUND"})


async def run_evaluation(
    app: Fevex,
    *,
    suite_name: str,
    dataset: EvalDataset | Iterable[EvalCase],
    scorers: Iterable[Scorer | ScoreFunction],
    agent_name: str | None = None,
    workflow_name: str | None = None,
    target_version: str | None = None,
    concurrency: int = 1,
    timeout: float | None = None,
    on_case: Callable[[CaseResult], Any] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> EvalReport:
    """Run each case of ``dataset`` with ``app`` against ``agent_name`` or
    ``workflow_name`` and score it with every scorer.

    ``concurrency`` bounds how many cases run at once (1: one after another).
    ``timeout`` bounds each run, in seconds. ``on_case`` is called with each case's result
    as it ends (in the order they end), for progress. ``clock`` measures durations in
    seconds (monotonic). ``target_version`` names what is evaluated (a prompt revision,
    a model) in the report. Raises ``INVALID_ARGUMENT`` for arguments out of range, and
    ``AGENT_NOT_FOUND`` or ``WORKFLOW_NOT_FOUND`` for a target the app lacks (no run is
    created).
    """
    if (agent_name is None) == (workflow_name is None):
        raise _invalid("Name exactly one of agent_name and workflow_name.")
    kind: TargetKind = "agent" if agent_name is not None else "workflow"
    target = agent_name if agent_name is not None else workflow_name
    if not isinstance(target, str) or not target:
        raise _invalid(f"The {kind} name must be a non-empty string.")
    if not isinstance(suite_name, str) or not suite_name:
        raise _invalid("suite_name must be a non-empty string.")
    if target_version is not None and not isinstance(target_version, str):
        raise _invalid("target_version must be a string or None.")
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise _invalid(f"concurrency must be a whole number of at least 1, not {concurrency!r}.")
    if timeout is not None and (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise _invalid(f"timeout must be a number of seconds above 0, or None, not {timeout!r}.")
    checked = checked_dataset(dataset)
    chosen = scorers_of(scorers)
    runner = _CaseRunner(app, kind, target, chosen, timeout, clock)
    gate = asyncio.Semaphore(concurrency)
    results: list[CaseResult | None] = [None] * len(checked.cases)
    missing_target: list[FevexError] = []

    async def run(index: int, case: EvalCase) -> None:
        async with gate:
            if missing_target:
                return
            try:
                result = await runner.run(case)
            except FevexError as error:
                # Only a missing target escapes a case: no case after it can run either.
                missing_target.append(error)
                return
        results[index] = result
        if on_case is not None:
            on_case(result)

    async with asyncio.TaskGroup() as group:
        for index, case in enumerate(checked.cases):
            group.create_task(run(index, case))
    if missing_target:
        raise missing_target[0]
    return EvalReport(
        suite_name=suite_name,
        target_kind=kind,
        target_name=target,
        target_version=target_version,
        dataset_name=checked.name,
        dataset_version=checked.version,
        cases=tuple(result for result in results if result is not None),
    )


class _CaseRunner:
    def __init__(
        self,
        app: Fevex,
        kind: TargetKind,
        target: str,
        scorers: list[Scorer],
        timeout: float | None,
        clock: Callable[[], float],
    ) -> None:
        self.app = app
        self.kind = kind
        self.target = target
        self.scorers = scorers
        self.timeout = timeout
        self.clock = clock

    async def run(self, case: EvalCase) -> CaseResult:
        error: dict[str, Any] | None = None
        run_id: str | None = None
        started = self.clock()
        try:
            if self.kind == "agent":
                result = await self.app.run_agent(self.target, case.input, timeout=self.timeout)
            else:
                result = await self.app.run_workflow(self.target, case.input, timeout=self.timeout)
        except FevexError as failure:
            duration_ms = (self.clock() - started) * 1000
            if failure.code in _MISSING_TARGET and failure.run_id is None:
                raise
            error, run_id = failure.to_json(), failure.run_id
            events = await self._events_of(run_id)
        except Exception as failure:
            duration_ms = (self.clock() - started) * 1000
            error = {
                "code": "EVAL_CASE_CRASHED",
                "message": f"The run raised {type(failure).__name__}: {failure}",
            }
            events = ()
        else:
            duration_ms = (self.clock() - started) * 1000
            run_id, events = result.run_id, result.events
        outcome = CaseOutcome(
            case=case,
            output=None if error is not None else _output_of(events, run_id),
            tool_calls=_tool_calls(events),
            duration_ms=max(duration_ms, 0.0),
            usage=_usage(events),
            usage_by_model=_usage_by_model(events),
            cost=_cost(events),
            error=error,
            run_id=run_id,
            events=events,
        )
        scores: dict[str, Score] = {}
        for scorer in self.scorers:
            score = await scorer(outcome)
            if score is not None:
                scores[scorer.name] = score
        return CaseResult(
            case_id=case.id,
            status=case_status(error, scores),
            input=case.input,
            expected=dict(case.expected),
            output=outcome.output,
            tool_calls=outcome.tool_calls,
            duration_ms=outcome.duration_ms,
            usage=outcome.usage,
            scores=scores,
            error=error,
            metadata=dict(case.metadata),
        )

    async def _events_of(self, run_id: str | None) -> tuple[RunEvent, ...]:
        """A failed run's events and its child runs', read back from the store."""
        if run_id is None:
            return ()
        events: list[RunEvent] = []
        pending = [run_id]
        try:
            while pending:
                current = pending.pop(0)
                events.extend(await self.app.list_events(current))
                children = await self.app.list_runs(parent_run_id=current, limit=1000)
                pending.extend(child.id for child in reversed(children))
        except FevexError:
            pass
        return tuple(events)


def _usage_by_model(events: Iterable[RunEvent]) -> dict[str, Usage]:
    """Usage by the model each step ran on, as its ``model.started`` names it."""
    model_of: dict[str, str] = {}
    by_model: dict[str, Usage] = {}
    for event in events:
        if event.type == "model.started":
            model_of[event.run_id] = str(event.payload.get("model") or "default")
        elif event.type == "model.completed":
            model = model_of.get(event.run_id, "default")
            usage = Usage.from_json(event.payload.get("usage"))
            by_model[model] = by_model.get(model, Usage()) + usage
    return by_model


def _cost(events: Iterable[RunEvent]) -> float | None:
    """The sum of the prices the app put on the model steps; ``None`` when it priced none."""
    amounts = [
        float(cost["amount"])
        for event in events
        if event.type == "model.completed"
        and isinstance(cost := event.payload.get("cost"), dict)
        and isinstance(cost.get("amount"), int | float)
    ]
    return sum(amounts) if amounts else None


def _output_of(events: Iterable[RunEvent], run_id: str | None) -> Any:
    for event in events:
        if event.run_id == run_id and event.type == "run.completed":
            return event.payload.get("output")
    return None


def _tool_calls(events: Iterable[RunEvent]) -> tuple[str, ...]:
    return tuple(
        str(call["name"])
        for event in events
        if event.type == "model.completed"
        for call in event.payload.get("tool_calls", ())
    )


def _usage(events: Iterable[RunEvent]) -> Usage:
    total = Usage()
    for event in events:
        if event.type == "model.completed":
            total = total + Usage.from_json(event.payload.get("usage"))
    return total


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_ARGUMENT", message)
