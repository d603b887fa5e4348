"""A running tool call waiting for a person's answer, and that answer's way to it from any
process sharing the store.

The run stays ``running`` while it waits: the process that executes it keeps its lease (the
lease keeper renews it as for any long tool call) and its tool call in flight, so that
whatever the call holds open (an MCP session) stays alive. Leases, recovery and workers
need nothing new: a run whose process dies is recovered like any run whose tool call was
interrupted, and the takeover's opening clears the request from the run.

What the run shows is committed by its owner: ``input.requested`` sets the run's ``pause``
to ``{"reason": "input", "inputs": [...]}`` (the requests open now) and ``input.answered``
or ``input.expired`` takes the request off. What no owner can commit, the answer from
another process, goes through the app's record store, one record per request in
``fevex.inputs``, moved by compare-and-swap:

``pending`` (written by the asker) → ``answered`` (by the answerer, with the answer) →
``received`` (by the asker, which drops the content from the record); or ``pending`` →
``expired`` (the asker's time is up) or ``abandoned`` (the call stopped: the run was
cancelled, its lease lost); or ``answered`` → ``unclaimed`` (the answerer gave up on an
asker that never took it: its process died).

One swap wins each race, so an answer is taken exactly once or refused with
``INPUT_NOT_PENDING``, and an answer that nobody takes never leaves a run waiting. The
asker polls the record every ``POLL_INTERVAL`` (an answer given in this process wakes it at
once); the answerer waits at most ``CLAIM_TIMEOUT`` for the asker to take the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from fevex._ground.clock import new_id
from fevex._internal.engine.event_sink import EventSink
from fevex.errors import FevexRunError
from fevex.runtime.inputs import InputAnswer, PendingInput, checked_content
from fevex.runtime.record_store import RecordStore, StoredRecord
from fevex.runtime.records import AgentRun

__all__ = ["CLAIM_TIMEOUT", "NAMESPACE", "POLL_INTERVAL", "InputDesk"]

NAMESPACE = "fevex.inputs"
POLL_INTERVAL = 0.2
CLAIM_TIMEOUT = 10.0


class InputDesk:
    """The inputs of one app: the requests its running tool calls wait on, and the
    answers it delivers. ``records`` gives the app's record store."""

    def __init__(self) -> None:
        self.records: Callable[[], RecordStore] | None = None
        self.poll_interval = POLL_INTERVAL
        self.claim_timeout = CLAIM_TIMEOUT
        # Input id -> the event that wakes its asker in this process.
        self._waiting: dict[str, asyncio.Event] = {}
        # Run id -> its open requests, as its pause lists them.
        self._open: dict[str, dict[str, dict[str, Any]]] = {}

    def _store(self) -> RecordStore:
        if self.records is None:
            raise FevexRunError(
                "INPUT_UNAVAILABLE", "This app has no record store to carry answers in."
            )
        return self.records()

    # -- the asking side ---------------------------------------------------------------

    async def ask(self, sink: EventSink, request: PendingInput, timeout: float) -> InputAnswer:
        """Show ``request`` on the run and wait for its answer; ``INPUT_TIMEOUT`` when none
        comes within ``timeout`` seconds."""
        store = self._store()
        run_id = sink.run.id
        input_id = new_id("inp")
        expires = time.time() + timeout
        shown = {
            **request.to_json(),
            "id": input_id,
            "expires_at": datetime.fromtimestamp(expires, UTC).isoformat().replace("+00:00", "Z"),
        }
        record = {"run_id": run_id, "status": "pending", "expires": expires}
        if not await store.compare_and_swap(NAMESPACE, input_id, 0, record):
            raise FevexRunError("INPUT_UNAVAILABLE", "The input's record could not be written.")
        woken = self._waiting[input_id] = asyncio.Event()
        opened = self._open.setdefault(run_id, {})
        opened[input_id] = shown
        answer: InputAnswer | None = None
        timed_out: FevexRunError | None = None
        try:
            await sink.emit("input.requested", shown, durable=True, pause=self._pause(run_id))
            try:
                answer = await self._wait(store, input_id, expires, woken)
            except FevexRunError as error:
                if error.code != "INPUT_TIMEOUT":
                    raise
                timed_out = error
        finally:
            self._waiting.pop(input_id, None)
            opened.pop(input_id, None)
            if not opened:
                self._open.pop(run_id, None)
            if answer is None and timed_out is None:
                # Cancelled, or the lease lost: nobody may answer it any more.
                with contextlib.suppress(Exception):
                    await asyncio.shield(_close(store, input_id, "abandoned"))
        pause = self._pause(run_id)
        if answer is None:
            assert timed_out is not None
            await sink.emit("input.expired", {"input_id": input_id}, durable=True, pause=pause)
            raise timed_out
        answered = {"input_id": input_id, "action": answer.action, "actor": dict(answer.actor)}
        await sink.emit("input.answered", answered, durable=True, pause=pause)
        return answer

    def _pause(self, run_id: str) -> dict[str, Any] | None:
        opened = self._open.get(run_id)
        return {"reason": "input", "inputs": list(opened.values())} if opened else None

    async def _wait(
        self, store: RecordStore, input_id: str, expires: float, woken: asyncio.Event
    ) -> InputAnswer:
        while True:
            found = await store.read(NAMESPACE, input_id)
            if found is not None and found.value.get("status") == "answered":
                taken = await _take(store, found)
                if taken is not None:
                    return taken
                continue
            left = expires - time.time()
            if left <= 0:
                if await _close(store, input_id, "expired"):
                    raise FevexRunError(
                        "INPUT_TIMEOUT",
                        "Nobody answered the request in time.",
                        recoverable=True,
                        details={"input_id": input_id},
                    )
                continue  # answered meanwhile: taken on the next read
            woken.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), min(self.poll_interval, left))

    # -- the answering side ------------------------------------------------------------

    async def answer(self, run: AgentRun, answer: InputAnswer) -> None:
        """Deliver ``answer`` to the tool call of ``run`` that waits for it, wherever it
        runs, and return once that call took it; ``INPUT_NOT_PENDING`` when nobody waits
        for it (unknown, answered, expired, or its process stopped), ``INPUT_INVALID``
        when the content does not match the request's schema."""
        pending = {item.id: item for item in run.inputs}.get(answer.input_id)
        if pending is None:
            raise _not_pending(run.id, answer.input_id, f"run {run.id} is {run.status}")
        content = answer.content
        if answer.action == "accept" and content is not None:
            content = checked_content(content, pending.schema)
        store = self._store()
        found = await store.read(NAMESPACE, answer.input_id)
        if (
            found is None
            or found.value.get("run_id") != run.id
            or found.value.get("status") != "pending"
            or not time.time() < float(found.value.get("expires", 0))
        ):
            raise _not_pending(run.id, answer.input_id, "it was answered or expired")
        given = {
            **found.value,
            "status": "answered",
            "answer": {"action": answer.action, "actor": dict(answer.actor), "content": content},
        }
        if not await store.compare_and_swap(NAMESPACE, answer.input_id, found.revision, given):
            raise _not_pending(run.id, answer.input_id, "it was answered or expired")
        woken = self._waiting.get(answer.input_id)
        if woken is not None:
            woken.set()
        await self._claimed(store, run.id, answer.input_id, found.revision + 1)

    async def settled(
        self, read_run: Callable[[str], Awaitable[AgentRun]], run_id: str, input_id: str
    ) -> AgentRun:
        """The run once it no longer lists ``input_id``: the asker records the answer on
        the run right after it took it (or as the run stands after ``claim_timeout``)."""
        deadline = time.monotonic() + self.claim_timeout
        while True:
            run = await read_run(run_id)
            if all(item.id != input_id for item in run.inputs) or time.monotonic() >= deadline:
                return run
            await asyncio.sleep(self.poll_interval / 2)

    async def _claimed(self, store: RecordStore, run_id: str, input_id: str, revision: int) -> None:
        """Wait for the asker to take the answer at ``revision``; unclaim it when it does
        not within ``claim_timeout``."""
        deadline = time.monotonic() + self.claim_timeout
        while True:
            found = await store.read(NAMESPACE, input_id)
            if found is None or found.revision != revision:
                return  # taken (received); nothing else moves an answered record
            if time.monotonic() >= deadline:
                unclaimed = {"run_id": run_id, "status": "unclaimed"}
                if await store.compare_and_swap(NAMESPACE, input_id, revision, unclaimed):
                    raise _not_pending(
                        run_id, input_id, "the process that ran its tool call stopped waiting"
                    )
                return
            await asyncio.sleep(self.poll_interval / 2)


