"""MCP servers for the notification tests (``test_notifications.py``), built with the SDK's
MCPServer: one that reports progress and logs while a tool runs (a flood of each on
request, and log messages that echo the caller's token), served over Streamable HTTP or
run over stdio (``python notification_servers.py``)."""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

NOISE = "\x1b[2J\u202e" + "<b>" * 2


def build_notifying_server() -> MCPServer:
    server = MCPServer("notifying", log_level="WARNING")

    @server.tool(description="Works in steps, reporting each.", structured_output=False)
    async def steps(count: int, ctx: Context, pause: float = 0.0) -> str:
        for done in range(1, count + 1):
            await ctx.report_progress(done, count, f"step {done} of {_secret_of(ctx)}{NOISE}")
            if pause:
                await anyio.sleep(pause)
        return f"{count} steps"

    @server.tool(description="Logs while it works.", structured_output=False)
    async def chatty(count: int, ctx: Context) -> str:
        echoed = _secret_of(ctx)
        await ctx.info(f"working with {echoed}{NOISE}" + "y" * 5000, logger_name="worker")
        await ctx.warning({"said": echoed, "count": count})
        for index in range(count):
            await ctx.debug(f"ignored below the level {index}")
            await ctx.info(f"line {index}")
        return "chatted"

    return server


def _secret_of(ctx: Context) -> str:
    """What the server echoes: the caller's Authorization header over HTTP, the TOKEN
    variable of its environment over stdio."""
    request: Any = ctx.request_context.request
    headers = getattr(request, "headers", None)
    if headers is not None:
        return str(headers.get("authorization", ""))
    return os.environ.get("TOKEN", "")


if __name__ == "__main__":
    build_notifying_server().run("stdio")
