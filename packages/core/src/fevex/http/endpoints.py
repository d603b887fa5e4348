"""The endpoints of the run protocol under ``/v1``: one method per operation of the table
(:mod:`fevex.http.operations`), each given its request already read and checked by its
route (:mod:`fevex.http.routes`), and each keeping to the caller's namespace.

A run or session of another namespace is answered exactly as one that does not exist
(404), so that a caller cannot even learn that it exists; so is a path id no store could
hold (longer than any id, or with a NUL or a lone surrogate), which is never looked up.
Commands that continue a run (resume, recover, send an event) return once the run is taken
over and let it go on in the server (202); its progress is observed over SSE. Starting
returns the new run (201).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from starlette.responses import JSONResponse, Response, StreamingResponse

from fevex.app import Fevex
from fevex.errors import FevexError, FevexRunError
from fevex.http.authentication import same_namespace
from fevex.http.event_stream import run_event_frames
from fevex.http.request_body import invalid
from fevex.http.routes import Incoming
from fevex.http.run_view import run_view_json
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import AgentRun, RunStatus, Session

__all__ = ["Endpoints"]

# How many of the store's pages one listing reads at most while it skips other namespaces'
# runs; the answer's ``next_after`` continues where it stopped.
RUN_PAGES_SCANNED = 10


@dataclass(frozen=True, slots=True)
class Endpoints:
    fevex: Fevex
    event_page_size: int
    poll_interval: float
    heartbeat: float
    document: Mapping[str, Any]

    # -- helpers ------------------------------------------------------------------------

    async def _run(self, call: Incoming) -> AgentRun:
        """The run the path names, if it is the caller's."""
        run_id = call.path["run_id"]
        missing = FevexRunError("RUN_NOT_FOUND", f"There is no run {run_id!r}.")
        try:
            run = await self.fevex.get_run(run_id)
        except FevexError as error:
            if error.code == "RUN_NOT_FOUND":
                raise missing from None
            raise
        if not same_namespace(run.context, call.caller):
            raise missing
        return run

    async def _session(self, session_id: str, caller: ExecutionContext) -> Session:
        """The session, if the runs that used it are the caller's: a session belongs to the
        namespace of its latest run."""
        missing = FevexRunError("SESSION_NOT_FOUND", f"There is no session {session_id!r}.")
        latest = await self.fevex.list_runs(session_id=session_id, limit=1)
        if not latest or not same_namespace(latest[0].context, caller):
            raise missing
        try:
            return await self.fevex.get_session(session_id)
        except FevexError as error:
            if error.code == "SESSION_NOT_FOUND":
                raise missing from None
            raise

    async def _check_session_for_start(
        self, session_id: str | None, caller: ExecutionContext
    ) -> None:
        """A run may continue a session of the caller's, or open a new one under an id
        nobody has used; never continue another namespace's conversation."""
        if session_id is None:
            return
        if await self.fevex.run_store.get_session(session_id) is None:
            return
        await self._session(session_id, caller)

    # -- the document ---------------------------------------------------------------------

    async def get_openapi_document(self, call: Incoming) -> Response:
        return JSONResponse(self.document)

    # -- starting runs --------------------------------------------------------------

    async def start_agent(self, call: Incoming) -> Response:
        body = call.body
        await self._check_session_for_start(body.get("session_id"), call.caller)
        run = await self.fevex.start_agent(
            call.path["agent_name"],
            body["input"],
            session_id=body.get("session_id"),
            timeout=body.get("timeout"),
            context=call.caller,
        )
        return _run_response(run, 201)

    async def start_workflow(self, call: Incoming) -> Response:
        run = await self.fevex.start_workflow(
            call.path["workflow_name"],
            call.body.get("input"),
            timeout=call.body.get("timeout"),
            context=call.caller,
        )
        return _run_response(run, 201)

    async def start_team(self, call: Incoming) -> Response:
        run = await self.fevex.start_team(
            call.path["team_name"],
            call.body.get("input"),
            timeout=call.body.get("timeout"),
            context=call.caller,
        )
        return _run_response(run, 201)

    # -- reading runs -----------------------------------------------------------------

    async def get_run(self, call: Incoming) -> Response:
        return _run_response(await self._run(call), 200)

    async def list_runs(self, call: Incoming) -> Response:
        """A page of the caller's runs, newest first. Other namespaces' runs are skipped in
        the server, reading at most ``RUN_PAGES_SCANNED`` of the store's pages: a page may
        then hold fewer than ``limit`` runs, and ``next_after`` is where the next one starts
        (``null``: there is no more)."""
        query = call.parameters
        limit: int = query["limit"]
        filters = {name: query[name] for name in ("kind", "name", "session_id", "parent_run_id")}
        position: str | None = query["after"]
        found: list[AgentRun] = []
        next_after: str | None = None
        for _ in range(RUN_PAGES_SCANNED):
            page = await self.fevex.list_runs(
                status=cast(RunStatus | None, query["status"]),
                limit=limit,
                after=position,
                **filters,
            )
            for run in page:
                position = run.id
                if same_namespace(run.context, call.caller):
                    found.append(run)
                    if len(found) == limit:
                        break
            if len(found) == limit:
                next_after = found[-1].id
                break
            if len(page) < limit:
                next_after = None
                break
            next_after = position
        return JSONResponse({"runs": [run.to_json() for run in found], "next_after": next_after})

    async def get_run_view(self, call: Incoming) -> Response:
        run = await self._run(call)

        def visible(other: AgentRun) -> bool:
            return same_namespace(other.context, call.caller)

        return JSONResponse(await run_view_json(self.fevex, run, visible))

    async def list_events(self, call: Incoming) -> Response:
        run = await self._run(call)
        limit: int = call.parameters["limit"]
        order = call.parameters["order"]
        events = await self.fevex.list_events(
            run.id,
            after=call.parameters["after"],
            limit=limit,
            order="asc" if order == "asc" else "desc",
        )
        next_after = events[-1].id if order == "asc" and len(events) == limit else None
        return JSONResponse(
            {"events": [event.to_json() for event in events], "next_after": next_after}
        )

    async def observe_run(self, call: Incoming) -> Response:
        run = await self._run(call)
        # A reconnecting client's Last-Event-ID is where it stopped: it wins over ?after=.
        after: str | None = call.parameters["Last-Event-ID"] or call.parameters["after"]
        if after is not None:
            # Refused before the stream starts, while an error can still be a status.
            await self.fevex.list_events(run.id, after=after, limit=1)
        frames = run_event_frames(
            self.fevex,
            run.id,
            after,
            page_size=self.event_page_size,
            poll_interval=self.poll_interval,
            heartbeat=self.heartbeat,
        )
        return StreamingResponse(
            frames,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    # -- controlling runs ---------------------------------------------------------------

    async def resume_run(self, call: Incoming) -> Response:
        body = call.body
        run = await self._run(call)
        if body.get("input_id") is not None or body.get("action") is not None:
            return await self._answer_input(call, run.id)
        if body.get("content") is not None:
            raise invalid("content goes with input_id and the action 'accept'.")
        approval_id, verdict = body.get("approval_id"), body.get("decision")
        if (approval_id is None) != (verdict is None):
            raise invalid("approval_id and decision go together.")
        if body.get("reason") is not None and verdict != "reject":
            raise invalid("A reason goes with a rejection.")
        decision = None
        if approval_id is not None:
            decision = {
                "approval_id": approval_id,
                "decision": verdict,
                "actor": _actor(call.caller, "deciding an approval"),
            }
            if body.get("reason") is not None:
                decision["reason"] = body["reason"]
        resumed = await self.fevex.resume_run(
            run.id, decision, timeout=body.get("timeout"), wait=False
        )
        return _run_response(resumed, 202)

    async def _answer_input(self, call: Incoming, run_id: str) -> Response:
        body = call.body
        if body.get("approval_id") is not None or body.get("decision") is not None:
            raise invalid("An input's answer and an approval's decision go in two requests.")
        if body.get("input_id") is None or body.get("action") is None:
            raise invalid("input_id and action go together.")
        answer = {
            "type": "input",
            "input_id": body["input_id"],
            "action": body["action"],
            "content": body.get("content"),
            "actor": _actor(call.caller, "answering an input"),
        }
        answered = await self.fevex.resume_run(run_id, answer, wait=False)
        return _run_response(answered, 202)

    async def recover_run(self, call: Incoming) -> Response:
        run = await self._run(call)
        recovered = await self.fevex.recover_run(
            run.id,
            actor=_actor(call.caller, "recovering a run"),
            timeout=call.body.get("timeout"),
            wait=False,
        )
        return _run_response(recovered, 202)

    async def send_event(self, call: Incoming) -> Response:
        run = await self._run(call)
        actor = None if call.caller.actor is None else dict(call.caller.actor)
        continued = await self.fevex.send_event(
            run.id,
            call.body["name"],
            call.body.get("payload"),
            actor=actor,
            timeout=call.body.get("timeout"),
            wait=False,
        )
        return _run_response(continued, 202)

    async def cancel_run(self, call: Incoming) -> Response:
        run = await self._run(call)
        cancelled = await self.fevex.cancel_run(run.id, timeout=call.body.get("timeout"))
        return _run_response(cancelled, 200)

    # -- sessions -------------------------------------------------------------------------

    async def get_session(self, call: Incoming) -> Response:
        session = await self._session(call.path["session_id"], call.caller)
        return JSONResponse(session.to_json())

    async def compact_session(self, call: Incoming) -> Response:
        session = await self._session(call.path["session_id"], call.caller)
        compacted = await self.fevex.compact_session(
            session.id, call.body["summary"], revision=call.body.get("revision")
        )
        return JSONResponse(compacted.to_json())


def _actor(caller: ExecutionContext, purpose: str) -> dict[str, Any]:
    if caller.actor is None:
        raise FevexError("FORBIDDEN", f"{purpose.capitalize()} needs an authenticated actor.")
    return dict(caller.actor)


def _run_response(run: AgentRun, status: int) -> Response:
    return JSONResponse(run.to_json(), status_code=status)
