"""``create_openapi_tool_provider``: allowlisted operations of an OpenAPI 3.0 or 3.1
document as a fevex :class:`~fevex.tools.ToolProvider`.

Everything is decided at definition time: the document is read (once per process), the
allowlisted operations are named and turned into tools, and every server they use is
checked against the core's SSRF guard (:mod:`fevex.net`). Discovery is therefore local and
cannot fail; only a call touches the network, and it imports httpx2 then, so that
discovering the plugin never does.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from fevex.errors import FevexConfigurationError
from fevex.net import HostPolicy
from fevex.tools import ConnectionContext, RemoteTool, ToolContext
from fevex_openapi.document import load_document
from fevex_openapi.errors import configuration_error, run_error
from fevex_openapi.operation_names import OperationNames, tool_names
from fevex_openapi.operations import Operation, is_header_name, read_operations
from fevex_openapi.request_parts import request_parts

__all__ = [
    "HeaderSource",
    "OpenApiToolProvider",
    "OperationNames",
    "create_openapi_tool_provider",
]

HeaderSource: TypeAlias = (
    Mapping[str, str]
    | Callable[[ToolContext], Mapping[str, str]]
    | Callable[[ToolContext], Awaitable[Mapping[str, str]]]
)


class OpenApiToolProvider:
    """The tools of one OpenAPI document; build it with :func:`create_openapi_tool_provider`."""

    def __init__(
        self,
        operations: Mapping[str, Operation],
        *,
        names: Mapping[str, str],
        headers: HeaderSource | None,
        policy: HostPolicy,
        timeout: float,
        max_redirects: int,
        max_response_bytes: int,
    ) -> None:
        # Keyed by tool name: what a call names.
        self._operations = {names[key]: operation for key, operation in operations.items()}
        self._names = {key: names[key] for key in operations}
        self._tools = tuple(
            RemoteTool(
                name=names[operation.operation_id],
                description=operation.description,
                input_schema=operation.input_schema,
                annotations={"method": operation.method, "path": operation.path},
            )
            for operation in self._operations.values()
        )
        self._headers = headers
        self._policy = policy
        self._timeout = timeout
        self._max_redirects = max_redirects
        self._max_response_bytes = max_response_bytes

    @property
    def tool_names(self) -> Mapping[str, str]:
        """operationId -> the name of its tool, in the order of ``operations["allow"]``."""
        return dict(self._names)

    async def list_tools(self, context: ConnectionContext) -> Sequence[RemoteTool]:
        return self._tools

    async def call_tool(self, name: str, input: Any, context: ToolContext) -> Any:
        operation = self._operations.get(name)
        if operation is None:
            raise run_error(
                "OPENAPI_OPERATION_UNKNOWN",
                f"Tool {name!r} is not an operation this provider allows.",
                details={"operation": name},
            )
        # Checked again here, whoever calls: nothing leaves the process unless it matches.
        problems = await operation.input_validator.problems(input, "input")
        if problems:
            raise run_error(
                "OPENAPI_INPUT_INVALID",
                f"Input for operation {name} is invalid: {'; '.join(problems)}",
                category="validation",
                details={"operation": name},
            )
        parts = request_parts(operation, input)
        headers = await self._resolve_headers(context)

        from fevex_openapi.http_call import CallLimits, send_operation

        limits = CallLimits(self._timeout, self._max_redirects, self._max_response_bytes)
        return await send_operation(
            operation, parts, headers=headers, policy=self._policy, limits=limits
        )

    async def _resolve_headers(self, context: ToolContext) -> dict[str, str]:
        source = self._headers
        if source is None:
            return {}
        if callable(source):
            value: Any = source(context)
            if inspect.isawaitable(value):
                value = await value
            problem = _header_problem(value)
            if problem:
                raise run_error(
                    "OPENAPI_HEADERS_INVALID",
                    f"The headers function returned {problem}.",
                )
            return dict(value)
        return dict(source)

    def __repr__(self) -> str:
        return f"OpenApiToolProvider(tools={list(self._operations)!r})"


def create_openapi_tool_provider(
    *,
    document: Mapping[str, Any] | str | bytes,
    operations: Mapping[str, Iterable[str]],
    operation_names: OperationNames | None = None,
    headers: HeaderSource | None = None,
    allow_hosts: Iterable[str] = (),
    base_url: str | None = None,
    timeout: float = 30.0,
    max_redirects: int = 5,
    max_response_bytes: int = 5 * 1024 * 1024,
) -> OpenApiToolProvider:
    """A tool provider for the operations ``operations["allow"]`` (operationIds) of
    ``document``.

    ``document`` is an OpenAPI 3.0.x or 3.1.x document with local references: a dict, or its
    JSON or YAML text (YAML needs ``fevex-openapi[yaml]``); it is parsed and indexed once per
    process. Each allowed operation becomes a tool, named by ``operation_names`` (a mapping
    from operationId to tool name, or a function of the operationId) or else by the
    default rule of :func:`fevex_openapi.default_tool_name`. ``headers`` go with every request
    to the service's own origin: a mapping, or a function (sync or async) of the
    :class:`~fevex.tools.ToolContext` that may ``await context.get_credential(name)`` for
    credentials declared on the connection. ``allow_hosts`` names the hosts (``"host"`` or
    ``"host:port"``) that may be reached although they are not public. ``base_url``
    replaces the document's servers. ``timeout`` bounds each call in seconds, redirects
    included; at most ``max_redirects`` are followed; a success answer may hold at most
    ``max_response_bytes``.
    """
    allow = _allowlist(operations)
    _check_limits(timeout, max_redirects, max_response_bytes)
    if headers is not None and not callable(headers):
        problem = _header_problem(headers)
        if problem:
            raise configuration_error("OPENAPI_HEADERS_INVALID", f"headers holds {problem}.")
    policy = _host_policy(allow_hosts)
    names = tool_names(allow, operation_names)
    loaded = load_document(document)
    read = read_operations(loaded, allow, base_url)
    for operation in read.values():
        policy.check_url(operation.server_url, at_definition=True)
    return OpenApiToolProvider(
        read,
        names=names,
        headers=headers,
        policy=policy,
        timeout=float(timeout),
        max_redirects=max_redirects,
        max_response_bytes=max_response_bytes,
    )


def _host_policy(allow_hosts: Iterable[str]) -> HostPolicy:
    """The guard's rules for this provider; an unreadable ``allow_hosts`` keeps this
    plugin's code, ``OPENAPI_ALLOW_HOSTS_INVALID``."""
    try:
        return HostPolicy(allow_hosts)
    except FevexConfigurationError as error:
        message = error.message
    raise configuration_error("OPENAPI_ALLOW_HOSTS_INVALID", message)


