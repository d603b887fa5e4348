"""Bounded child runs (fevex.kits.children) in one process, on every store: children as
ordinary runs of the tree (listed, traced), commits in declaration order only after every
result is accepted, the tree's capacity refused before any child starts, the group's
failures in declaration order, timeouts, and the in-flight bounds on model calls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from fevex import (
    Fevex,
    FevexRunError,
    Limits,
    RunPausedError,
    TeamLimits,
    TeamMember,
    TeamStep,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_team,
    define_tool,
    define_workflow,
)
from fevex.kits.children import ChildTask, run_children
from fevex.models import ModelInput, ModelResult, ToolCall
from fevex.observability import InMemoryTraceExporter, Observability
from fevex.runtime import InMemoryRunStore
from fevex.testing import FunctionModel, ManualClock

pytestmark = pytest.mark.anyio

# Long enough that no run of a loaded worker loses it; the crash test expires it on the
# store's clock instead of waiting.
LEASE = 30.0


def tree_limits(**values: int | None) -> Limits:
    """A workflow's limits: only the tree bounds given."""
    return Limits(max_steps=None, max_tool_calls=None, max_tool_retries=None, **values)


class Model:
    """Answers ``done:<input>``; an input ``sleep:<s>:<text>`` answers after ``s`` seconds,
    ``fail`` raises. Counts the calls in flight, and the most ever in flight."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.calls = 0

    async def __call__(self, input: ModelInput) -> Any:
        self.calls += 1
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            last = input.messages[-1]
            if last.role == "tool":
                return ModelResult(output="after tool")
            text = last.text
            if text.startswith("sleep:"):
                _, seconds, text = text.split(":", 2)
                await asyncio.sleep(float(seconds))
            if text == "fail":
                raise RuntimeError("the model broke")
            if text == "charge":
                return ModelResult(tool_calls=[ToolCall("call-1", "charge", {"amount": 3})])
            return ModelResult(output=f"done:{text}")
        finally:
            self.in_flight -= 1


@define_tool(name="charge", description="Charge.", approval="required")
def charge(amount: int) -> dict[str, int]:
    return {"charged": amount}


analyst = define_agent(name="analyst", instructions="Analyze.")
cashier = define_agent(name="cashier", instructions="Charge.", tools=["charge"])


class Group:
    """One workflow that runs a group of the tasks ``make(input)`` returns, with the
    callbacks and limits given; what ``commit`` saw, in order."""

    def __init__(
        self,
        make: Callable[[Any], list[ChildTask]],
        *,
        limits: Limits | None = None,
        concurrency: int | None = None,
        accept: Any = None,
        with_commit: bool = True,
    ) -> None:
        self.committed: list[tuple[str, Any]] = []

        def save(value: Any, task_id: str) -> None:
            self.committed.append((task_id, value))

        @define_workflow(name="group", version="1", limits=limits or tree_limits())
        async def group(step: WorkflowStep, input: Any) -> Any:
            return await run_children(
                step,
                "parts",
                make(input),
                concurrency=concurrency,
                accept=accept,
                commit=save if with_commit else None,
            )

        self.workflow = group


def make_app(
    url: Any, group: Group, model: Model, *extra: Any, exporter: Any = None, teams: Any = ()
) -> Fevex:
    return create_fevex(
        models={"default": FunctionModel(model)},
        agents=[analyst, cashier],
        tools=[charge],
        workflows=[group.workflow, *extra],
        teams=list(teams),
        run_store=url,
        lease_seconds=LEASE,
        observability=None if exporter is None else Observability(exporters=[exporter]),
    )


def agents(*inputs: str, **task: Any) -> Callable[[Any], list[ChildTask]]:
    return lambda _: [
        ChildTask(f"t{n}", agent="analyst", input=text, **task) for n, text in enumerate(inputs)
    ]


async def group_failure(app: Fevex, workflow: str = "group") -> FevexRunError:
    with pytest.raises(FevexRunError) as failed:
        await app.run_workflow(workflow)
    assert failed.value.code == "CHILD_GROUP_FAILED"
    return failed.value


async def test_children_are_runs_of_the_tree_and_commit_in_declaration_order(
    url: str | None,
) -> None:
    # The first task ends last: its commit still comes first.
    group = Group(agents("sleep:0.3:a", "sleep:0.1:b", "c"))
    exporter = InMemoryTraceExporter()
    app = make_app(url, group, Model(), exporter=exporter)
    try:
        result = await app.run_workflow("group")

        assert result.output == ["done:a", "done:b", "done:c"]
        assert group.committed == [("t0", "done:a"), ("t1", "done:b"), ("t2", "done:c")]
        children = await app.list_runs(parent_run_id=result.run_id)
        assert len(children) == 3
        assert {(c.kind, c.name, c.status) for c in children} == {("agent", "analyst", "completed")}
        assert {c.root_run_id for c in children} == {result.run_id}
        child_ids = {c.id for c in children}
        events = await app.list_events(result.run_id)
        commits = [
            e.payload["step_id"]
            for e in events
            if e.type == "workflow.step.completed" and e.payload["step_id"].endswith(":commit")
        ]
        assert commits == ["parts:t0:commit", "parts:t1:commit", "parts:t2:commit"]
    finally:
        await app.close()
    # Each child is traced as a run of its own, under the step that started it.
    traced = {s.attributes.get("fevex.run.id") for s in exporter.of_kind("run")}
    assert child_ids | {result.run_id} <= traced


@pytest.mark.parametrize(
    ("limits", "task", "limit"),
    [
        (tree_limits(max_children=2), {}, "max_children"),
        (tree_limits(max_model_calls=2), {"reserve_calls": 1}, "max_model_calls"),
    ],
)
async def test_a_group_that_does_not_fit_is_refused_before_any_child_starts(
    limits: Limits, task: dict[str, Any], limit: str
) -> None:
    group = Group(agents("a", "b", "c", **task), limits=limits)
    model = Model()
    app = make_app(None, group, model)

    with pytest.raises(FevexRunError) as refused:
        await app.run_workflow("group")

    assert refused.value.code == "CHILD_CAPACITY_EXCEEDED"
    assert refused.value.details["limit"] == limit
    (run,) = await app.list_runs(kind="workflow")
    assert await app.list_runs(parent_run_id=run.id) == []
    assert model.calls == 0
    assert group.committed == []


async def test_max_depth_bounds_groups_nested_in_child_workflows() -> None:
    @define_workflow(name="inner", version="1")
    async def inner(step: WorkflowStep, input: Any) -> Any:
        return await run_children(step, "leaves", [ChildTask("leaf", agent="analyst", input="x")])

    group = Group(lambda _: [ChildTask("w", workflow="inner")], limits=tree_limits(max_depth=1))
    app = make_app(None, group, Model(), inner)

    failed = await group_failure(app)

    (failure,) = failed.details["failures"]
    assert failure["id"] == "w"
    assert failure["error"]["code"] == "CHILD_CAPACITY_EXCEEDED"
    assert "max_depth" in failure["error"]["message"]
    (child,) = await app.list_runs(parent_run_id=failed.run_id)
    assert (child.kind, child.name, child.status) == ("workflow", "inner", "failed")
    assert await app.list_runs(parent_run_id=child.id) == []
    assert group.committed == []

    # One level deeper is allowed with max_depth=2.
    deeper = Group(lambda _: [ChildTask("w", workflow="inner")], limits=tree_limits(max_depth=2))
    other = make_app(None, deeper, Model(), inner)
    result = await other.run_workflow("group")
    assert result.output == [["done:x"]]
    assert deeper.committed == [("w", ["done:x"])]


async def test_accept_returning_false_is_a_broken_contract_and_nothing_commits() -> None:
    group = Group(agents("a", "b"), accept=lambda value, task_id: False)
    app = make_app(None, group, Model())

    failed = await group_failure(app)

    codes = [(f["id"], f["error"]["code"]) for f in failed.details["failures"]]
    assert codes[0] == ("t0", "KIT_CALLBACK_CONTRACT")
    assert group.committed == []


async def test_failures_are_listed_in_declaration_order_and_stop_the_rest() -> None:
    def accept(value: str, task_id: str) -> None:
        # t1 is refused at once; t0 a moment later (its check cannot be interrupted);
        # t2's child is still running and is cancelled.
        if task_id == "t0":
            time.sleep(0.3)
        if task_id in ("t0", "t1"):
            raise ValueError(f"{task_id} is not good enough")

    group = Group(agents("a", "b", "sleep:10:c"), accept=accept)
    app = make_app(None, group, Model())

    failed = await group_failure(app)

    failures = failed.details["failures"]
    assert [(f["id"], f["error"]["code"]) for f in failures] == [
        ("t0", "CHILD_RESULT_REJECTED"),
        ("t1", "CHILD_RESULT_REJECTED"),
    ]
    assert group.committed == []
    by_input = {c.input: c for c in await app.list_runs(parent_run_id=failed.run_id)}
    assert by_input["sleep:10:c"].status == "cancelled"


async def test_a_failed_child_cancels_its_group_and_its_late_result_never_commits() -> None:
    group = Group(agents("fail", "sleep:0.5:slow"))
    model = Model()
    app = make_app(None, group, model)

    failed = await group_failure(app)

    (failure,) = failed.details["failures"]
    assert failure["id"] == "t0"
    by_input = {c.input: c for c in await app.list_runs(parent_run_id=failed.run_id)}
    assert by_input["fail"].status == "failed"
    assert by_input["sleep:0.5:slow"].status == "cancelled"
    await asyncio.sleep(0.7)
    assert group.committed == []


async def test_a_task_past_its_timeout_is_cancelled_and_fails_the_group() -> None:
    group = Group(
        lambda _: [
            ChildTask("quick", agent="analyst", input="a", timeout=5),
            ChildTask("slow", agent="analyst", input="sleep:10:b", timeout=0.3),
        ]
    )
    app = make_app(None, group, Model())
    started = time.monotonic()

    failed = await group_failure(app)

    assert time.monotonic() - started < 5
    (failure,) = failed.details["failures"]
    assert (failure["id"], failure["error"]["code"]) == ("slow", "CHILD_TIMEOUT")
    by_input = {c.input: c for c in await app.list_runs(parent_run_id=failed.run_id)}
    assert by_input["sleep:10:b"].status == "cancelled"
    assert group.committed == []


async def test_a_check_that_outlasts_its_tasks_timeout_fails_the_group() -> None:
    checked: list[str] = []

    async def slow_check(value: str, task_id: str) -> None:
        checked.append(task_id)
        if task_id == "slow":
            await asyncio.sleep(10)

    group = Group(
        lambda _: [
            ChildTask("quick", agent="analyst", input="a", timeout=5),
            ChildTask("slow", agent="analyst", input="b", timeout=0.3),
        ],
        accept=slow_check,
    )
    app = make_app(None, group, Model())
    started = time.monotonic()

    failed = await group_failure(app)

    assert time.monotonic() - started < 5
    (failure,) = failed.details["failures"]
    assert (failure["id"], failure["error"]["code"]) == ("slow", "CHILD_TIMEOUT")
    # The child itself completed: the check was what ran out of time, and it was stopped.
    by_input = {c.input: c.status for c in await app.list_runs(parent_run_id=failed.run_id)}
    assert by_input == {"a": "completed", "b": "completed"}
    assert sorted(checked) == ["quick", "slow"]
    assert group.committed == []


@pytest.mark.parametrize(("concurrency", "in_flight", "most"), [(3, 2, 2), (2, None, 2)])
async def test_concurrency_and_the_trees_in_flight_model_calls_are_bounded(
    concurrency: int, in_flight: int | None, most: int
) -> None:
    group = Group(
        agents(*(f"sleep:0.1:{n}" for n in range(6))),
        concurrency=concurrency,
        limits=tree_limits(max_concurrent_model_calls=in_flight),
    )
    model = Model()
    app = make_app(None, group, model)

    result = await app.run_workflow("group")

    assert len(result.output) == 6
    assert model.most == most
    assert model.calls == 6


async def test_a_childs_max_calls_bounds_a_workflow_child_and_its_agent_steps() -> None:
    @define_workflow(name="two_steps", version="1")
    async def two_steps(step: WorkflowStep, input: Any) -> Any:
        first = await step.agent("first", "analyst", input="one")
        second = await step.agent("second", "analyst", input="two")
        return [first.output, second.output]

    group = Group(
        lambda max_calls: [ChildTask("w", workflow="two_steps", max_calls=max_calls)],
        with_commit=False,
    )
    app = make_app(None, group, Model(), two_steps)

    assert (await app.run_workflow("group", 2)).output == [["done:one", "done:two"]]
    with pytest.raises(FevexRunError) as refused:
        await app.run_workflow("group", 1)
    assert refused.value.code == "CHILD_GROUP_FAILED"
    (failure,) = refused.value.details["failures"]
    assert failure["error"]["code"] == "MAX_MODEL_CALLS_EXCEEDED"


async def test_reservations_are_kept_for_the_tasks_that_hold_them() -> None:
    # A budget of 3: the group reserves 2 (one per task), so the root's own agent step
    # after the group has the one call left, and a second has none.
    @define_workflow(name="budget", version="1", limits=tree_limits(max_model_calls=3))
    async def budget(step: WorkflowStep, input: Any) -> Any:
        async def late() -> Any:
            await asyncio.sleep(0.05)
            return (await step.agent("late", "analyst", input="late")).output

        # An agent step running beside the group spends what is not reserved.
        results = await step.parallel(
            "both",
            {
                "group": lambda: run_children(
                    step,
                    "parts",
                    [
                        ChildTask(f"t{n}", agent="analyst", input="sleep:0.3:x", reserve_calls=1)
                        for n in range(2)
                    ],
                ),
                "late": late,
            },
        )
        return results

    group = Group(agents("a"))
    app = make_app(None, group, Model(), budget)

    result = await app.run_workflow("budget")
    assert result.output == {"group": ["done:x", "done:x"], "late": "done:late"}

    @define_workflow(name="over", version="1", limits=tree_limits(max_model_calls=2))
    async def over(step: WorkflowStep, input: Any) -> Any:
        async def late() -> Any:
            await asyncio.sleep(0.05)
            return (await step.agent("late", "analyst", input="late")).output

        return await step.parallel(
            "both",
            {
                "group": lambda: run_children(
                    step,
                    "parts",
                    [
                        ChildTask(f"t{n}", agent="analyst", input="sleep:0.3:x", reserve_calls=1)
                        for n in range(2)
                    ],
                ),
                "late": late,
            },
        )

    other = make_app(None, group, Model(), over)
    with pytest.raises(FevexRunError) as refused:
        await other.run_workflow("over")
    assert refused.value.code == "MAX_MODEL_CALLS_EXCEEDED"
    assert "run tree" in refused.value.message


async def test_a_child_paused_for_approval_pauses_the_parent_until_it_ends(
    url: str | None,
) -> None:
    group = Group(
        lambda _: [
            ChildTask("plain", agent="analyst", input="a"),
            ChildTask("paid", agent="cashier", input="charge"),
        ]
    )
    app = make_app(url, group, Model())
    other = make_app(url if url is not None else app.run_store, group, Model())
    try:
        with pytest.raises(RunPausedError) as paused:
            await app.run_workflow("group")
        parent_id = paused.value.run_id
        parent = await app.get_run(parent_id)
        assert parent.pause is not None
        assert parent.pause["reason"] == "children"
        assert group.committed == []
        (child,) = [c for c in await app.list_runs(parent_run_id=parent_id) if c.name == "cashier"]
        assert child.status == "paused"
        assert child.pause is not None
        approval = child.pause["approvals"][0]

        await app.resume_run(
            child.id, {"approval_id": approval["id"], "decision": "approve", "actor": {"id": "r"}}
        )
        sweep = await other.wake_due_runs()

        assert [woken.id for woken in sweep.woken] == [parent_id]
        ended = await app.get_run(parent_id)
        assert ended.status == "completed"
        assert ended.output == ["done:a", "after tool"]
        assert group.committed == [("plain", "done:a"), ("paid", "after tool")]
        assert len(await app.list_runs(parent_run_id=parent_id)) == 2
    finally:
        if url is not None:
            await other.close()
        await app.close()


async def test_a_team_step_runs_a_group_of_its_members() -> None:
    committed: list[str] = []

    @define_team(
        name="crew",
        version="1",
        supervisor="analyst",
        members=[TeamMember("cashier")],
        limits=TeamLimits(max_children=4),
    )
    async def crew(step: TeamStep, input: Any) -> Any:
        return await run_children(
            step,
            "fan",
            [ChildTask(f"p{n}", agent="analyst", input=f"{n}") for n in range(2)],
            commit=lambda value, task_id: committed.append(task_id),
        )

    app = make_app(None, Group(agents("a")), Model(), teams=[crew])
    result = await app.run_team("crew")

    assert result.output == ["done:0", "done:1"]
    assert committed == ["p0", "p1"]
    assert len(await app.list_runs(parent_run_id=result.run_id)) == 2


async def test_each_child_is_offered_only_its_own_definitions_tools() -> None:
    offered: dict[str, set[str]] = {}
    model = Model()

    async def recording(input: ModelInput) -> Any:
        instructions = input.messages[0].text
        offered.setdefault(instructions, set()).update(tool.name for tool in input.tools)
        return await model(input)

    # The parent workflow's app has the charge tool; only the cashier's definition names it.
    group = Group(
        lambda _: [
            ChildTask("look", agent="analyst", input="a"),
            ChildTask("pay", agent="cashier", input="b"),
        ]
    )
    app = create_fevex(
        models={"default": FunctionModel(recording)},
        agents=[analyst, cashier],
        tools=[charge],
        workflows=[group.workflow],
    )
    async with app:
        result = await app.run_workflow("group")

    assert result.output == ["done:a", "done:b"]
    assert offered == {"Analyze.": set(), "Charge.": {"charge"}}


async def test_a_commit_found_started_on_replay_is_never_repeated() -> None:
    class Crash(BaseException):
        """The process dying inside the commit."""

    calls: list[str] = []

    def commit(value: Any, task_id: str) -> None:
        calls.append(task_id)
        if task_id == "t1" and calls.count("t1") == 1:
            raise Crash

    @define_workflow(name="crashing", version="1")
    async def crashing(step: WorkflowStep, input: Any) -> Any:
        return await run_children(
            step,
            "parts",
            [ChildTask(f"t{n}", agent="analyst", input=str(n)) for n in range(3)],
            commit=commit,
        )

    group = Group(agents("a"))
    clock = ManualClock()
    app = make_app(InMemoryRunStore(clock=clock), group, Model(), crashing)
    with pytest.raises(Crash):
        await app.run_workflow("crashing")
    (run,) = await app.list_runs(kind="workflow", name="crashing")
    clock.advance(LEASE + 1)  # the dead process's lease expires
    recoverer = make_app(app.run_store, group, Model(), crashing)

    with pytest.raises(FevexRunError) as failed:
        await recoverer.recover_run(run.id, actor={"id": "worker", "type": "service"})

    assert failed.value.code == "CHILD_GROUP_FAILED"
    (failure,) = failed.value.details["failures"]
    assert (failure["id"], failure["error"]["code"]) == ("t1", "CHILD_COMMIT_UNCERTAIN")
    assert calls == ["t0", "t1"]
