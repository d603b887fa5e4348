"""``FevexClient`` and ``AsyncFevexClient``: the run protocol from Python, over httpx2.

Both have the same methods with the same arguments and typed results (``AgentRun``,
``RunEvent``, ``Session``, :class:`RunPage`); an error response raises
:class:`~fevex.http.FevexHttpError` with the server's code. ``observe_run`` yields a run's
events as they are committed, reconnecting by itself with ``Last-Event-ID`` when the
connection drops (the server restarted, a proxy cut it), each event exactly once and in
order, until the run has ended.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import Any, Self

try:
    import httpx2
except ImportError as error:  # pragma: no cover - depends on the environment
    from fevex.plugins.install_hints import install_command

    raise ImportError(f"The fevex HTTP clients need httpx2: {install_command('http')}") from error

from fevex.events import RunEvent
from fevex.http.client_calls import RECONNECT_FOR, Call, Observation, RunPage, call
from fevex.http.client_calls import error_from_response as _error
from fevex.http.request_guard import REQUEST_HEADER
from fevex.runtime.records import AgentRun, RunStatus, Session

__all__ = ["AsyncFevexClient", "FevexClient"]

DEFAULT_TIMEOUT = 30.0
# A stream that sends nothing, not even the server's heartbeat, for this long is dead.
STREAM_READ_TIMEOUT = 60.0
# Failures after which observe_run reconnects: the connection, or the server's answer.
_DROPS = (httpx2.TransportError,)


def _retryable(status: int) -> bool:
    return status >= 500


def _stream_timeout(timeout: float) -> httpx2.Timeout:
    return httpx2.Timeout(timeout, read=max(timeout, STREAM_READ_TIMEOUT))


class FevexClient:
    """A blocking client of a fevex HTTP server at ``base_url``; ``headers`` go with every
    request (credentials: ``{"Authorization": "Bearer ..."}``). Close it, or use it as a
    context manager. ``transport`` replaces the network (an ``httpx2.MockTransport``)."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        reconnect_for: float = RECONNECT_FOR,
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        self._http = httpx2.Client(
            base_url=base_url, headers=_headers(headers), timeout=timeout, transport=transport
        )
        self._timeout = timeout
        self.reconnect_for = reconnect_for

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call) -> Any:
        response = self._http.request(call.method, call.path, json=call.json, params=call.params)
        if response.status_code >= 400:
            raise _error(response.status_code, response.content)
        return call.parse(response.json())

    def start_agent(
        self,
        agent: str,
        input: Any,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> AgentRun:
        """Start a run of ``agent``; it goes on in the server. Its context is this
        client's, as the server authenticates it."""
        body = {"input": input, "session_id": session_id, "timeout": timeout}
        run: AgentRun = self._send(call("start_agent", {"agent_name": agent}, body=body))
        return run

    def start_workflow(
        self, workflow: str, input: Any = None, *, timeout: float | None = None
    ) -> AgentRun:
        body = {"input": input, "timeout": timeout}
        run: AgentRun = self._send(call("start_workflow", {"workflow_name": workflow}, body=body))
        return run

    def start_team(self, team: str, input: Any = None, *, timeout: float | None = None) -> AgentRun:
        body = {"input": input, "timeout": timeout}
        run: AgentRun = self._send(call("start_team", {"team_name": team}, body=body))
        return run

    def get_run(self, run_id: str) -> AgentRun:
        run: AgentRun = self._send(call("get_run", {"run_id": run_id}))
        return run

    def get_run_view(self, run_id: str) -> dict[str, Any]:
        """The run as the console draws it (``GET /v1/runs/{id}/view``), plain JSON: the
        four layers of ``project_run`` (``stream``, ``state``, ``messages``, ``turn``), the
        ``spans`` of the run and its descendants, and their ``totals``."""
        view: dict[str, Any] = self._send(call("get_run_view", {"run_id": run_id}))
        return view

    def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        kind: str | None = None,
        name: str | None = None,
        session_id: str | None = None,
        parent_run_id: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> RunPage:
        """A page of this caller's runs, newest first; pass ``next_after`` as ``after``
        for the next one."""
        filters = {
            "status": status,
            "kind": kind,
            "name": name,
            "session_id": session_id,
            "parent_run_id": parent_run_id,
            "limit": limit,
            "after": after,
        }
        page: RunPage = self._send(call("list_runs", {}, query=filters))
        return page

    def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str = "asc",
    ) -> list[RunEvent]:
        """At most ``limit`` (default and at most: the server's page size) events of a run
        by sequence, after the event ``after``."""
        query = {"after": after, "limit": limit, "order": order}
        path = {"run_id": run_id}
        events: list[RunEvent] = self._send(call("list_events", path, query=query))
        return events

    def observe_run(self, run_id: str, *, after: str | None = None) -> Iterator[RunEvent]:
        """Yield the run's events after ``after`` as they are committed, until it has
        ended; reconnects after a drop and never yields an event twice. Raises
        ``FevexHttpError`` for a refusal (an unknown run, a bad cursor), and once the
        server has not answered for ``reconnect_for`` seconds, the last network error."""
        observation = Observation(after, self.reconnect_for)
        path = call("observe_run", {"run_id": run_id}).path
        while True:
            try:
                with self._http.sse(
                    path, headers=observation.headers(), timeout=_stream_timeout(self._timeout)
                ) as source:
                    status = source.response.status_code
                    if status >= 400:
                        source.response.read()
                        error = _error(status, source.response.content)
                        if not _retryable(status):
                            raise error
                        raise httpx2.TransportError(str(error))
                    observation.connected()
                    for frame in source:
                        event = observation.received(frame.event, frame.data, frame.id, frame.retry)
                        if event is not None:
                            yield event
                        if observation.ended:
                            return
            except _DROPS:
                delay = observation.delay_after_drop(time.monotonic())
                if delay is None:
                    raise
                time.sleep(delay)
                continue
            # Closed without its end frame: cut on the way; continue where it stopped.
            delay = observation.delay_after_drop(time.monotonic())
            if delay is None:
                raise httpx2.RemoteProtocolError("The event stream kept closing early.")
            time.sleep(delay)

    def resume_run(
        self,
        run_id: str,
        *,
        approval_id: str | None = None,
        decision: str | None = None,
        reason: str | None = None,
        input_id: str | None = None,
        action: str | None = None,
        content: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AgentRun:
        """Decide the approval ``approval_id`` (``"approve"`` or ``"reject"``, a rejection
        with the ``reason`` the model reads; the actor is this client's), or, without one,
        continue a run whose wait is over. Returns once the run is taken over; it goes on
        in the server. Or answer the pending input ``input_id`` of a running run:
        ``action`` ``"accept"`` with ``content``, ``"decline"`` or ``"cancel"`` (see
        ``Fevex.resume_run``); it returns once the waiting tool call took the answer."""
        body = {
            "approval_id": approval_id,
            "decision": decision,
            "reason": reason,
            "input_id": input_id,
            "action": action,
            "content": None if content is None else dict(content),
            "timeout": timeout,
        }
        run: AgentRun = self._send(call("resume_run", {"run_id": run_id}, body=body))
        return run

    def recover_run(self, run_id: str, *, timeout: float | None = None) -> AgentRun:
        body = {"timeout": timeout}
        run: AgentRun = self._send(call("recover_run", {"run_id": run_id}, body=body))
        return run

    def cancel_run(self, run_id: str, *, timeout: float | None = None) -> AgentRun:
        """Cancel a run and return it as it stands after (see ``Fevex.cancel_run``)."""
        body = {"timeout": timeout}
        run: AgentRun = self._send(call("cancel_run", {"run_id": run_id}, body=body))
        return run

    def send_event(
        self, run_id: str, name: str, payload: Any = None, *, timeout: float | None = None
    ) -> AgentRun:
        body = {"name": name, "payload": payload, "timeout": timeout}
        run: AgentRun = self._send(call("send_event", {"run_id": run_id}, body=body))
        return run

    def get_session(self, session_id: str) -> Session:
        session: Session = self._send(call("get_session", {"session_id": session_id}))
        return session

    def compact_session(
        self, session_id: str, summary: str, *, revision: int | None = None
    ) -> Session:
        body = {"summary": summary, "revision": revision}
        path = {"session_id": session_id}
        session: Session = self._send(call("compact_session", path, body=body))
        return session


class AsyncFevexClient:
    """The same as :class:`FevexClient`, with coroutine methods; ``observe_run`` is an
    async iterator. Use it as ``async with`` or ``await client.aclose()``."""

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        reconnect_for: float = RECONNECT_FOR,
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx2.AsyncClient(
            base_url=base_url, headers=_headers(headers), timeout=timeout, transport=transport
        )
        self._timeout = timeout
        self.reconnect_for = reconnect_for

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call) -> Any:
        response = await self._http.request(
            call.method, call.path, json=call.json, params=call.params
        )
        if response.status_code >= 400:
            raise _error(response.status_code, response.content)
        return call.parse(response.json())

    async def start_agent(
        self,
        agent: str,
        input: Any,
        *,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> AgentRun:
        body = {"input": input, "session_id": session_id, "timeout": timeout}
        run: AgentRun = await self._send(call("start_agent", {"agent_name": agent}, body=body))
        return run

    async def start_workflow(
        self, workflow: str, input: Any = None, *, timeout: float | None = None
    ) -> AgentRun:
        body = {"input": input, "timeout": timeout}
        path = {"workflow_name": workflow}
        run: AgentRun = await self._send(call("start_workflow", path, body=body))
        return run

    async def start_team(
        self, team: str, input: Any = None, *, timeout: float | None = None
    ) -> AgentRun:
        body = {"input": input, "timeout": timeout}
        run: AgentRun = await self._send(call("start_team", {"team_name": team}, body=body))
        return run

    async def get_run(self, run_id: str) -> AgentRun:
        run: AgentRun = await self._send(call("get_run", {"run_id": run_id}))
        return run

    async def get_run_view(self, run_id: str) -> dict[str, Any]:
        """The run as the console draws it (``GET /v1/runs/{id}/view``), plain JSON: the
        four layers of ``project_run`` (``stream``, ``state``, ``messages``, ``turn``), the
        ``spans`` of the run and its descendants, and their ``totals``."""
        view: dict[str, Any] = await self._send(call("get_run_view", {"run_id": run_id}))
        return view

    async def list_runs(
        self,
        *,
        status: RunStatus | None = None,
        kind: str | None = None,
        name: str | None = None,
        session_id: str | None = None,
        parent_run_id: str | None = None,
        limit: int | None = None,
        after: str | None = None,
    ) -> RunPage:
        filters = {
            "status": status,
            "kind": kind,
            "name": name,
            "session_id": session_id,
            "parent_run_id": parent_run_id,
            "limit": limit,
            "after": after,
        }
        page: RunPage = await self._send(call("list_runs", {}, query=filters))
        return page

    async def list_events(
        self,
        run_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str = "asc",
    ) -> list[RunEvent]:
        query = {"after": after, "limit": limit, "order": order}
        path = {"run_id": run_id}
        events: list[RunEvent] = await self._send(call("list_events", path, query=query))
        return events

    async def observe_run(
        self, run_id: str, *, after: str | None = None
    ) -> AsyncIterator[RunEvent]:
        """See :meth:`FevexClient.observe_run`."""
        observation = Observation(after, self.reconnect_for)
        path = call("observe_run", {"run_id": run_id}).path
        loop = asyncio.get_running_loop()
        while True:
            try:
                async with self._http.sse(
                    path, headers=observation.headers(), timeout=_stream_timeout(self._timeout)
                ) as source:
                    status = source.response.status_code
                    if status >= 400:
                        await source.response.aread()
                        error = _error(status, source.response.content)
                        if not _retryable(status):
                            raise error
                        raise httpx2.TransportError(str(error))
                    observation.connected()
                    async for frame in source:
                        event = observation.received(frame.event, frame.data, frame.id, frame.retry)
                        if event is not None:
                            yield event
                        if observation.ended:
                            return
            except _DROPS:
                delay = observation.delay_after_drop(loop.time())
                if delay is None:
                    raise
                await asyncio.sleep(delay)
                continue
            delay = observation.delay_after_drop(loop.time())
            if delay is None:
                raise httpx2.RemoteProtocolError("The event stream kept closing early.")
            await asyncio.sleep(delay)

    async def resume_run(
        self,
        run_id: str,
        *,
        approval_id: str | None = None,
        decision: str | None = None,
        reason: str | None = None,
        input_id: str | None = None,
        action: str | None = None,
        content: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> AgentRun:
        body = {
            "approval_id": approval_id,
            "decision": decision,
            "reason": reason,
            "input_id": input_id,
            "action": action,
            "content": None if content is None else dict(content),
            "timeout": timeout,
        }
        run: AgentRun = await self._send(call("resume_run", {"run_id": run_id}, body=body))
        return run

    async def recover_run(self, run_id: str, *, timeout: float | None = None) -> AgentRun:
        body = {"timeout": timeout}
        run: AgentRun = await self._send(call("recover_run", {"run_id": run_id}, body=body))
        return run

    async def cancel_run(self, run_id: str, *, timeout: float | None = None) -> AgentRun:
        body = {"timeout": timeout}
        run: AgentRun = await self._send(call("cancel_run", {"run_id": run_id}, body=body))
        return run

    async def send_event(
        self, run_id: str, name: str, payload: Any = None, *, timeout: float | None = None
    ) -> AgentRun:
        body = {"name": name, "payload": payload, "timeout": timeout}
        run: AgentRun = await self._send(call("send_event", {"run_id": run_id}, body=body))
        return run

    async def get_session(self, session_id: str) -> Session:
        session: Session = await self._send(call("get_session", {"session_id": session_id}))
        return session

    async def compact_session(
        self, session_id: str, summary: str, *, revision: int | None = None
    ) -> Session:
        body = {"summary": summary, "revision": revision}
        path = {"session_id": session_id}
        session: Session = await self._send(call("compact_session", path, body=body))
        return session


def _headers(given: Mapping[str, str] | None) -> dict[str, str]:
    # A server with the console on refuses state-changing requests without it (CSRF).
    return {REQUEST_HEADER: "1", **(given or {})}
