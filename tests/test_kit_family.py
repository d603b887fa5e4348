"""Agent families (``fevex.kits.family``) and portable checkpoints
(``app.export_checkpoint``/``app.restore_checkpoint``) on the in-memory store, SQLite and
PostgreSQL: versions are candidates first; only a candidate whose base is the active
version is promoted, against the revision and active version the caller saw; the version
set and the active id change in one compare-and-swap; callbacks follow DESIGN §12 and
cannot rewrite what is stored; a version's checkpoint continues its conversation as a new
run, with the app's current definitions."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from fevex import (
    Fevex,
    FevexError,
    RunPausedError,
    WorkflowStep,
    create_fevex,
    define_agent,
    define_tool,
    define_workflow,
)
from fevex.errors import FevexConfigurationError
from fevex.kits.family import FamilyMerge, FamilyVersion, define_agent_family
from fevex.models import ModelInput, ModelResult, ToolCall
from fevex.observability import Observability
from fevex.runtime import ExecutionContext
from fevex.testing import FunctionModel, InMemoryTraceExporter

pytestmark = pytest.mark.anyio

ANA = ExecutionContext(actor={"id": "ana", "type": "user"}, namespace="acme")
BOB = ExecutionContext(actor={"id": "bob", "type": "user"}, namespace="acme")
EVE = ExecutionContext(actor={"id": "eve", "type": "user"}, namespace="other")
RACER = Path(__file__).with_name("family_process_app.py")
# Every app here signs the checkpoints it exports with this key and restores what it signed.
KEY = "family-tests-checkpoint-key-0123456789"


class Goal(BaseModel):
    goal: str
    source_revision: str


def heard(model_input: ModelInput) -> ModelResult | str:
    """Answers with every user message it was shown: what the conversation holds."""
    said = [message.text for message in model_input.messages if message.role == "user"]
    if said and said[-1] == "look it up":
        looked = [m for m in model_input.messages if m.role == "tool"]
        if not looked:
            return ModelResult(tool_calls=[ToolCall("call-1", "lookup", {"q": "x"})])
    return "heard: " + " | ".join(said)


async def lookup(q: str) -> str:
    return f"found {q}"


async def wire(amount: int) -> str:
    return f"wired {amount}"


lookup_tool = define_tool(name="lookup", description="Look something up.")(lookup)
wire_tool = define_tool(name="wire", description="Wire money.", approval="required")(wire)
chat = define_agent(name="chat", instructions="Be brief.", tools=["lookup", "wire"])


def make_app(
    url: str | None, *, tools: Any = (lookup_tool, wire_tool), agents: Any = None
) -> Fevex:
    # The app's record store follows its run store: the same SQLite file or database.
    return create_fevex(
        models={"default": FunctionModel(heard)},
        agents=[chat] if agents is None else agents,
        tools=list(tools),
        run_store=url,
        checkpoint_key=KEY,
    )


class Audit:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []
        self.validated: list[Any] = []

    def authorize(self, operation: dict[str, Any], family: Any, context: ExecutionContext) -> None:
        assert context.actor is not None
        self.asked.append((operation["action"], context.actor["id"]))
        if context.actor["id"] == "mallory":
            raise PermissionError("mallory may not change families")

    def validate(self, version: FamilyVersion) -> None:
        self.validated.append(version.state)
        if version.state["source_revision"] == "withdrawn":
            raise ValueError("the source was withdrawn")


def three_way(base: Any, target: Any, source: Any) -> FamilyMerge:
    changed = target["goal"] != base["goal"] and source["goal"] != base["goal"]
    if changed and target["goal"] != source["goal"]:
        return FamilyMerge(conflicts=("goal",))
    merged = source if target["goal"] == base["goal"] else target
    return FamilyMerge(state=merged)


def goals(audit: Audit, **options: Any) -> Any:
    return define_agent_family(
        name="goals",
        state=Goal,
        authorize=audit.authorize,
        validate=audit.validate,
        merge=three_way,
        **options,
    )


def state(goal: str, source: str = "r1") -> dict[str, Any]:
    return {"goal": goal, "source_revision": source}


async def test_versions_are_candidates_first_and_promotion_needs_the_active_base(
    url: str | None,
) -> None:
    audit = Audit()
    family = goals(audit)
    async with make_app(url) as app:
        made = await family.create(app, state("refunds"), context=ANA)
        first = made.newest
        assert (made.revision, made.active_id, first.status) == (1, None, "candidate")
        assert first.parent_ids == ()
        assert first.base_id is None
        active = await family.promote(
            app,
            family_id=made.id,
            revision=1,
            candidate_id=first.id,
            expected_active_id=None,
            context=ANA,
        )
        assert (active.revision, active.active_id, active.active.status) == (2, first.id, "active")
        forked = await family.fork(app, family_id=made.id, parent_id=first.id, context=ANA)
        branch = forked.newest
        assert (branch.status, branch.parent_ids, branch.base_id) == (
            "candidate",
            (first.id,),
            first.id,
        )
        assert branch.state == first.state
        assert branch.id != first.id
        # A fork of a candidate: its parent is the candidate, its base the active version.
        other = await family.fork(
            app, family_id=made.id, parent_id=branch.id, state=state("chargebacks"), context=ANA
        )
        assert other.newest.parent_ids == (branch.id,)
        assert other.newest.base_id == first.id
        promoted = await family.promote(
            app,
            family_id=made.id,
            revision=other.revision,
            candidate_id=branch.id,
            expected_active_id=first.id,
            context=ANA,
        )
        assert promoted.active_id == branch.id
        assert promoted.version(first.id).status == "retired"
        # The candidate decided against the version that was active then is now stale.
        with pytest.raises(FevexError) as refused:
            await family.promote(
                app,
                family_id=made.id,
                revision=promoted.revision,
                candidate_id=other.newest.id,
                expected_active_id=branch.id,
                context=ANA,
            )
        assert refused.value.code == "FAMILY_BASE_STALE"
        # A fork of the retired version made now is a candidate against the active one:
        # promoting it rolls back.
        stale = await family.fork(app, family_id=made.id, parent_id=first.id, context=ANA)
        assert stale.newest.base_id == branch.id
        with pytest.raises(FevexError) as not_candidate:
            await family.promote(
                app,
                family_id=made.id,
                revision=stale.revision,
                candidate_id=first.id,
                expected_active_id=branch.id,
                context=ANA,
            )
        assert not_candidate.value.code == "FAMILY_NOT_CANDIDATE"
        after = await family.get(app, made.id, context=ANA)
        assert (after.revision, after.active_id) == (stale.revision, branch.id)
        assert [action for action, _ in audit.asked] == [
            "create",
            "promote",
            "fork",
            "fork",
            "promote",
            "fork",
        ]


async def test_a_stale_revision_or_active_id_is_a_conflict_with_nothing_written(
    url: str | None,
) -> None:
    family = goals(Audit())
    async with make_app(url) as app:
        made = await family.create(app, state("refunds"), context=ANA)
        first = made.newest.id
        await family.promote(
            app,
            family_id=made.id,
            revision=1,
            candidate_id=first,
            expected_active_id=None,
            context=ANA,
        )
        forked = await family.fork(app, family_id=made.id, parent_id=first, context=ANA)
        for revision, expected in ((forked.revision - 1, first), (forked.revision, None)):
            with pytest.raises(FevexError) as conflict:
                await family.promote(
                    app,
                    family_id=made.id,
                    revision=revision,
                    candidate_id=forked.newest.id,
                    expected_active_id=expected,
                    context=ANA,
                )
            assert conflict.value.code == "FAMILY_CONFLICT"
        with pytest.raises(FevexError) as stale_fork:
            await family.fork(app, family_id=made.id, parent_id=first, revision=1, context=ANA)
        assert stale_fork.value.code == "FAMILY_CONFLICT"
        unchanged = await family.get(app, made.id, context=ANA)
        assert unchanged.revision == forked.revision
        assert (unchanged.active_id, len(unchanged.versions)) == (first, 2)
        with pytest.raises(FevexError) as taken:
            await family.create(app, state("x"), family_id=made.id, context=ANA)
        assert taken.value.code == "FAMILY_CONFLICT"
        assert taken.value.details["reason"] == "exists"


async def test_reads_are_scoped_by_namespace_and_changes_go_through_authorize(
    url: str | None,
) -> None:
    audit = Audit()
    family = goals(audit)
    mallory = ExecutionContext(actor={"id": "mallory", "type": "user"}, namespace="acme")
    async with make_app(url) as app:
        made = await family.create(app, state("refunds"), context=ANA)
        for call in (
            family.get(app, made.id, context=EVE),
            family.fork(app, family_id=made.id, parent_id=made.newest.id, context=EVE),
            family.promote(
                app,
                family_id=made.id,
                revision=1,
                candidate_id=made.newest.id,
                expected_active_id=None,
                context=EVE,
            ),
        ):
            with pytest.raises(FevexError) as hidden:
                await call
            assert hidden.value.code == "FAMILY_NOT_FOUND"
        with pytest.raises(FevexError) as refused:
            await family.promote(
                app,
                family_id=made.id,
                revision=1,
                candidate_id=made.newest.id,
                expected_active_id=None,
                context=mallory,
            )
        assert refused.value.code == "FAMILY_UNAUTHORIZED"
        assert isinstance(refused.value.__cause__, PermissionError)
        # Eve's namespace may hold a family of the same id: a different record.
        mine = await family.create(app, state("other"), family_id=made.id, context=EVE)
        assert mine.newest.state["goal"] == "other"
        again = await family.get(app, made.id, context=ANA)
        assert (again.revision, again.active_id, again.newest.state["goal"]) == (1, None, "refunds")


async def test_promotion_checks_the_source_again(url: str | None) -> None:
    audit = Audit()
    family = goals(audit)
    async with make_app(url) as app:
        made = await family.create(app, state("refunds"), context=ANA)
        with pytest.raises(FevexError) as withdrawn:
            await family.fork(
                app,
                family_id=made.id,
                parent_id=made.newest.id,
                state=state("refunds", "withdrawn"),
                context=ANA,
            )
        assert withdrawn.value.code == "FAMILY_VERSION_INVALID"
        # A source that is withdrawn after the candidate was made stops its promotion.
        checks = len(audit.validated)
        original = audit.validate

        def now_withdrawn(version: FamilyVersion) -> None:
            original(version)
            raise ValueError("withdrawn since")

        audit.validate = now_withdrawn  # type: ignore[method-assign]
        family = goals(audit)
        with pytest.raises(FevexError) as refused:
            await family.promote(
                app,
                family_id=made.id,
                revision=1,
                candidate_id=made.newest.id,
                expected_active_id=None,
                context=ANA,
            )
        assert refused.value.code == "FAMILY_VERSION_INVALID"
        assert len(audit.validated) == checks + 1
        assert (await family.get(app, made.id, context=ANA)).active_id is None


@pytest.mark.parametrize("returned", [False, True, 0, {"ok": True}])
async def test_a_validate_or_authorize_that_returns_a_value_writes_nothing(
    url: str | None, returned: Any
) -> None:
    async def validate(version: FamilyVersion) -> Any:
        return returned

    def authorize(operation: Any, family: Any, context: Any) -> Any:
        return returned

    family = define_agent_family(name="goals", authorize=lambda *a: None, validate=validate)
    loose = define_agent_family(name="goals", authorize=authorize)
    async with make_app(url) as app:
        with pytest.raises(FevexError) as broken:
            await family.create(app, state("refunds"), family_id="fam-1", context=ANA)
        assert broken.value.code == "KIT_CALLBACK_CONTRACT"
        assert broken.value.details["callback"] == "validate"
        with pytest.raises(FevexError) as missing:
            await family.get(app, "fam-1", context=ANA)
        assert missing.value.code == "FAMILY_NOT_FOUND"
        trusted = define_agent_family(name="goals", authorize=lambda *a: None)
        made = await trusted.create(app, state("refunds"), context=ANA)
        with pytest.raises(FevexError) as contract:
            await family.promote(
                app,
                family_id=made.id,
                revision=1,
                candidate_id=made.newest.id,
                expected_active_id=None,
                context=ANA,
            )
        assert contract.value.code == "KIT_CALLBACK_CONTRACT"
        with pytest.raises(FevexError) as contract_authorize:
            await loose.promote(
                app,
                family_id=made.id,
                revision=1,
                candidate_id=made.newest.id,
                expected_active_id=None,
                context=ANA,
            )
        assert contract_authorize.value.details["callback"] == "authorize"
        assert (await trusted.get(app, made.id, context=ANA)).revision == 1


async def test_callbacks_cannot_rewrite_the_request_or_the_record(url: str | None) -> None:
    caller_state = state("refunds")
    released = asyncio.Event()

    async def meddling_authorize(operation: dict[str, Any], family: Any, context: Any) -> None:
        operation["candidate_id"] = "ver_other"
        operation["family_id"] = "elsewhere"
        if family is not None:
            family.versions[0].state["goal"] = "hijacked"
        # The caller changes its own objects while the operation waits here.
        caller_state["goal"] = "changed by the caller"
        released.set()

    def meddling_validate(version: FamilyVersion) -> None:
        version.state["goal"] = "rewritten by validate"

    def meddling_merge(base: Any, target: Any, source: Any) -> FamilyMerge:
        base["goal"] = target["goal"] = source["goal"] = "scribbled"
        return FamilyMerge(state={"goal": "merged", "source_revision": "r2"})

    family = define_agent_family(
        name="goals",
        authorize=meddling_authorize,
        validate=meddling_validate,
        merge=meddling_merge,
    )
    async with make_app(url) as app:
        made = await family.create(app, caller_state, context=ANA)
        assert released.is_set()
        first = made.newest
        assert first.state == state("refunds")
        promoted = await family.promote(
            app,
            family_id=made.id,
            revision=1,
            candidate_id=first.id,
            expected_active_id=None,
            context=ANA,
        )
        assert promoted.active_id == first.id
        forked = await family.fork(app, family_id=made.id, parent_id=first.id, context=ANA)
        merged = await family.merge(
            app, family_id=made.id, target_id=first.id, source_id=forked.newest.id, context=ANA
        )
        assert merged.newest.state == {"goal": "merged", "source_revision": "r2"}
        stored = await family.get(app, made.id, context=ANA)
        assert [v.state["goal"] for v in stored.versions] == ["refunds", "refunds", "merged"]
        # A version read back is a copy too.
        stored.versions[0].state["goal"] = "edited copy"
        assert (await family.get(app, made.id, context=ANA)).versions[0].state["goal"] == "refunds"


async def test_merge_needs_a_common_base_and_reports_the_mergers_conflicts(
    url: str | None,
) -> None:
    family = goals(Audit(), max_versions=3)
    async with make_app(url) as app:
        made = await family.create(app, state("refunds"), context=ANA)
        root = made.newest.id
        await family.promote(
            app,
            family_id=made.id,
            revision=1,
            candidate_id=root,
            expected_active_id=None,
            context=ANA,
        )
        a = (
            await family.fork(app, family_id=made.id, parent_id=root, state=state("a"), context=ANA)
        ).newest.id
        b = (
            await family.fork(app, family_id=made.id, parent_id=root, state=state("b"), context=ANA)
        ).newest.id
        with pytest.raises(FevexError) as conflict:
            await family.merge(app, family_id=made.id, target_id=a, source_id=b, context=ANA)
        assert conflict.value.code == "FAMILY_MERGE_CONFLICT"
        assert conflict.value.details["conflicts"] == ["goal"]
        # Full (three versions): only candidates and the active version are left.
        with pytest.raises(FevexError) as full:
            await family.fork(app, family_id=made.id, parent_id=root, context=ANA)
        assert full.value.code == "FAMILY_FULL"
        before = await family.get(app, made.id, context=ANA)
        on_a = await family.promote(
            app,
            family_id=made.id,
            revision=before.revision,
            candidate_id=a,
            expected_active_id=root,
            context=ANA,
        )
        assert on_a.version(root).status == "retired"
        # Room for a fork of a is made by dropping the retired root: b loses its base.
        c = (await family.fork(app, family_id=made.id, parent_id=a, context=ANA)).newest.id
        kept = await family.get(app, made.id, context=ANA)
        assert [v.id for v in kept.versions] == [a, b, c]
        with pytest.raises(FevexError) as no_base:
            await family.merge(app, family_id=made.id, target_id=c, source_id=b, context=ANA)
        assert no_base.value.code == "FAMILY_MERGE_NO_BASE"
        after = await family.get(app, made.id, context=ANA)
        assert after.revision == kept.revision


async def test_versions_that_are_not_active_expire_after_retention(url: str | None) -> None:
    family = goals(Audit(), retention=0.5)
    async with make_app(url) as app:
        made = await family.create(app, state("refunds"), context=ANA)
        root = made.newest.id
        await family.promote(
            app,
            family_id=made.id,
            revision=1,
            candidate_id=root,
            expected_active_id=None,
            context=ANA,
        )
        forked = await family.fork(app, family_id=made.id, parent_id=root, context=ANA)
        await asyncio.sleep(0.7)
        seen = await family.get(app, made.id, context=ANA)
        assert [v.id for v in seen.versions] == [root]
        with pytest.raises(FevexError) as gone:
            await family.promote(
                app,
                family_id=made.id,
                revision=forked.revision,
                candidate_id=forked.newest.id,
                expected_active_id=root,
                context=ANA,
            )
        assert gone.value.code == "FAMILY_VERSION_NOT_FOUND"
        # The next change drops it from the record too.
        await family.fork(app, family_id=made.id, parent_id=root, context=ANA)
        record = await app.record_store.read("acme", f"agent-family:goals:{made.id}")
        assert record is not None
        assert forked.newest.id not in [v["id"] for v in record.value["versions"]]


async def test_a_version_carries_a_checkpoint_and_a_fork_continues_its_conversation(
    url: str | None,
) -> None:
    family = goals(Audit())
    async with make_app(url) as app:
        first = await app.run_agent("chat", "look it up", context=ANA)
        assert first.output == "heard: look it up"
        checkpoint = await app.export_checkpoint(first.run_id)
        assert checkpoint["agent"] == "chat"
        assert checkpoint["tools"] == ["lookup"]
        text = repr(checkpoint)
        assert "ana" not in text
        assert "acme" not in text
        assert "usage" not in text
        assert [m["role"] for m in checkpoint["transcript"]] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        made = await family.create(app, state("refunds"), checkpoint=checkpoint, context=ANA)
        forked = await family.fork(app, family_id=made.id, parent_id=made.newest.id, context=ANA)
        assert forked.newest.checkpoint == checkpoint
        restored = await family.restore(
            app,
            family_id=made.id,
            version_id=forked.newest.id,
            input="and refunds?",
            context=BOB,
        )
        assert restored.output == "heard: look it up | and refunds?"
        assert restored.run_id != first.run_id
        run = await app.get_run(restored.run_id)
        assert run.status == "completed"
        assert run.context is not None
        assert run.context["actor"]["id"] == "bob"
        listed = [r.id for r in await app.list_runs()]
        assert restored.run_id in listed
        opened = (await app.list_events(restored.run_id))[0]
        assert opened.payload["restored_from"] == first.run_id
        # The branch goes on from the restored run, not from the first one.
        again = await app.restore_checkpoint(
            await app.export_checkpoint(restored.run_id), "and then?"
        )
        assert again.output == "heard: look it up | and refunds? | and then?"
        with pytest.raises(FevexError) as no_input:
            await app.restore_checkpoint(checkpoint)
        assert no_input.value.code == "INVALID_ARGUMENT"


async def test_restoring_refuses_what_the_app_lacks(url: str | None) -> None:
    async with make_app(url) as app:
        first = await app.run_agent("chat", "look it up")
        checkpoint = await app.export_checkpoint(first.run_id)
    without_tool = define_agent(name="chat", instructions="Be brief.", tools=["wire"])
    renamed = define_agent(name="helper", instructions="Help.", tools=["lookup"])
    for agents, tools, missing in (
        ([without_tool], [wire_tool], {"tools": ["lookup"]}),
        ([renamed], [lookup_tool], {"agent": "chat"}),
    ):
        async with make_app(url, agents=agents, tools=tools) as other:
            before = len(await other.list_runs())
            for attempt in (
                other.restore_checkpoint(checkpoint, "more"),
                other.check_checkpoint(checkpoint),
            ):
                with pytest.raises(FevexError) as lacking:
                    await attempt
                assert lacking.value.code == "CHECKPOINT_DEPENDENCY_MISSING"
                assert lacking.value.details["missing"] == missing
            assert len(await other.list_runs()) == before
            family = define_agent_family(name="goals", authorize=lambda *a: None)
            with pytest.raises(FevexError) as at_fork:
                await family.create(other, state("x"), checkpoint=checkpoint, context=ANA)
            assert at_fork.value.code == "CHECKPOINT_DEPENDENCY_MISSING"
    elsewhere = {**checkpoint, "model": "openai:gpt-5-mini"}
    async with make_app(url) as app:
        with pytest.raises(FevexError) as no_model:
            await app.restore_checkpoint(elsewhere, "more", trusted=True)
        assert no_model.value.details["missing"] == {"model": "openai:gpt-5-mini"}
        for broken in ({"format": "other"}, {**checkpoint, "transcript": "x"}):
            with pytest.raises(FevexError) as unreadable:
                await app.restore_checkpoint(broken, "more", trusted=True)
            assert unreadable.value.code == "CHECKPOINT_UNSUPPORTED"


async def test_a_paused_run_exports_its_pending_calls_without_the_decisions(
    url: str | None,
) -> None:
    def pay(model_input: ModelInput) -> ModelResult | str:
        if not any(m.role == "tool" for m in model_input.messages):
            return ModelResult(tool_calls=[ToolCall("call-9", "wire", {"amount": 5})])
        return "paid"

    async with create_fevex(
        models={"default": FunctionModel(pay)},
        agents=[chat],
        tools=[lookup_tool, wire_tool],
        run_store=url,
        checkpoint_key=KEY,
    ) as app:
        with pytest.raises(RunPausedError) as paused:
            await app.run_agent("chat", "pay it", context=ANA)
        checkpoint = await app.export_checkpoint(paused.value.run_id)
        assert checkpoint["status"] == "paused"
        assert checkpoint["tools"] == ["wire"]
        assert checkpoint["pending"]["calls"][0]["name"] == "wire"
        with pytest.raises(FevexError) as running:
            await app.export_checkpoint("run_missing")
        assert running.value.code == "RUN_NOT_FOUND"
        with pytest.raises(RunPausedError) as asked_again:
            await app.restore_checkpoint(checkpoint, context=ANA)
        approval = asked_again.value.approvals[0]
        assert asked_again.value.run_id != paused.value.run_id
        done = await app.resume_run(asked_again.value.run_id, approval.approve(actor="ana"))
        assert done.output == "paid"
        decided = await app.export_checkpoint(done.run_id)
        assert "ana" not in repr(decided)
        with pytest.raises(FevexError) as with_input:
            await app.restore_checkpoint(checkpoint, "extra")
        assert with_input.value.code == "INVALID_ARGUMENT"


async def test_only_a_paused_or_ended_agent_run_exports(url: str | None) -> None:
    release = asyncio.Event()

    async def slow(model_input: ModelInput) -> str:
        await release.wait()
        return "done"

    @define_workflow(name="flow")
    async def flow(step: WorkflowStep, input: Any) -> str:
        return "flowed"

    async with create_fevex(
        models={"default": FunctionModel(slow)},
        agents=[chat],
        tools=[lookup_tool, wire_tool],
        workflows=[flow],
        run_store=url,
    ) as app:
        started = await app.start_agent("chat", "hi")
        with pytest.raises(FevexError) as running:
            await app.export_checkpoint(started.id)
        assert running.value.code == "CHECKPOINT_NOT_EXPORTABLE"
        assert running.value.details["reason"] == "status"
        release.set()
        flowed = await app.run_workflow("flow")
        with pytest.raises(FevexError) as workflow:
            await app.export_checkpoint(flowed.run_id)
        assert workflow.value.details["reason"] == "kind"


async def test_a_record_the_kit_did_not_write_is_refused(url: str | None) -> None:
    family = goals(Audit())
    async with make_app(url) as app:
        key = "agent-family:goals:fam-x"
        assert await app.record_store.compare_and_swap("acme", key, 0, {"family": "goals"})
        with pytest.raises(FevexError) as unreadable:
            await family.get(app, "fam-x", context=ANA)
        assert unreadable.value.code == "FAMILY_RECORD_INVALID"
        other = await app.record_store.compare_and_swap(
            "acme", "agent-family:goals:fam-y", 0, {"family": "someone else's"}
        )
        assert other
        with pytest.raises(FevexError) as foreign:
            await family.get(app, "fam-y", context=ANA)
        assert foreign.value.code == "FAMILY_NOT_FOUND"


async def test_a_restored_run_is_traced_like_any_run() -> None:
    exporter = InMemoryTraceExporter()
    async with create_fevex(
        models={"default": FunctionModel(heard)},
        agents=[chat],
        tools=[lookup_tool, wire_tool],
        observability=Observability(exporters=[exporter]),
        checkpoint_key=KEY,
    ) as app:
        first = await app.run_agent("chat", "hi")
        restored = await app.restore_checkpoint(await app.export_checkpoint(first.run_id), "more")
        await app.flush_observability()
    traced = {s.attributes.get("fevex.run.id") for s in exporter.of_kind("run")}
    assert {first.run_id, restored.run_id} <= traced
    assert len(exporter.of_kind("model")) == 2


def test_the_blocking_twins_and_the_definition_checks() -> None:
    family = goals(Audit())
    with make_app(None) as app:
        made = family.create_sync(app, state("refunds"), context=ANA)
        done = family.promote_sync(
            app,
            family_id=made.id,
            revision=1,
            candidate_id=made.newest.id,
            expected_active_id=None,
            context=ANA,
        )
        assert family.get_sync(app, made.id, context=ANA).active_id == done.active_id
        forked = family.fork_sync(app, family_id=made.id, parent_id=done.active_id, context=ANA)
        rejected = family.reject_sync(
            app, family_id=made.id, candidate_id=forked.newest.id, context=ANA
        )
        assert [v.id for v in rejected.versions] == [made.newest.id]
        first = app.run_agent_sync("chat", "hi")
        assert (
            app.restore_checkpoint_sync(app.export_checkpoint_sync(first.run_id), "again").output
            == "heard: hi | again"
        )
    for options in (
        {"authorize": True},
        {"authorize": lambda *a: None, "validate": "yes"},
    ):
        with pytest.raises(FevexError) as bad_callback:
            define_agent_family(name="goals", **options)
        assert bad_callback.value.code == "KIT_CALLBACK_CONTRACT"
    for options in ({"max_versions": 1}, {"retention": 0}, {"name": "no spaces"}):
        with pytest.raises(FevexConfigurationError):
            define_agent_family(**{"name": "goals", "authorize": lambda *a: None, **options})
    predicate = define_agent_family(
        name="goals", authorize=lambda *a: None, state=lambda value: "goal" in value
    )
    with make_app(None) as app:
        for kind, bad in ((goals(Audit()), {"goal": "no source"}), (predicate, {"x": 1})):
            with pytest.raises(FevexError) as invalid:
                kind.create_sync(app, bad, family_id="fam-bad", context=ANA)
            assert invalid.value.code == "FAMILY_STATE_INVALID"
        assert predicate.create_sync(app, {"goal": "ok"}, context=ANA).newest.state == {
            "goal": "ok"
        }
    no_merge = define_agent_family(name="goals", authorize=lambda *a: None)
    with make_app(None) as app, pytest.raises(FevexConfigurationError) as unsupported:
        no_merge.merge_sync(app, family_id="f", target_id="a", source_id="b", context=ANA)
    assert unsupported.value.code == "FAMILY_MERGE_UNSUPPORTED"


def test_two_processes_promoting_against_one_revision_one_wins(
    store_url: str, tmp_path: Path
) -> None:
    """Both processes read the family at the same revision (each waits in ``authorize``
    until the other has read it too), then both swap: exactly one is written."""
    family = goals(Audit())
    with make_app(store_url) as app:
        made = family.create_sync(app, state("refunds"), context=ANA)
        root = made.newest.id
        family.promote_sync(
            app,
            family_id=made.id,
            revision=1,
            candidate_id=root,
            expected_active_id=None,
            context=ANA,
        )
        a = family.fork_sync(app, family_id=made.id, parent_id=root, context=ANA).newest.id
        forked = family.fork_sync(app, family_id=made.id, parent_id=root, context=ANA)
        b = forked.newest.id
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    environment = {**os.environ, "FEVEX_RUN_STORE": store_url, "FAMILY_BARRIER": str(barrier)}
    racers = [
        subprocess.Popen(
            [sys.executable, str(RACER), made.id, str(forked.revision), candidate, root, name],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, candidate in (("one", a), ("two", b))
    ]
    outcomes = []
    deadline = time.monotonic() + 60
    for racer in racers:
        out, err = racer.communicate(timeout=max(1, deadline - time.monotonic()))
        assert racer.returncode == 0, err
        outcomes.append(out.strip())
    # The loser read the same revision as the winner and lost at the swap itself.
    assert sorted(outcomes)[0] == "FAMILY_CONFLICT raced"
    assert sorted(outcome.split()[0] for outcome in outcomes) == ["FAMILY_CONFLICT", "promoted"]
    winner = next(o.split()[1] for o in outcomes if o.startswith("promoted"))
    with make_app(store_url) as app:
        final = family.get_sync(app, made.id, context=ANA)
    assert final.revision == forked.revision + 1
    assert final.active_id == winner
    assert final.version(root).status == "retired"
