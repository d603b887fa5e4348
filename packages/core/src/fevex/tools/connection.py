"""Connections: remote tool providers (an MCP server, an OpenAPI service) exposed as tools.

fevex, not the remote side, owns the names (``<connection>__<tool>``), the allowlist,
timeouts, approvals, risk, policies and error messages. Everything a remote server says
about its tools (descriptions, schemas, annotations) is untrusted data: descriptions are
length-limited and marked as remote, annotations never widen approval or risk, and a
tool whose schema changes between discoveries is refused (pinning).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from fevex._ground.names import is_valid_name
from fevex.errors import FevexConfigurationError
from fevex.tools.context import ToolContext
from fevex.tools.definition import Approval, Risk

__all__ = [
    "ConnectionContext",
    "ConnectionDefinition",
    "RemoteTool",
    "ToolOverride",
    "ToolProvider",
    "define_connection",
]

SEPARATOR = "__"


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """A tool as a remote server describes it; every field is untrusted."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=dict)
    annotations: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConnectionContext:
    """Who is asking for a discovery: the run and the connection. ``get_credential``
    resolves a credential the connection declared, through the app's resolver."""

    connection: str
    run_id: str
    session_id: str
    agent_name: str
    get_credential: Callable[[str], Awaitable[str]]


@runtime_checkable
class ToolProvider(Protocol):
    """What a connection needs from a remote tool provider.

    ``list_tools`` is called for every resolution (fevex caches no catalogue) and
    ``call_tool`` for each allowlisted call, inside the connection's timeout. A provider
    scopes any state of its own to one identity.

    A provider that keeps something per run (an MCP session; every context it receives
    names its run in ``run_id``) may also define
    ``async def release_run(self, run_id: str) -> None``. The core calls it, for each
    connection a run used, once the run's steps stop in this process: the run completed,
    failed, was cancelled or paused (a paused run may continue in another process, where
    it discovers again). It runs within the connection's timeout; what it raises is
    logged, never the run's outcome.

    A provider whose server announces changes to its tools may define
    ``def tools_changed(self, run_id: str) -> bool``: whether they changed for the run
    since the core last asked. The core asks before each model step of the run and, on
    ``True``, discovers the run's tools again (the pins apply to what it finds). It must
    return at once.
    """

    async def list_tools(self, context: ConnectionContext) -> Sequence[RemoteTool]: ...

    async def call_tool(self, name: str, input: Any, context: ToolContext) -> Any: ...


@dataclass(frozen=True, slots=True)
class ToolOverride:
    """fevex's own word on one remote tool: it replaces the remote description or input
    schema, and sets approval and risk (remote hints never do)."""

    description: str | None = None
    input_schema: Mapping[str, Any] | None = None
    approval: Approval | None = None
    risk: Risk | None = None


@dataclass(frozen=True, slots=True)
class ConnectionDefinition:
    name: str
    provider: ToolProvider
    allowlist: tuple[str, ...] | None
    timeout: float
    tools: Mapping[str, ToolOverride]
    approval: Approval = "never"
    risk: Risk = "medium"
    credentials: tuple[str, ...] = ()

    def tool_name(self, remote_name: str) -> str:
        return f"{self.name}{SEPARATOR}{remote_name}"

    def exposes(self, remote_name: str) -> bool:
        return self.allowlist is None or remote_name in self.allowlist

    def check(self) -> None:
        if not is_valid_name(self.name) or SEPARATOR in self.name:
            raise _invalid(
                f"Connection name {self.name!r} must match [A-Za-z0-9_-]{{1,64}} without '__'."
            )
        provider = self.provider
        if not (
            callable(getattr(provider, "list_tools", None))
            and callable(getattr(provider, "call_tool", None))
        ):
            raise _invalid(f"Connection {self.name}: provider needs list_tools and call_tool.")
        if self.allowlist is not None and not all(
            isinstance(name, str) and is_valid_name(self.tool_name(name)) for name in self.allowlist
        ):
            raise _invalid(f"Connection {self.name}: allowlist entries must be tool names.")
        if not isinstance(self.timeout, int | float) or self.timeout <= 0:
            raise _invalid(f"Connection {self.name}: timeout must be positive seconds.")
        for remote_name, override in self.tools.items():
            if not isinstance(override, ToolOverride):
                raise _invalid(f"Connection {self.name}: tools[{remote_name!r}] is malformed.")
            if not self.exposes(remote_name):
                raise _invalid(
                    f"Connection {self.name}: tools[{remote_name!r}] is not in the allowlist."
                )
            if override.input_schema is not None and not isinstance(override.input_schema, Mapping):
                raise _invalid(f"Connection {self.name}: {remote_name} input_schema must be JSON.")


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_CONNECTION", message)


def define_connection(
    *,
    name: str,
    provider: ToolProvider,
    allowlist: Iterable[str] | None = None,
    timeout: float = 30.0,
    tools: Mapping[str, ToolOverride | Mapping[str, Any]] | None = None,
    approval: Approval = "never",
    risk: Risk = "medium",
    credentials: Iterable[str] = (),
) -> ConnectionDefinition:
    """Define a connection. ``allowlist`` names the remote tools agents may use (``None``
    exposes every discovered tool); ``tools`` holds per-tool overrides (``description``,
    ``input_schema``, ``approval``, ``risk``); ``approval`` and ``risk`` are the defaults for
    the connection's tools; ``credentials`` names what the provider may resolve."""
    if isinstance(allowlist, str) or isinstance(credentials, str):
        raise _invalid(f"Connection {name!r}: allowlist and credentials are lists of names.")
    overrides: dict[str, ToolOverride] = {}
    for remote_name, override in (tools or {}).items():
        if isinstance(override, Mapping):
            try:
                override = ToolOverride(**override)
            except TypeError as error:
                raise _invalid(f"Connection {name!r}: tools[{remote_name!r}]: {error}") from None
        overrides[remote_name] = override
    definition = ConnectionDefinition(
        name=name,
        provider=provider,
        allowlist=None if allowlist is None else tuple(allowlist),
        timeout=timeout,
        tools=overrides,
        approval=approval,
        risk=risk,
        credentials=tuple(credentials),
    )
    definition.check()
    return definition