async def _take(store: RecordStore, found: StoredRecord) -> InputAnswer | None:
    """The answer ``found`` holds, once this asker's swap to ``received`` wins (which
    drops the content from the record); ``None`` when it lost (the answerer unclaimed it)."""
    given = found.value.get("answer")
    received = {"run_id": found.value.get("run_id"), "status": "received"}
    if not isinstance(given, Mapping) or not await store.compare_and_swap(
        NAMESPACE, found.key, found.revision, received
    ):
        return None
    content = given.get("content")
    actor = given.get("actor")
    return InputAnswer(
        found.key,
        given.get("action", "cancel"),
        dict(actor) if isinstance(actor, Mapping) else {},
        dict(content) if isinstance(content, Mapping) else None,
    )


async def _close(store: RecordStore, input_id: str, status: str) -> bool:
    """Move a pending request to ``status``; ``False`` when it is not pending any more."""
    found = await store.read(NAMESPACE, input_id)
    if found is None or found.value.get("status") != "pending":
        return False
    closed = {"run_id": found.value.get("run_id"), "status": status}
    return await store.compare_and_swap(NAMESPACE, input_id, found.revision, closed)


def _not_pending(run_id: str, input_id: str, why: str) -> FevexRunError:
    return FevexRunError(
        "INPUT_NOT_PENDING",
        f"Nobody waits for input {input_id[:100]!r} any more ({why}); nothing was changed.",
        details={"run_id": run_id, "input_id": input_id[:100]},
    )
