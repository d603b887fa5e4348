"""The endpoints of the run protocol under ``/v1``: one method per operation, each reading
the caller's context first and keeping to the caller's namespace.

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
from typing import Any, cast, get_args

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from fevex._ground.storable_text import is_storable
from fevex.app import Fevex
from fevex.errors import FevexError, FevexRunError
from fevex.http.authentication import Authenticate, authenticated_context, same_namespace
from fevex.http.event_stream import run_event_frames
from fevex.http.request_body import (
    MAX_ID_LENGTH,
    Field,
    any_json,
    check_query,
    choice,
    cursor,
    identifier,
    invalid,
    non_empty_text,
    optional,
    positive_seconds,
    query_cursor,
    query_integer,
    query_text,
    read_json_body,
    text,
    whole_number,
)
from fevex.runtime.context import ExecutionContext
from fevex.runtime.records import AgentRun, RunStatus, Session

__all__ = ["Endpoints"]

RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
MAX_RUN_PAGE = 1000
DEFAULT_RUN_PAGE = 50
# How many of the store's pages one listing reads at most while it skips other namespaces'
# runs; the answer's ``next_after`` continues where it stopped.
RUN_PAGES_SCANNED = 10

START_FIELDS: dict[str, Field] = {
    "input": any_json,
    "session_id": optional(identifier),
    "timeout": optional(positive_seconds),
}
TIMEOUT_FIELDS: dict[str, Field] = {"timeout": optional(positive_seconds)}


@dataclass(frozen=True, slots=True)
class Endpoints:
    fevex: Fevex
    authenticate: Authenticate | None
    allow_anonymous: bool
    event_page_size: int
    poll_interval: float
    heartbeat: float
    max_body_size: int

    # -- helpers ------------------------------------------------------------------------

    async def _caller(self, request: Request) -> ExecutionContext:
        return await authenticated_context(
            request, self.authenticate, allow_anonymous=self.allow_anonymous
        )

    async def _body(
        self, request: Request, fields: Mapping[str, Field], required: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        return await read_json_body(request, self.max_body_size, fields, required)

    async def _run(self, request: Request, caller: ExecutionContext) -> AgentRun:
        """The run the path names, if it is the caller's."""
        run_id = _path_id(request, "run_id")
        missing = FevexRunError("RUN_NOT_FOUND", f"There is no run {run_id!r}.")
        try:
            run = await self.fevex.get_run(run_id)
        except FevexError as error:
            if error.code == "RUN_NOT_FOUND":
                raise missing from None
            raise
        if not same_namespace(run.context, caller):
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

    # -- starting runs --------------------------------------------------------------

    async def start_agent(self, request: Request) -> Response:
        caller = await self._caller(request)
        body = await self._body(request, START_FIELDS, frozenset({"input"}))
        await self._check_session_for_start(body.get("session_id"), caller)
        run = await self.fevex.start_agent(
            _path_id(request, "agent_name"),
            body["input"],
            session_id=body.get("session_id"),
            timeout=body.get("timeout"),
            context=caller,
        )
        return _run_response(run, 201)

    async def start_workflow(self, request: Request) -> Response:
        caller = await self._caller(request)
        body = await self._body(request, {"input": any_json, **TIMEOUT_FIELDS})
        run = await self.fevex.start_workflow(
            _path_id(request, "workflow_name"),
            body.get("input"),
            timeout=body.get("timeout"),
            context=caller,
        )
        return _run_response(run, 201)

    async def start_team(self, request: Request) -> Response:
        caller = await self._caller(request)
        body = await self._body(request, {"input": any_json, **TIMEOUT_FIELDS})
        run = await self.fevex.start_team(
            _path_id(request, "team_name"),
            body.get("input"),
            timeout=body.get("timeout"),
            context=caller,
        )
        return _run_response(run, 201)

    # -- reading runs -----------------------------------------------------------------

    async def get_run(self, request: Request) -> Response:
        caller = await self._caller(request)
        return _run_response(await self._run(request, caller), 200)

    async def list_runs(self, request: Request) -> Response:
        """A page of the caller's runs, newest first. Other namespaces' runs are skipped in
        the server, reading at most ``RUN_PAGES_SCANNED`` of the store's pages: a page may
        then hold fewer than ``limit`` runs, and ``next_after`` is where the next one starts
        (``null``: there is no more)."""
        caller = await self._caller(request)
        params = request.query_params
        check_query(
            params,
            frozenset(("status", "kind", "name", "session_id", "parent_run_id", "limit", "after")),
        )
        status = query_text(params, "status")
        if status is not None and status not in RUN_STATUSES:
            raise invalid(f"status must be one of {list(RUN_STATUSES)}.")
        limit = query_integer(params, "limit", 1, MAX_RUN_PAGE) or DEFAULT_RUN_PAGE
        filters = {
            name: query_text(params, name)
            for name in ("kind", "name", "session_id", "parent_run_id")
        }
        position = query_cursor(params, "after")
        found: list[AgentRun] = []
        next_after: str | None = None
        for _ in range(RUN_PAGES_SCANNED):
            page = await self.fevex.list_runs(
                status=cast(RunStatus | None, status),
                limit=limit,
                after=position,
                **filters,
            )
            for run in page:
                position = run.id
                if same_namespace(run.context, caller):
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

    async def list_events(self, request: Request) -> Response:
        caller = await self._caller(request)
        params = request.query_params
        check_query(params, frozenset(("after", "limit", "order")))
        run = await self._run(request, caller)
        limit = query_integer(params, "limit", 1, self.event_page_size) or self.event_page_size
        order = query_text(params, "order") or "asc"
        if order not in ("asc", "desc"):
            raise invalid("order must be asc or desc.")
        events = await self.fevex.list_events(
            run.id,
            after=query_cursor(params, "after"),
            limit=limit,
            order="asc" if order == "asc" else "desc",
        )
        next_after = events[-1].id if order == "asc" and len(events) == limit else None
        return JSONResponse(
            {"events": [event.to_json() for event in events], "next_after": next_after}
        )

    async def observe_run(self, request: Request) -> Response:
        caller = await self._caller(request)
        check_query(request.query_params, frozenset(("after",)))
        run = await self._run(request, caller)
        # A reconnecting client's Last-Event-ID is where it stopped: it wins over ?after=.
        last_event_id = request.headers.get("last-event-id")
        if last_event_id:
            after: str | None = cursor(last_event_id)
        else:
            after = query_cursor(request.query_params, "after")
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

    async def resume_run(self, request: Request) -> Response:
        caller = await self._caller(request)
        body = await self._body(
            request,
            {
                "approval_id": optional(identifier),
                "decision": optional(choice("approve", "reject")),
                "reason": optional(text),
                **TIMEOUT_FIELDS,
            },
        )
        run = await self._run(request, caller)
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
                "actor": _actor(caller, "deciding an approval"),
            }
            if body.get("reason") is not None:
                decision["reason"] = body["reason"]
        resumed = await self.fevex.resume_run(
            run.id, decision, timeout=body.get("timeout"), wait=False
        )
        return _run_response(resumed, 202)

    async def recover_run(self, request: Request) -> Response:
        caller = await self._caller(request)
        body = await self._body(request, TIMEOUT_FIELDS)
        run = await self._run(request, caller)
        recovered = await self.fevex.recover_run(
            run.id,
            actor=_actor(caller, "recovering a run"),
            timeout=body.get("timeout"),
            wait=False,
        )
        return _run_response(recovered, 202)

    async def send_event(self, request: Request) -> Response:
        caller = await self._caller(request)
        body = await self._body(
            request,
            {"name": non_empty_text, "payload": any_json, **TIMEOUT_FIELDS},
            frozenset({"name"}),
        )
        run = await self._run(request, caller)
        actor = None if caller.actor is None else dict(caller.actor)
        continued = await self.fevex.send_event(
            run.id,
            body["name"],
            body.get("payload"),
            actor=actor,
            timeout=body.get("timeout"),
            wait=False,
        )
        return _run_response(continued, 202)

    async def cancel_run(self, request: Request) -> Response:
        caller = await self._caller(request)
        body = await self._body(request, TIMEOUT_FIELDS)
        run = await self._run(request, caller)
        return _run_response(await self.fevex.cancel_run(run.id, timeout=body.get("timeout")), 200)

    # -- sessions -------------------------------------------------------------------------

    async def get_session(self, request: Request) -> Response:
        caller = await self._caller(request)
        session = await self._session(_path_id(request, "session_id"), caller)
        return JSONResponse(session.to_json())

    async def compact_session(self, request: Request) -> Response:
        caller = await self._caller(request)
        body = await self._body(
            request,
            {"summary": text, "revision": optional(whole_number)},
            frozenset({"summary"}),
        )
        session = await self._session(_path_id(request, "session_id"), caller)
        compacted = await self.fevex.compact_session(
            session.id, body["summary"], revision=body.get("revision")
        )
        return JSONResponse(compacted.to_json())


# What the path names, by its parameter: the code and noun of one that is not there.
PATH_IDS = {
    "run_id": ("RUN_NOT_FOUND", "run"),
    "session_id": ("SESSION_NOT_FOUND", "session"),
    "agent_name": ("AGENT_NOT_FOUND", "agent"),
    "workflow_name": ("WORKFLOW_NOT_FOUND", "workflow"),
    "team_name": ("TEAM_NOT_FOUND", "team"),
}


def _path_id(request: Request, name: str) -> str:
    value = request.path_params[name]
    assert isinstance(value, str)
    if len(value) > MAX_ID_LENGTH or not is_storable(value):
        code, noun = PATH_IDS[name]
        raise FevexRunError(code, f"There is no {noun} by the name in this path.")
    return value


def _actor(caller: ExecutionContext, purpose: str) -> dict[str, Any]:
    if caller.actor is None:
        raise FevexError("FORBIDDEN", f"{purpose.capitalize()} needs an authenticated actor.")
    return dict(caller.actor)


def _run_response(run: AgentRun, status: int) -> Response:
    return JSONResponse(run.to_json(), status_code=status)
