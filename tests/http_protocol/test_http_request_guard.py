"""DNS rebinding and cross-site requests against real ``fevex serve`` processes.

A web page whose name (``rebind.example``) re-resolves to 127.0.0.1 makes the visitor's
browser send requests to a loopback server with ``Host: rebind.example:PORT`` and a
matching ``Origin``; a page of another site can POST a ``text/plain`` body without a
preflight. These headers are forged here the way such a browser sends them, against the
anonymous loopback server (``--app http_service:build_fevex``, a bare fevex app), which is
what such a page would attack.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

from fevex.http import FevexClient

HERE = Path(__file__).resolve().parent
GUARD = 60.0
START = "/v1/agents/ticker/runs"


def rebinding(port: int, host: str = "rebind.example") -> dict[str, str]:
    """What a browser sends from a page at ``http://host:port`` to its own origin."""
    return {
        "Host": f"{host}:{port}",
        "Origin": f"http://{host}:{port}",
        "Sec-Fetch-Site": "same-origin",
        "X-Fevex-Request": "1",
    }


def run_count(server: Any) -> int:
    with httpx2.Client(base_url=server.url, timeout=GUARD) as http:
        response = http.get("/v1/runs", params={"limit": 1000})
        assert response.status_code == 200, response.text
        return len(response.json()["runs"])


