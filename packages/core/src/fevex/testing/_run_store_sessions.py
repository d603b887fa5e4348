"""Checks of the run-store conformance suite for sessions: one run holds a session at a time
(also when runs race for it, through the store or through an app), a terminal commit frees it
and appends its history, and a compaction replaces it at its revision only. Part of
:mod:`fevex.testing.run_store_contract`, which documents and runs them."""

from __future__ import annotations

import asyncio
import dataclasses

from fevex._ground.clock import new_id
from fevex.runtime.executions import RunLease
from fevex.testing._run_store_steps import (
    RACERS,
    ManualClock,
    RunStoreFactory,
    _codes,
    _create,
    _creation,
    _ensure,
    _finish,
    _GatedModel,
    _history,
    _new_run,
    _opened,
    _refused,
    _Run,
    _session,
)

__all__ = [
    "check_concurrent_app_runs_have_one_winner",
    "check_concurrent_creates_have_one_winner",
    "check_session_compaction",
    "check_session_reservation",
]


async def check_session_reservation(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        first = await _create(store)
        session_id = first.run.session_id
        held = await _session(store, session_id)
        second = _new_run(session_id)
        create = store.create_execution(_creation(second, held.revision))
        await _refused("RUN_CONFLICT", create, "create_execution on a held session")
        _ensure(await store.get_run(second.id) is None, "a refused create stored its run")
        _ensure(await _session(store, session_id) == held, "a refused create changed the session")

        clone = dataclasses.replace(first.run, session_id=new_id("ses"), agent_name="clone")
        create = store.create_execution(_creation(clone, None))
        await _refused("RUN_CONFLICT", create, "create_execution with an existing run id")
        _ensure(await store.get_run(first.id) == first.run, "a refused create overwrote a run")
        orphan = await store.get_session(clone.session_id)
        _ensure(
            orphan is None or orphan.active_run_id is None,
            f"a refused create reserved a session: {orphan}",
        )

        history = _history("first question", "first answer")
        await _finish(store, first, history=history)
        freed = await _session(store, session_id)
        _ensure(
            freed.active_run_id is None
            and freed.history == held.history + history
            and freed.revision > held.revision,
            "a terminal commit must free the session, append its history and advance the "
            f"revision; the session was {held} and is {freed}",
        )
        for revision, how in ((held.revision, "a stale"), (None, "no")):
            late = _new_run(session_id)
            create = store.create_execution(_creation(late, revision))
            await _refused("RUN_CONFLICT", create, f"create on a session with {how} revision")
            _ensure(await store.get_run(late.id) is None, "a refused create stored its run")
        third = await _create(store, session_id=session_id, session_revision=freed.revision)
        reserved = await _session(store, session_id)
        _ensure(
            reserved.active_run_id == third.id
            and reserved.revision > freed.revision
            and reserved.history == freed.history,
            "creating a run on a free session at its revision must reserve it, advance the "
            f"revision and keep the history; the session is {reserved}",
        )
        await _finish(store, third, status="cancelled")
        ended = await _session(store, session_id)
        _ensure(ended.active_run_id is None, f"a cancelled run kept its session: {ended}")


async def check_concurrent_creates_have_one_winner(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        seed = await _create(store)
        await _finish(store, seed, history=_history("seed", "seed"))
        session = await _session(store, seed.run.session_id)
        creates = [
            _creation(_new_run(session.id), session.revision, f"worker-{i}") for i in range(RACERS)
        ]
        outcomes = await asyncio.gather(
            *(store.create_execution(create) for create in creates), return_exceptions=True
        )
        won = [
            _Run(create.run, outcome, 1, [create.events[0].id])
            for create, outcome in zip(creates, outcomes, strict=True)
            if isinstance(outcome, RunLease)
        ]
        lost = _codes(outcomes)
        _ensure(
            len(won) == 1,
            f"{len(won)} of {RACERS} concurrent creates on one session succeeded; the others "
            f"failed with {sorted(set(lost))}",
        )
        _ensure(set(lost) <= {"RUN_CONFLICT"}, f"losing creates failed with {sorted(set(lost))}")
        winner = won[0]
        held = await _session(store, session.id)
        _ensure(held.active_run_id == winner.id, f"the winner does not hold {held}")
        for create in creates:
            if create.run.id != winner.id:
                loser = await store.get_run(create.run.id)
                _ensure(loser is None, f"a losing create stored its run: {loser}")
        await _finish(store, winner, status="cancelled")


async def check_concurrent_app_runs_have_one_winner(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    # Imported here: only this check needs the app.
    from fevex.agents import define_agent
    from fevex.app import create_fevex

    async with _opened(factory) as store:
        model = _GatedModel(expected=2)  # the seed and the winner
        agents = [define_agent(name="a", instructions="i")]
        app = create_fevex(models={"default": model}, agents=agents, run_store=store)
        model.gate.set()
        session_id = (await app.run_agent("a", "seed")).session_id
        model.gate.clear()
        racers = [
            asyncio.create_task(app.run_agent("a", f"racer {i}", session_id=session_id))
            for i in range(RACERS)
        ]
        overrun = asyncio.create_task(model.overrun.wait())
        try:
            # The winner waits at the closed gate and every loser must fail before calling
            # the model; stop waiting as soon as a second racer reaches the model.
            async with asyncio.timeout(10.0):
                while sum(not racer.done() for racer in racers) > 1 and not overrun.done():
                    running = {racer for racer in racers if not racer.done()}
                    await asyncio.wait({*running, overrun}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            pass  # more than one racer is still running: the checks below say so
        finally:
            overrun.cancel()
            model.gate.set()
            outcomes = await asyncio.gather(*racers, return_exceptions=True)
        won = [o for o in outcomes if not isinstance(o, BaseException)]
        lost = _codes(outcomes)
        _ensure(
            len(won) == 1,
            f"{len(won)} of {RACERS} concurrent app runs on one session completed; the others "
            f"failed with {sorted(set(lost))}",
        )
        _ensure(set(lost) <= {"RUN_CONFLICT"}, f"losing runs failed with {sorted(set(lost))}")
        _ensure(
            model.calls == 2,
            f"the model was called {model.calls} times, want 2 (the seed and the winner): "
            "losing runs must fail before calling it",
        )
        session = await _session(store, session_id)
        _ensure(
            session.active_run_id is None and len(session.history) == 4,
            f"after the race the session must be free and hold 4 messages: {session}",
        )


async def check_session_compaction(
    factory: RunStoreFactory, clock: ManualClock | None = None
) -> None:
    async with _opened(factory) as store:
        first = await _create(store)
        await _finish(store, first, history=_history("question", "answer"))
        session = await _session(store, first.run.session_id)
        compacted = dataclasses.replace(session, history=(), summary="The user asked once.")
        save = store.save_session(compacted, expected_revision=session.revision - 1)
        await _refused("SESSION_CONFLICT", save, "save_session at a stale revision")
        _ensure(await _session(store, session.id) == session, "a refused save changed it")

        second = await _create(store, session_id=session.id, session_revision=session.revision)
        held = await _session(store, session.id)
        save = store.save_session(
            dataclasses.replace(held, history=(), summary="Too early.", active_run_id=None),
            expected_revision=held.revision,
        )
        await _refused("RUN_CONFLICT", save, "save_session on a held session")
        _ensure(await _session(store, session.id) == held, "a refused save changed the session")
        await _finish(store, second, history=_history("again", "again"))

        current = await _session(store, session.id)
        compacted = dataclasses.replace(current, history=(), summary="The user asked twice.")
        saved = await store.save_session(compacted, expected_revision=current.revision)
        _ensure(
            saved.revision == current.revision + 1
            and (saved.history, saved.summary, saved.active_run_id)
            == ((), "The user asked twice.", None),
            f"save_session of {compacted} returned {saved}; want it with the next revision",
        )
        stored = await _session(store, session.id)
        _ensure(stored.to_json() == saved.to_json(), f"save_session saved {saved}, read {stored}")
