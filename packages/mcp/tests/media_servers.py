"""An MCP server whose tool results carry images, audio and embedded resources, for the
media tests (``test_media.py``), built with the SDK's MCPServer: served over Streamable
HTTP, or run over stdio (``python media_servers.py``). ``exhibit(kind)`` returns one
well-formed result of every kind; the other kinds are what a broken or hostile server
sends."""

from __future__ import annotations

import base64
import struct

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

PNG = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + bytes(17)
WAV = b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + bytes(24)
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
NOISE = "\x1b[2J\u202e"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def exhibit(kind: str) -> CallToolResult:
    """The result the ``exhibit`` tool returns for ``kind``."""
    if kind == "all":
        return CallToolResult(
            content=[
                TextContent(text="The home page:"),
                ImageContent(data=b64(PNG), mime_type="image/png"),
                AudioContent(data=b64(WAV), mime_type="audio/wav"),
                EmbeddedResource(
                    resource=TextResourceContents(
                        uri=f"file:///notes{NOISE}.txt",
                        mime_type="text/plain",
                        text="Line 1\nLine 2",
                    )
                ),
                EmbeddedResource(
                    resource=BlobResourceContents(
                        uri="file:///reports/q3.pdf", mime_type="application/pdf", blob=b64(PDF)
                    )
                ),
                ResourceLink(name="Readme", uri="file:///README.md"),
            ]
        )
    if kind == "image-only":
        return CallToolResult(content=[ImageContent(data=b64(PNG), mime_type="image/png")])
    if kind == "bad-base64":
        return CallToolResult(content=[ImageContent(data="not base64!!", mime_type="image/png")])
    if kind == "huge":
        return CallToolResult(
            content=[ImageContent(data=b64(PNG + bytes(6 * 1024 * 1024)), mime_type="image/png")]
        )
    if kind == "many":
        return CallToolResult(
            content=[ImageContent(data=b64(PNG), mime_type="image/png") for _ in range(9)]
        )
    if kind == "too-much":
        # Three parts of 4 MiB each: every one within its bound, all over the result's.
        big = b64(WAV + bytes(4 * 1024 * 1024))
        return CallToolResult(
            content=[AudioContent(data=big, mime_type="audio/wav") for _ in range(3)]
        )
    if kind == "wrong-types":
        return CallToolResult(
            content=[
                ImageContent(data=b64(b"<svg/>"), mime_type="image/svg+xml"),
                ImageContent(data=b64(PDF), mime_type="image/png"),
                AudioContent(data=b64(WAV), mime_type="audio/x-evil"),
                EmbeddedResource(
                    resource=BlobResourceContents(
                        uri="file:///setup.exe", mime_type="application/x-msdownload", blob=b64(PDF)
                    )
                ),
            ]
        )
    if kind == "long-text":
        return CallToolResult(
            content=[
                EmbeddedResource(
                    resource=TextResourceContents(uri="file:///big.txt", text="x" * 5000)
                )
            ]
        )
    raise ValueError(kind)


def build_media_server() -> MCPServer:
    server = MCPServer("media", log_level="WARNING")

    @server.tool(description="Show an exhibit of one kind.")
    def show(kind: str) -> CallToolResult:
        return exhibit(kind)

    return server


if __name__ == "__main__":
    build_media_server().run("stdio")