def assert_refused(response: httpx2.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert set(response.json()) == {"error"}
    assert response.json()["error"]["code"] == code
    assert isinstance(response.json()["error"]["message"], str)


def test_a_rebound_host_is_refused_for_reads_and_starts(serve: Any, tmp_path: Path) -> None:
    server = serve(
        f"sqlite:///{tmp_path / 'runs.db'}", app="http_service:build_fevex", arguments=["--ui"]
    ).start()
    with FevexClient(server.url, timeout=GUARD) as own:
        own.start_agent("ticker", "1")
    with httpx2.Client(base_url=server.url, timeout=GUARD) as http:
        forged = rebinding(server.port)
        assert_refused(http.get("/v1/runs", headers=forged), 400, "HOST_NOT_ALLOWED")
        assert_refused(http.get("/ui/", headers=forged), 400, "HOST_NOT_ALLOWED")
        started = http.post(START, json={"input": "1"}, headers=forged)
        assert_refused(started, 400, "HOST_NOT_ALLOWED")
        for host in ("127.0.0.1.rebind.example", "localhost.rebind.example", "0.0.0.0", ""):
            headers = {"Host": f"{host}:{server.port}" if host else ""}
            assert_refused(http.get("/v1/runs", headers=headers), 400, "HOST_NOT_ALLOWED")
        # This machine's own names are served, the console too.
        for host in ("127.0.0.1", "localhost", "LOCALHOST"):
            own_host = {"Host": f"{host}:{server.port}"}
            assert http.get("/v1/runs", headers=own_host).status_code == 200, host
            page = http.get("/ui/", headers=own_host)
            assert page.status_code == 200, host
            assert page.headers["content-type"].startswith("text/html")
    assert run_count(server) == 1
    with FevexClient(server.url, timeout=GUARD) as own:
        run = own.start_agent("ticker", "1")
        assert [event.type for event in own.observe_run(run.id)][-1] == "run.completed"
    assert run_count(server) == 2


def test_cross_site_posts_are_refused_without_the_console(serve: Any, tmp_path: Path) -> None:
    server = serve(f"sqlite:///{tmp_path / 'runs.db'}", app="http_service:build_fevex").start()
    body = b'{"input": "1"}'
    hostile = [
        # A form or fetch of another site: a simple text/plain POST, no preflight.
        {"Content-Type": "text/plain", "Origin": "https://evil.example",
         "Sec-Fetch-Site": "cross-site"},
        {"Content-Type": "text/plain", "Origin": "https://evil.example"},
        {"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"},
        {"Content-Type": "text/plain", "Sec-Fetch-Site": "same-site"},
        {"Content-Type": "text/plain", "Origin": "null"},
        {"Content-Type": "application/json", "Origin": f"http://localhost:{server.port}"},
    ]  # fmt: skip
    with httpx2.Client(base_url=server.url, timeout=GUARD) as http:
        for headers in hostile:
            response = http.post(START, content=body, headers=headers)
            assert_refused(response, 403, "CROSS_SITE_REQUEST")
        assert run_count(server) == 0
        # Clients that are not browsers send neither header; the server's own pages are
        # same-origin. Neither needs X-Fevex-Request without the console.
        plain = http.post(START, content=body, headers={"Content-Type": "application/json"})
        assert plain.status_code == 201, plain.text
        own = {"Origin": server.url, "Sec-Fetch-Site": "same-origin"}
        assert http.post(START, json={"input": "1"}, headers=own).status_code == 201
    assert run_count(server) == 2


def test_allowed_hosts_let_a_named_host_through(serve: Any, tmp_path: Path) -> None:
    server = serve(
        f"sqlite:///{tmp_path / 'runs.db'}",
        app="http_service:build_fevex",
        arguments=["--ui", "--allowed-host", "agents.example", "--allowed-host", "*.corp.example"],
    ).start()
    with httpx2.Client(base_url=server.url, timeout=GUARD) as http:
        for host in ("agents.example", "Agents.Example", "desk.corp.example"):
            named = rebinding(server.port, host)
            assert http.get("/v1/runs", headers=named).status_code == 200, host
            started = http.post(START, json={"input": "1"}, headers=named)
            assert started.status_code == 201, started.text
        for host in ("rebind.example", "corp.example", "agents.example.rebind.example"):
            forged = rebinding(server.port, host)
            assert_refused(http.get("/v1/runs", headers=forged), 400, "HOST_NOT_ALLOWED")
        # A named host's page still may not post for another origin.
        other = {**rebinding(server.port, "agents.example"), "Origin": "https://evil.example"}
        assert_refused(
            http.post(START, json={"input": "1"}, headers=other), 403, "CROSS_SITE_REQUEST"
        )
        assert http.get("/v1/runs", headers={"Host": f"127.0.0.1:{server.port}"}).status_code == 200
    assert run_count(server) == 3


def test_a_wildcard_bind_needs_the_hosts_it_answers(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    refused = subprocess.run(
        [sys.executable, "-m", "fevex.cli", "serve", "--app", "http_service:http_app",
         "--store", store, "--create", "--host", "0.0.0.0", "--port", "0"],
        cwd=HERE, capture_output=True, text=True, timeout=GUARD,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert "SERVE_HOSTS_REQUIRED" in refused.stderr
    assert "--allowed-host" in refused.stderr
    assert "Uvicorn running" not in refused.stderr
    assert "Traceback" not in refused.stderr


def test_serve_help_documents_allowed_hosts() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "fevex.cli", "serve", "--help"],
        capture_output=True, text=True, timeout=GUARD, check=True,
    )  # fmt: skip
    text = " ".join(shown.stdout.split())
    assert "--allowed-host HOST" in text
    assert "HOST_NOT_ALLOWED" in text


def test_every_server_process_answers_the_allowed_hosts(serve: Any, tmp_path: Path) -> None:
    # Each of several processes loads the app itself, told the hosts by the first one.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = serve(
        f"sqlite:///{tmp_path / 'runs.db'}",
        port=port,
        app="http_service:build_fevex",
        arguments=["--workers", "2", "--allowed-host", "agents.example"],
    ).start()
    with httpx2.Client(base_url=server.url, timeout=GUARD) as http:
        # The first process binds the socket; the others listen on it once they started.
        deadline = time.monotonic() + GUARD
        while True:
            try:
                http.get("/v1/runs", headers={"Connection": "close"})
                break
            except httpx2.ConnectError:
                assert time.monotonic() < deadline, "no server process started"
                time.sleep(0.1)
        for _ in range(6):  # a new connection each time, to either process
            named = {"Host": f"agents.example:{port}", "Connection": "close"}
            assert http.get("/v1/runs", headers=named).status_code == 200
            forged = {**rebinding(port), "Connection": "close"}
            assert_refused(http.get("/v1/runs", headers=forged), 400, "HOST_NOT_ALLOWED")
