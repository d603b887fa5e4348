"""The MCP tool provider: a server's tools, and optionally its resources (as two
read-only tools) and prompts (as skills or context providers), for fevex connections.

Importing this module imports no MCP SDK; creating a provider does (``_require_sdk``),
so a missing SDK fails where the app defines the provider, with the install command.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from fevex.errors import FevexError
from fevex.knowledge import (
    ContextItem,
    ContextProviderDefinition,
    ContextRequest,
    SkillDefinition,
    define_context_provider,
    define_skill,
)
from fevex.tools import ConnectionContext, RemoteTool, ToolContext
from fevex_mcp.channels import Channel, HttpChannel, StdioChannel
from fevex_mcp.client_features import ClientFeatures
from fevex_mcp.command import parse_command
from fevex_mcp.elicitation_types import (
    DEFAULT_ELICITATION_TIMEOUT,
    ElicitationHandler,
)
from fevex_mcp.endpoint import parse_endpoint
from fevex_mcp.errors import (
    ARGUMENTS_INVALID,
    AUTH_INVALID,
    COMMAND_INVALID,
    FEATURE_UNSUPPORTED,
    HEADERS_FAILED,
    HEADERS_INVALID,
    PROMPT_CHANGED,
    PROMPT_NOT_FOUND,
    PROTOCOL_ERROR,
    RESOURCE_CHANGED,
    RESOURCE_NOT_FOUND,
    TRANSPORT_UNSUPPORTED,
    configuration_error,
    run_error,
)
from fevex_mcp.headers import HeadersSource, check_header_map
from fevex_mcp.oauth import MCPOAuth
from fevex_mcp.pins import Pins
from fevex_mcp.results import block_text
from fevex_mcp.roots import MCPRoot, parse_roots
from fevex_mcp.sampling import MCPSampling, sampling_config

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult

    from fevex_mcp.elicitation import Elicitor

__all__ = ["MCPToolProvider", "create_mcp_tool_provider"]

FEATURES = frozenset({"tools", "resources", "prompts"})
DEFAULT_MAX_RESOURCE_CHARS = 100_000
DEFAULT_STARTUP_TIMEOUT = 30.0


class MCPToolProvider:
    """The tools (and, when asked for, the resources and prompts) of one MCP server.

    A run's discovery and calls share one MCP session, opened on its first operation and
    ended when the core releases the run (:meth:`release_run`: it completed, failed, was
    cancelled or paused) or by :meth:`aclose` (or ``async with provider:``). Over
    Streamable HTTP the session is opened with the headers resolved for its first
    operation; the provider binds to the first header set it resolves
    (``MCP_IDENTITY_CHANGED`` for another). Over stdio the session is a server process
    of the run's own, stopped with its whole process group.
    """

    def __init__(
        self,
        channel: Channel,
        *,
        features: frozenset[str] = frozenset({"tools"}),
        max_resource_chars: int = DEFAULT_MAX_RESOURCE_CHARS,
    ) -> None:
        self._channel = channel
        self._features = features
        self._max_resource_chars = max_resource_chars
        self._resource_pins = Pins()
        self._template_pins = Pins()
        self._prompt_pins = Pins()

    @property
    def url(self) -> str | None:
        """The server's URL, without any query string (which may carry a token); ``None``
        for a stdio server."""
        channel = self._channel
        return channel.endpoint.display if isinstance(channel, HttpChannel) else None

    @property
    def command(self) -> str | None:
        """The stdio server's program as configured (not its arguments or environment,
        which may carry secrets); ``None`` for an HTTP server."""
        channel = self._channel
        return channel.command.command if isinstance(channel, StdioChannel) else None

    @property
    def features(self) -> frozenset[str]:
        return self._features

    # -- tools ---------------------------------------------------------------------------

    async def list_tools(self, context: ConnectionContext) -> Sequence[RemoteTool]:
        """Discover the server's tools as it describes them, plus ``resources_list``,
        ``resources_templates`` and ``resources_read`` when resources were asked for.
        fevex treats every field as untrusted: it bounds and labels descriptions, pins
        schemas and ignores hints."""
        from fevex_mcp.resources import RESOURCE_TOOL_NAMES, resource_tools

        tools = await self._channel.listing(context, "tools")
        remote = [
            RemoteTool(
                name=tool.name,
                description=tool.description or "",
                input_schema=tool.input_schema,
                annotations=(
                    tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
                    if tool.annotations is not None
                    else {}
                ),
            )
            for tool in tools
        ]
        if "resources" in self._features:
            clash = sorted(RESOURCE_TOOL_NAMES & {tool.name for tool in remote})
            if clash:
                raise run_error(
                    PROTOCOL_ERROR,
                    f"The MCP server {self._channel.where} lists a tool named {clash[0]!r}, "
                    "the name fevex-mcp gives to its resources; drop 'resources' from the "
                    "provider's features to use that tool.",
                )
            remote.extend(resource_tools())
        return remote

    async def call_tool(self, name: str, input: Any, context: ToolContext) -> Any:
        """Call ``name`` with ``input`` and return the result's JSON value."""
        from fevex_mcp.calls_in_flight import in_flight
        from fevex_mcp.operations import call_tool
        from fevex_mcp.resources import RESOURCE_TOOL_NAMES
        from fevex_mcp.results import result_value

        if not isinstance(input, Mapping):
            raise run_error(
                ARGUMENTS_INVALID,
                f"Tool {context.tool_name}: MCP tools take a JSON object as input, not "
                f"{type(input).__name__}.",
                tool_name=context.tool_name,
            )
        if "resources" in self._features and name in RESOURCE_TOOL_NAMES:
            return await self._resource_tool(name, dict(input), context)
        arguments = dict(input)
        limit = self._max_resource_chars

        async def call(client: Client, secrets: Sequence[str]) -> Any:
            def operation() -> Awaitable[CallToolResult]:
                return call_tool(client, name, arguments, context, secrets)

            # No local holds the result: a failed one's text may hold an echoed secret.
            return result_value(
                await in_flight(client, context, secrets, operation),
                context.tool_name,
                secrets,
                limit,
            )

        return await self._channel.run(context, call)

    # -- resources -----------------------------------------------------------------------

    async def _resource_tool(
        self, name: str, input: dict[str, Any], context: ToolContext
    ) -> dict[str, Any]:
        from fevex_mcp.calls_in_flight import in_flight
        from fevex_mcp.operations import read_resource
        from fevex_mcp.resources import (
            RESOURCES_LIST,
            RESOURCES_TEMPLATES,
            list_value,
            listed,
            read_value,
            templates_value,
        )

        if name == RESOURCES_TEMPLATES:
            return templates_value(*await self._templates(context))
        available, withheld = listed(
            await self._channel.listing(context, "resources"), self._resource_pins
        )
        if name == RESOURCES_LIST:
            return list_value(available, withheld)
        uri = input.get("uri")
        if not isinstance(uri, str):
            raise run_error(
                ARGUMENTS_INVALID,
                f"Tool {context.tool_name}: give the resource's uri as a string.",
                tool_name=context.tool_name,
            )
        if uri in withheld:
            raise run_error(
                RESOURCE_CHANGED,
                f"Resource {uri[:200]!r} of the MCP server {self._channel.where} changed "
                "(name or MIME type) since this provider first listed it; review the "
                "change, then create a new provider.",
                tool_name=context.tool_name,
            )
        if uri not in available and not await self._templated(uri, context):
            raise run_error(
                RESOURCE_NOT_FOUND,
                f"The MCP server {self._channel.where} does not list resource "
                f"{uri[:200]!r}, nor a resource template it matches; only listed "
                "resources, and URIs of listed templates, can be read.",
                tool_name=context.tool_name,
                recoverable=True,
            )
        limit = self._max_resource_chars

        async def read(client: Client, secrets: Sequence[str]) -> dict[str, Any]:
            result = await in_flight(client, context, secrets, lambda: read_resource(client, uri))
            return read_value(uri, list(result.contents), limit)

        return await self._channel.run(context, read)

    async def _templates(self, context: ToolContext) -> tuple[dict[str, Any], list[str]]:
        from fevex_mcp.resources import listed

        templates = await self._channel.listing(context, "resource_templates")
        return listed(templates, self._template_pins, key="uri_template")

    async def _templated(self, uri: str, context: ToolContext) -> bool:
        """Whether ``uri`` matches a resource template the server lists (pin holding); a
        server that lists none (or cannot: no ``resources/templates/list``) has none."""
        from fevex_mcp.resources import matching_template

        try:
            available, _ = await self._templates(context)
        except FevexError:
            return False
        return matching_template(uri, available) is not None

    # -- prompts -------------------------------------------------------------------------

    async def prompt_skill(
        self,
        prompt: str,
        *,
        name: str | None = None,
        arguments: Mapping[str, str] | None = None,
        description: str | None = None,
    ) -> SkillDefinition:
        """The server's prompt ``prompt`` (with ``arguments``) as a skill named ``name``
        (the prompt's name by default): its text, read now, becomes the skill's
        instructions. Call it where the app is composed, and register the skill in
        ``create_fevex(context_providers=[...])``. The text is fixed here: a later change
        on the server never reaches the skill, which is instructions the app chose."""
        text = await self._prompt_text(prompt, arguments, _composition_context())
        return define_skill(name=name or prompt, instructions=text, description=description)

    def prompt_context(
        self,
        prompt: str,
        *,
        name: str | None = None,
        arguments: Mapping[str, str] | None = None,
        optional: bool = False,
        description: str | None = None,
    ) -> ContextProviderDefinition:
        """A context provider named ``name`` (the prompt's name by default) that reads
        the server's prompt ``prompt`` for each run that names it in ``context=``. The
        text reaches the model as data, like tool output, never as instructions."""
        self._require("prompts")
        provider = self

        async def read(request: ContextRequest) -> list[ContextItem]:
            context = _composition_context(request.run_id, request.agent_name)
            text = await provider._prompt_text(prompt, arguments, context)
            return [ContextItem(id=f"mcp-prompt:{prompt}", content=text)]

        return define_context_provider(
            name=name or prompt, read=read, optional=optional, description=description
        )

    async def _prompt_text(
        self, prompt: str, arguments: Mapping[str, str] | None, context: ConnectionContext
    ) -> str:
        from fevex_mcp.operations import get_prompt

        self._require("prompts")
        values = dict(arguments or {})
        if not all(isinstance(key, str) and isinstance(val, str) for key, val in values.items()):
            raise configuration_error(
                ARGUMENTS_INVALID, f"MCP prompt {prompt!r}: arguments map names to strings."
            )
        prompts = {item.name: item for item in await self._channel.listing(context, "prompts")}
        listed = prompts.get(prompt)
        if listed is None:
            raise run_error(
                PROMPT_NOT_FOUND,
                f"The MCP server {self._channel.where} does not list prompt {prompt[:200]!r}.",
            )
        shape = [
            {"name": argument.name, "required": bool(argument.required)}
            for argument in listed.arguments or []
        ]
        if not self._prompt_pins.holds(prompt, shape):
            raise run_error(
                PROMPT_CHANGED,
                f"The arguments of prompt {prompt[:200]!r} of the MCP server "
                f"{self._channel.where} changed since this provider first listed it; "
                "review the change, then create a new provider.",
            )
        limit = self._max_resource_chars

        async def fetch(client: Client, secrets: Sequence[str]) -> str:
            result = await get_prompt(client, prompt, values)
            texts = [block_text(message.content) for message in result.messages]
            text = "\n\n".join(text for text in texts if text)
            return text if len(text) <= limit else text[: limit - 1] + "…"

        return await self._channel.run(context, fetch)

    def _require(self, feature: str) -> None:
        if feature not in self._features:
            raise configuration_error(
                FEATURE_UNSUPPORTED,
                f"MCP provider: add {feature!r} to features= to use the server's {feature}.",
            )

    # -- lifetime ------------------------------------------------------------------------

    async def release_run(self, run_id: str) -> None:
        """End the MCP session of run ``run_id`` (over stdio, stop its server process).
        The core calls it when the run's steps stop in this process; a later operation of
        the same run opens a new session."""
        await self._channel.release_run(run_id)

    def tools_changed(self, run_id: str) -> bool:
        """Whether the server said, on run ``run_id``'s session, that its tools changed
        since the core last asked; the core then discovers the run's tools again before
        its next model step."""
        return self._channel.tools_changed(run_id)

    async def aclose(self) -> None:
        """End every session this provider holds (over stdio, stop their server
        processes and process groups). The provider can be used again afterwards."""
        await self._channel.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        channel = self._channel
        if isinstance(channel, StdioChannel):
            return f"MCPToolProvider(command={channel.command.display!r})"
        return f"MCPToolProvider(url={self.url!r})"


