"""A loopback HTTP server that speaks OpenAI's wire formats, for the tests.

A plain ASGI callable served by uvicorn on 127.0.0.1 in a background thread. Each test
scripts the responses it needs (status, headers, a JSON body or server-sent events, sent
whole or in small byte pieces, optionally held open until the client leaves) and reads
back the requests the SDK sent. The builders below write realistic Responses API events
and Chat Completions chunks.
"""

from __future__ import annotations

import asyncio
import collections
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn

__all__ = [
    "TEST_API_KEY",
    "ChatChunks",
    "LoopbackServer",
    "Recorded",
    "ResponseEvents",
    "Scripted",
    "error_response",
]

TEST_API_KEY = "sk-test-loopback-0123456789"


@dataclass
class Scripted:
    """One scripted HTTP response."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    # Send the body in pieces of this many bytes, each in its own write.
    chunk_size: int | None = None
    # After the body, keep the response open until the client disconnects.
    hold_open: bool = False


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    json: Any


def error_response(
    status: int,
    message: str,
    *,
    code: str | None = None,
    type: str = "invalid_request_error",
    headers: dict[str, str] | None = None,
) -> Scripted:
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return Scripted(
        status=status,
        body=json.dumps(body).encode(),
        content_type="application/json",
        headers=headers or {},
    )


class LoopbackServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scripts: collections.deque[Scripted] = collections.deque()
        self.requests: list[Recorded] = []
        self.disconnected = threading.Event()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        config = uvicorn.Config(
            self,
            lifespan="off",
            http="h11",
            ws="none",
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the loopback server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def reset(self) -> None:
        with self._lock:
            self._scripts.clear()
            self.requests.clear()
        self.disconnected.clear()

    def respond(self, *responses: Scripted) -> None:
        with self._lock:
            self._scripts.extend(responses)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._scripts)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
        with self._lock:
            self.requests.append(
                Recorded(scope["method"], scope["path"], headers, json.loads(body or b"null"))
            )
            script = self._scripts.popleft() if self._scripts else None
        if script is None:
            script = error_response(500, "the test scripted no response for this request")
        await send(
            {
                "type": "http.response.start",
                "status": script.status,
                "headers": [
                    (b"content-type", script.content_type.encode()),
                    *((k.encode(), v.encode()) for k, v in script.headers.items()),
                ],
            }
        )
        size = script.chunk_size or len(script.body) or 1
        for start in range(0, len(script.body), size):
            await send(
                {
                    "type": "http.response.body",
                    "body": script.body[start : start + size],
                    "more_body": True,
                }
            )
            if script.chunk_size:
                # Separate writes, so the client reads the pieces separately.
                await asyncio.sleep(0.002)
        if script.hold_open:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnected.set()
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


class ResponseEvents:
    """The server-sent events of one streamed Responses API call."""

    def __init__(self, response_id: str = "resp_1", model: str = "gpt-test") -> None:
        self.response_id = response_id
        self.model = model
        self.events: list[dict[str, Any]] = []
        self.output: list[dict[str, Any]] = []
        self._emit("response.created", response=self._response("in_progress"))

    def _emit(self, kind: str, **fields: Any) -> None:
        self.events.append({"type": kind, "sequence_number": len(self.events), **fields})

    def _response(self, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": 1_700_000_000,
            "model": self.model,
            "status": status,
            "output": list(self.output),
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "usage": None,
            **fields,
        }

    def reasoning(self, summary: str, encrypted: str = "gAAAA-encrypted") -> ResponseEvents:
        index = len(self.output)
        item = {"id": f"rs_{index}", "type": "reasoning", "summary": []}
        self._emit("response.output_item.added", output_index=index, item=item)
        done = {
            **item,
            "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": encrypted,
        }
        self.output.append(done)
        self._emit("response.output_item.done", output_index=index, item=done)
        return self

    def message(self, *deltas: str, refusal: bool = False) -> ResponseEvents:
        index = len(self.output)
        item_id = f"msg_{index}"
        item = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        self._emit("response.output_item.added", output_index=index, item=item)
        kind = "refusal" if refusal else "output_text"
        part: dict[str, Any] = {"type": kind, kind if refusal else "text": ""}
        if not refusal:
            part["annotations"] = []
        place = {"item_id": item_id, "output_index": index, "content_index": 0}
        self._emit("response.content_part.added", **place, part=part)
        for delta in deltas:
            if refusal:
                self._emit("response.refusal.delta", **place, delta=delta)
            else:
                self._emit("response.output_text.delta", **place, delta=delta, logprobs=[])
        text = "".join(deltas)
        if refusal:
            self._emit("response.refusal.done", **place, refusal=text)
            final = {"type": "refusal", "refusal": text}
        else:
            self._emit("response.output_text.done", **place, text=text, logprobs=[])
            final = {"type": "output_text", "text": text, "annotations": []}
        self._emit("response.content_part.done", **place, part=final)
        done = {**item, "status": "completed", "content": [final]}
        self.output.append(done)
        self._emit("response.output_item.done", output_index=index, item=done)
        return self

    def function_call(self, call_id: str, name: str, *fragments: str) -> ResponseEvents:
        index = len(self.output)
        item_id = f"fc_{index}"
        item = {
            "id": item_id,
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        self._emit("response.output_item.added", output_index=index, item=item)
        for fragment in fragments:
            self._emit(
                "response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=fragment,
            )
        arguments = "".join(fragments)
        self._emit(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        done = {**item, "arguments": arguments, "status": "completed"}
        self.output.append(done)
        self._emit("response.output_item.done", output_index=index, item=done)
        return self

    def completed(
        self,
        input_tokens: int = 12,
        output_tokens: int = 5,
        *,
        cached: int = 0,
        reasoning: int = 0,
    ) -> ResponseEvents:
        usage = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output_tokens,
        }
        self._emit("response.completed", response=self._response("completed", usage=usage))
        return self

    def incomplete(self, reason: str) -> ResponseEvents:
        response = self._response("incomplete", incomplete_details={"reason": reason})
        self._emit("response.incomplete", response=response)
        return self

    def failed(self, code: str, message: str) -> ResponseEvents:
        error = {"code": code, "message": message}
        self._emit("response.failed", response=self._response("failed", error=error))
        return self

    def error(self, code: str | None, message: str) -> ResponseEvents:
        self._emit("error", code=code, message=message, param=None)
        return self

    def body(self) -> bytes:
        return b"".join(_sse(event, event["type"]) for event in self.events)

    def scripted(self, **options: Any) -> Scripted:
        return Scripted(body=self.body(), **options)


class ChatChunks:
    """The server-sent events of one streamed Chat Completions call."""

    def __init__(self, completion_id: str = "chatcmpl-1", model: str = "gpt-test") -> None:
        self.completion_id = completion_id
        self.model = model
        self.frames: list[Any] = []
        self._chunk({"role": "assistant", "content": ""})

    def _chunk(
        self, delta: dict[str, Any] | None, finish_reason: str | None = None, **fields: Any
    ) -> None:
        choices = (
            []
            if delta is None
            else [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}]
        )
        self.frames.append(
            {
                "id": self.completion_id,
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": self.model,
                "choices": choices,
                **fields,
            }
        )

    def content(self, *deltas: str) -> ChatChunks:
        for delta in deltas:
            self._chunk({"content": delta})
        return self

    def reasoning(
        self, *deltas: str, fields: tuple[str, ...] = ("reasoning_content",)
    ) -> ChatChunks:
        """Reasoning deltas, each carried in every one of ``fields`` (servers differ)."""
        for delta in deltas:
            self._chunk(dict.fromkeys(fields, delta))
        return self

    def refusal(self, *deltas: str) -> ChatChunks:
        for delta in deltas:
            self._chunk({"refusal": delta})
        return self

    def tool_call(self, index: int, call_id: str | None, name: str, *fragments: str) -> ChatChunks:
        first: dict[str, Any] = {
            "index": index,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        if call_id is not None:
            first["id"] = call_id
        self._chunk({"tool_calls": [first]})
        for fragment in fragments:
            self._chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        return self

    def finish(self, reason: str = "stop") -> ChatChunks:
        self._chunk({}, finish_reason=reason)
        return self

    def usage(
        self,
        prompt_tokens: int = 12,
        completion_tokens: int = 5,
        *,
        cached: int | None = None,
        reasoning: int | None = None,
        total: bool = True,
    ) -> ChatChunks:
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
        }
        if total:  # some OpenAI-compatible servers leave it out
            usage["total_tokens"] = prompt_tokens + completion_tokens
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        if reasoning is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        self._chunk(None, usage=usage)
        return self

    def error(self, message: str, code: str | None = None) -> ChatChunks:
        self.frames.append({"error": {"message": message, "type": "server_error", "code": code}})
        return self

    def body(self, *, done: bool = True) -> bytes:
        frames = b"".join(_sse(frame) for frame in self.frames)
        return frames + (b"data: [DONE]\n\n" if done else b"")

    def scripted(self, *, done: bool = True, **options: Any) -> Scripted:
        return Scripted(body=self.body(done=done), **options)
