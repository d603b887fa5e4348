"""A handshake-era stdio MCP server for the tests, in plain JSON-RPC (the protocol the npm
reference servers speak, protocol version 2025-11-25): it answers ``server/discover``
with "method not found", so clients fall back to ``initialize``; it declares
``tools.listChanged`` and sends ``notifications/tools/list_changed`` when its tool
``grow`` adds a tool; its tool ``hang`` never answers. Started as
``python handshake_server.py STATE_DIR``; it counts the tools/list requests it answers in
``STATE_DIR/tools-listed``, writes the request id of a ``hang`` call to
``STATE_DIR/hanging`` and the ids ``notifications/cancelled`` names to
``STATE_DIR/cancelled-requests``, one a line, as each message arrives.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

STATE = Path(sys.argv[1])
names = ["grow", "hang"]
listed = 0


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
    global listed
    if method == "initialize":
        return {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "handshake-tests", "version": "1"},
        }
    if method == "tools/list":
        listed += 1
        (STATE / "tools-listed").write_text(str(listed))
        return {"tools": [{"name": name, "inputSchema": {"type": "object"}} for name in names]}
    if method == "tools/call":
        if params.get("name") == "grow" and "extra" not in names:
            names.append("extra")
            send({"method": "notifications/tools/list_changed"})
        return {"content": [{"type": "text", "text": f"called {params.get('name')}"}]}
    if method == "ping":
        return {}
    raise LookupError(method)


def record(name: str, value: Any) -> None:
    with (STATE / name).open("a") as file:
        file.write(f"{json.dumps(value)}\n")


for line in sys.stdin:
    if not line.strip():
        continue
    message = json.loads(line)
    if "id" not in message:
        if message.get("method") == "notifications/cancelled":
            record("cancelled-requests", message.get("params", {}).get("requestId"))
        continue  # notifications: initialized, cancelled
    if message.get("method") == "tools/call" and message["params"].get("name") == "hang":
        record("hanging", message["id"])
        continue  # never answered
    try:
        send({"id": message["id"], "result": answer(message["method"], message.get("params", {}))})
    except LookupError:
        send({"id": message["id"], "error": {"code": -32601, "message": "Method not found"}})
