"""A DeepSeek stand-in on loopback, and a guard that keeps every test off the network.

The server is a small ASGI app run by uvicorn on 127.0.0.1: it records each request and
answers with scripted replies in DeepSeek's wire format (``data: {chat.completion.chunk}``
server-sent events ending with ``data: [DONE]``, or a JSON error). The adapter under test
talks to it through the real openai SDK and its HTTP stack.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn

from fevex.plugins import reset_plugins

# -- the network guard ---------------------------------------------------------------


class NetworkGuardError(RuntimeError):
    """A test tried to reach a host that is not on loopback."""


def _is_loopback(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


class NetworkGuard:
    """Lets sockets reach loopback only; anything else raises and fails the test.

    The wrapped functions are attributes so that the test which proves the guard can put
    tripwires in their place: then even a broken guard could not send a packet.
    """

    error_type = NetworkGuardError

    def __init__(self) -> None:
        self.blocked: list[str] = []
        self.real_getaddrinfo: Callable[..., Any] = socket.getaddrinfo
        self.real_connect: Callable[..., Any] = socket.socket.connect
        self.real_connect_ex: Callable[..., Any] = socket.socket.connect_ex

    def _refuse(self, target: str) -> NetworkGuardError:
        self.blocked.append(target)
        return NetworkGuardError(
            f"network guard: the tests may only reach loopback, and something tried {target}"
        )

    def getaddrinfo(self, host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_loopback(host):
            raise self._refuse(host.decode() if isinstance(host, bytes) else str(host))
        return self.real_getaddrinfo(host, *args, **kwargs)

    def _check_address(self, sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            raise self._refuse(str(address[0]))

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        guard = self

        def connect(sock: socket.socket, address: Any) -> Any:
            guard._check_address(sock, address)
            return guard.real_connect(sock, address)

        def connect_ex(sock: socket.socket, address: Any) -> Any:
            guard._check_address(sock, address)
            return guard.real_connect_ex(sock, address)

        monkeypatch.setattr(socket, "getaddrinfo", self.getaddrinfo)
        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[NetworkGuard]:
    guard = NetworkGuard()
    guard.install(monkeypatch)
    yield guard
    if guard.blocked:
        pytest.fail(f"The test tried to leave loopback: {guard.blocked}", pytrace=False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plugin discovery starts over, with only the DeepSeek plugin loaded."""
    monkeypatch.setenv("FEVEX_PLUGINS", "deepseek")
    monkeypatch.delenv("FEVEX_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture(autouse=True)
def _no_ambient_deepseek_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's real key or base URL must never leak into a test.
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("DEEPSEEK_BASE_URL", raising=False)


# -- DeepSeek's wire format ----------------------------------------------------------


class Wire:
    """Builders for DeepSeek's streamed ``chat.completion.chunk`` payloads."""

    DONE = "data: [DONE]\n\n"
    KEEP_ALIVE = ": keep-alive\n\n"

    @staticmethod
    def chunk(
        *,
        content: str | None = None,
        reasoning: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        finish_reason: str | None = None,
        usage: dict[str, Any] | None = None,
        role: str | None = None,
        reasoning_field: str = "reasoning_content",
    ) -> dict[str, Any]:
        delta: dict[str, Any] = {}
        if role is not None:
            delta["role"] = role
        if content is not None:
            delta["content"] = content
        if reasoning is not None:
            delta[reasoning_field] = reasoning
        if tool_calls is not None:
            delta["tool_calls"] = tool_calls
        data: dict[str, Any] = {
            "id": "4f1c9a5e-0b7d-4c43-9a36-2e1f1e0f9c11",
            "object": "chat.completion.chunk",
            "created": 1767225600,
            "model": "deepseek-v4-flash",
            "system_fingerprint": "fp_loopback",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if usage is not None:
            data["usage"] = usage
        return data

    @staticmethod
    def usage_only(usage: dict[str, Any]) -> dict[str, Any]:
        data = Wire.chunk(usage=usage)
        data["choices"] = []
        return data

    @staticmethod
    def usage(
        prompt: int = 31, completion: int = 12, cache_hit: int = 16, reasoning: int | None = 5
    ) -> dict[str, Any]:
        report: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cache_hit},
            "prompt_cache_hit_tokens": cache_hit,
            "prompt_cache_miss_tokens": prompt - cache_hit,
        }
        if reasoning is not None:
            report["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        return report

    @staticmethod
    def call_start(index: int, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
        return {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    @staticmethod
    def call_more(index: int, arguments: str) -> dict[str, Any]:
        return {"index": index, "function": {"arguments": arguments}}

    @staticmethod
    def error(message: str, kind: str = "invalid_request_error", code: str | None = None) -> Any:
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}


@pytest.fixture
def wire() -> type[Wire]:
    return Wire


# -- the loopback server -------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer: an SSE stream, or a JSON body with an error status."""

    status: int = 200
    frames: list[Any] = field(default_factory=list)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    # Write the SSE bytes in pieces of this size, cutting lines and JSON anywhere.
    piece_size: int | None = None
    # After the frames: keep the response open until the client goes away.
    hang: bool = False
    # After the frames: cut the connection without ending the response.
    drop: bool = False


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class LoopbackDeepSeek:
    def __init__(self) -> None:
        self.replies: collections.deque[Reply] = collections.deque()
        self.requests: list[Recorded] = []
        self.disconnected = threading.Event()
        self.url = ""

    def stream(self, *frames: Any, done: bool = True, **options: Any) -> None:
        """Queue an SSE reply; ``done`` appends ``data: [DONE]``."""
        listed = [*frames, Wire.DONE] if done else list(frames)
        self.replies.append(Reply(frames=listed, **options))

    def fail(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.replies.append(Reply(status=status, body=body, headers=headers or {}))

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {key.decode(): value.decode() for key, value in scope["headers"]}
        self.requests.append(
            Recorded(scope["method"], scope["path"], headers, json.loads(raw) if raw else None)
        )
        reply = (
            self.replies.popleft()
            if self.replies
            else Reply(status=500, body=Wire.error("the test scripted no reply", "server_error"))
        )
        if reply.status != 200:
            payload = json.dumps(reply.body).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": reply.status,
                    "headers": [
                        (b"content-type", b"application/json"),
                        *((k.encode(), v.encode()) for k, v in reply.headers.items()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": payload})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        data = b"".join(_frame(frame) for frame in reply.frames)
        size = reply.piece_size or max(len(data), 1)
        for start in range(0, len(data), size):
            await send(
                {
                    "type": "http.response.body",
                    "body": data[start : start + size],
                    "more_body": True,
                }
            )
            if reply.piece_size:
                await asyncio.sleep(0)
        if reply.hang:
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnected.set()
            return
        if reply.drop:
            raise ConnectionAbortedError("the loopback server cuts this stream on purpose")
        await send({"type": "http.response.body", "body": b""})


def _frame(frame: Any) -> bytes:
    if isinstance(frame, str):
        return frame.encode()
    return f"data: {json.dumps(frame)}\n\n".encode()


@pytest.fixture
def deepseek_server() -> Iterator[LoopbackDeepSeek]:
    app = LoopbackDeepSeek()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    config = uvicorn.Config(
        app,
        lifespan="off",
        http="h11",
        ws="none",
        log_level="critical",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the loopback DeepSeek server did not start")
        time.sleep(0.01)
    app.url = f"http://127.0.0.1:{port}"
    yield app
    server.should_exit = True
    thread.join(timeout=10)
    listener.close()


# -- driving a model -----------------------------------------------------------------


@dataclass
class Step:
    deltas: list[str]
    result: Any


async def _drain(model: Any, model_input: Any) -> Step:
    """Stream one step through the runtime's own contract reader."""
    from fevex.models import ModelStreamReader

    reader = ModelStreamReader()
    deltas = []
    async for event in model.stream(model_input):
        recorded = reader.accept(event)
        if recorded is not None and recorded[0] == "model.output.delta":
            deltas.append(recorded[1]["delta"])
    return Step(deltas, reader.finish())


@pytest.fixture
def drain() -> Callable[[Any, Any], Any]:
    return _drain


@pytest.fixture
async def deepseek(deepseek_server: LoopbackDeepSeek) -> Any:
    """``create_deepseek`` bound to the loopback server; models are closed afterwards."""
    from fevex_deepseek import create_deepseek

    models: list[Any] = []

    def make(model_name: str = "deepseek-v4-flash", **options: Any) -> Any:
        options.setdefault("api_key", "sk-loopback-test-key")
        options.setdefault("base_url", deepseek_server.url)
        options.setdefault("max_retries", 0)
        model = create_deepseek(**options)(model_name)
        models.append(model)
        return model

    yield make
    for model in models:
        await model.aclose()