def _composition_context(run_id: str = "", agent_name: str = "") -> ConnectionContext:
    """The caller of a prompt read, which is not a connection's discovery: it names no
    connection, so over HTTP the read has a session of its own, ended before it returns,
    and no credential can be resolved for it (a headers callable that asks for one fails
    with ``MCP_HEADERS_FAILED``)."""

    async def no_credentials(name: str) -> str:
        raise run_error(
            HEADERS_FAILED,
            "MCP prompts are read outside a connection's discovery, where no credential "
            "can be resolved; give the provider fixed headers to read prompts over HTTP.",
        )

    return ConnectionContext("", run_id, "", agent_name, no_credentials)


def create_mcp_tool_provider(
    url: str | None = None,
    *,
    headers: HeadersSource = None,
    oauth: MCPOAuth | None = None,
    command: str | None = None,
    args: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    inherit_env: Iterable[str] = (),
    cwd: str | os.PathLike[str] | None = None,
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
    call_timeout: float | None = None,
    transport: str | None = None,
    features: Iterable[str] = ("tools",),
    max_resource_chars: int = DEFAULT_MAX_RESOURCE_CHARS,
    elicitation: ElicitationHandler | Literal["person"] | None = None,
    elicitation_timeout: float = DEFAULT_ELICITATION_TIMEOUT,
    sampling: MCPSampling | str | None = None,
    roots: Iterable[MCPRoot | str | os.PathLike[str]] | None = None,
) -> MCPToolProvider:
    """A tool provider for one MCP server: at ``url`` (Streamable HTTP), or started from
    ``command`` with ``args`` (stdio).

    HTTP: ``headers`` is a mapping, or a callable (sync or async) that receives the
    caller's context, a :class:`~fevex.tools.ConnectionContext` during discovery or a
    :class:`~fevex.ToolContext` during a call, and returns the headers for that
    operation. The provider binds to the first set it resolves; use one per identity.
    ``oauth`` (an :class:`~fevex_mcp.MCPOAuth`) authorizes the provider with OAuth 2.1
    when the server asks for it.

    stdio: ``command`` is the program (never run by a shell; a bare name is looked up in
    the child's ``PATH``), ``args`` its arguments, ``cwd`` its working directory. Its
    environment is ``env`` plus the parent's values of the names in ``inherit_env`` (for
    example ``["PATH", "HOME"]``), and nothing else of the parent's. ``startup_timeout``
    bounds the start and the MCP handshake, ``call_timeout`` (``None``: only the
    connection's timeout) each request. ``await provider.aclose()`` stops the server
    and its whole process group.

    ``features`` adds ``"resources"`` (the tools ``resources_list``,
    ``resources_templates`` and ``resources_read``, whose text is bounded by
    ``max_resource_chars``, as are the text resources a tool result embeds) and
    ``"prompts"`` (:meth:`MCPToolProvider.prompt_skill`,
    :meth:`MCPToolProvider.prompt_context`) to ``"tools"``. ``transport`` may name the
    transport (``"streamable-http"`` or ``"stdio"``); legacy ``"sse"`` is refused.

    Client capabilities are declared only when configured (the server's requests are
    refused otherwise). ``elicitation``: a handler (sync or async) that receives an
    :class:`~fevex_mcp.ElicitationRequest` and returns an
    :class:`~fevex_mcp.ElicitationResponse`, or ``"person"`` (the run lists a pending
    input until someone answers it with ``resume_run``); unanswered after
    ``elicitation_timeout`` seconds, the call ends with ``MCP_ELICITATION_TIMEOUT``.
    ``sampling`` (an :class:`~fevex_mcp.MCPSampling`, or a key of the app's ``models``)
    answers with that app model, as a model step of the call's run; ``roots`` (absolute
    paths, ``file://`` URIs or :class:`~fevex_mcp.MCPRoot` s) are what ``roots/list``
    answers.
    """
    _require_sdk()
    wanted = _features(features)
    _check_options(max_resource_chars, transport)
    elicitor = _elicitor(elicitation, elicitation_timeout, url or command or "")
    offered = ClientFeatures(sampling_config(sampling), parse_roots(roots))
    options = {**offered.client_options(), **(elicitor.client_options() if elicitor else {})}
    channel: Channel
    if command is not None or transport == "stdio":
        _check_stdio(url, transport, headers, oauth)
        parsed = parse_command(command, args, env, inherit_env, cwd, startup_timeout, call_timeout)
        channel = StdioChannel(parsed, options)
    else:
        channel = _http_channel(url, headers, oauth, options)
    offered.where = channel.where
    if elicitor is not None:
        elicitor.where = channel.where
    return MCPToolProvider(channel, features=wanted, max_resource_chars=max_resource_chars)