def _allowlist(operations: Any) -> list[str]:
    if not isinstance(operations, Mapping) or set(operations) != {"allow"}:
        raise configuration_error(
            "OPENAPI_OPERATIONS_INVALID",
            'operations must be {"allow": [operationId, ...]}.',
        )
    allow = operations["allow"]
    if isinstance(allow, str) or not isinstance(allow, Iterable):
        raise configuration_error(
            "OPENAPI_OPERATIONS_INVALID", 'operations["allow"] must be a list of operationIds.'
        )
    names = list(allow)
    if not names or not all(isinstance(name, str) and name for name in names):
        raise configuration_error(
            "OPENAPI_OPERATIONS_INVALID",
            'operations["allow"] must name at least one operationId, each a string.',
        )
    if len(set(names)) != len(names):
        raise configuration_error(
            "OPENAPI_OPERATIONS_INVALID", 'operations["allow"] names an operation twice.'
        )
    return names


def _check_limits(timeout: Any, max_redirects: Any, max_response_bytes: Any) -> None:
    def positive_number(value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool) and value > 0

    def count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if not positive_number(timeout):
        raise configuration_error("OPENAPI_LIMIT_INVALID", "timeout must be positive seconds.")
    if not count(max_redirects):
        raise configuration_error(
            "OPENAPI_LIMIT_INVALID", "max_redirects must be a non-negative integer."
        )
    if not (count(max_response_bytes) and max_response_bytes > 0):
        raise configuration_error(
            "OPENAPI_LIMIT_INVALID", "max_response_bytes must be a positive integer."
        )


def _header_problem(headers: Any) -> str | None:
    """What makes ``headers`` unusable as request headers; never quotes a value."""
    if not isinstance(headers, Mapping):
        return f"a {type(headers).__name__}, not a mapping of header names to values"
    for name, value in headers.items():
        if not is_header_name(name):
            return f"an invalid header name {str(name)[:40]!r}"
        if not isinstance(value, str) or any(c in value for c in "\r\n\x00"):
            return f"a value for {name!r} that is not a single-line string"
    return None