def _check_stdio(
    url: str | None, transport: str | None, headers: HeadersSource, oauth: MCPOAuth | None
) -> None:
    if url is not None or transport == "streamable-http":
        raise configuration_error(
            COMMAND_INVALID,
            "MCP provider: give either url= (Streamable HTTP) or command= (stdio), not both.",
        )
    if headers is not None:
        raise configuration_error(
            HEADERS_INVALID,
            "MCP provider: a stdio server takes no headers; pass what it needs in env=.",
        )
    if oauth is not None:
        raise configuration_error(
            AUTH_INVALID, "MCP provider: OAuth is for Streamable HTTP servers (url=)."
        )
    if sys.platform == "win32":  # pragma: no cover - process groups are POSIX
        raise configuration_error(
            TRANSPORT_UNSUPPORTED, "MCP stdio servers are supported on POSIX systems only."
        )


def _elicitor(
    elicitation: ElicitationHandler | Literal["person"] | None, timeout: float, where: str
) -> Elicitor | None:
    if elicitation is None:
        return None
    if elicitation != "person" and not callable(elicitation):
        raise configuration_error(
            FEATURE_UNSUPPORTED,
            "MCP provider: elicitation is a handler (a function that receives an "
            "ElicitationRequest), 'person', or None.",
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise configuration_error(
            FEATURE_UNSUPPORTED, "MCP provider: elicitation_timeout must be positive seconds."
        )
    from fevex_mcp.elicitation import Elicitor

    return Elicitor(elicitation, float(timeout), where)


def _check_options(max_resource_chars: int, transport: str | None) -> None:
    if (
        isinstance(max_resource_chars, bool)
        or not isinstance(max_resource_chars, int)
        or max_resource_chars < 1
    ):
        raise configuration_error(
            FEATURE_UNSUPPORTED, "MCP provider: max_resource_chars must be a positive integer."
        )
    if transport not in (None, "streamable-http", "stdio"):
        raise configuration_error(
            TRANSPORT_UNSUPPORTED,
            f"MCP transport {transport!r} is not supported: fevex-mcp speaks Streamable "
            "HTTP (url=) and stdio (command=); legacy HTTP+SSE is out of scope.",
        )


def _http_channel(
    url: str | None,
    headers: HeadersSource,
    oauth: MCPOAuth | None,
    client_options: Mapping[str, Any] | None = None,
) -> HttpChannel:
    endpoint = parse_endpoint(url)
    if isinstance(headers, Mapping):
        headers = check_header_map(headers)
    elif headers is not None and not callable(headers):
        raise configuration_error(
            HEADERS_INVALID,
            "MCP provider: headers must be a mapping, or a callable that receives the "
            f"caller's context and returns one (got {type(headers).__name__}).",
        )
    if oauth is None:
        return HttpChannel(endpoint, headers, client_options=client_options)
    if not isinstance(oauth, MCPOAuth):
        raise configuration_error(
            AUTH_INVALID, f"MCP provider: oauth must be an MCPOAuth, not {type(oauth).__name__}."
        )
    from fevex_mcp.oauth_flow import OAuthAuth

    return HttpChannel(endpoint, headers, OAuthAuth(oauth, endpoint), client_options)


def _features(features: Iterable[str]) -> frozenset[str]:
    if isinstance(features, str):
        features = (features,)
    wanted = frozenset(features)
    unsupported = sorted(wanted - FEATURES)
    if unsupported or "tools" not in wanted:
        raise configuration_error(
            FEATURE_UNSUPPORTED,
            f"MCP features must include 'tools' and may add 'resources' and 'prompts' "
            f"(got {sorted(wanted)}).",
        )
    return wanted


def _require_sdk() -> None:
    """Import the SDK now, so a missing one fails where the provider is defined."""
    from fevex_mcp import operations  # noqa: F401
