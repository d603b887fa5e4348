"""fevex-mcp: the tools, resources and prompts of an MCP server (Streamable HTTP or
stdio) for fevex, and the sampling and roots it may offer the server.

Importing this package imports neither the MCP SDK nor httpx2; creating a provider does.
"""

from fevex_mcp.__about__ import __version__
from fevex_mcp.elicitation_types import (
    DEFAULT_ELICITATION_TIMEOUT,
    ElicitationAction,
    ElicitationHandler,
    ElicitationRequest,
    ElicitationResponse,
)
from fevex_mcp.headers import Headers, HeadersSource
from fevex_mcp.oauth import MCPOAuth, OAuthRedirect, TokenEndpointAuthMethod, terminal_redirect
from fevex_mcp.provider import MCPToolProvider, create_mcp_tool_provider
from fevex_mcp.roots import MCPRoot
from fevex_mcp.sampling import MCPSampling
from fevex_mcp.token_stores import FileTokenStore, InMemoryTokenStore, TokenStore

__all__ = [
    "DEFAULT_ELICITATION_TIMEOUT",
    "ElicitationAction",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
    "FileTokenStore",
    "Headers",
    "HeadersSource",
    "InMemoryTokenStore",
    "MCPOAuth",
    "MCPRoot",
    "MCPSampling",
    "MCPToolProvider",
    "OAuthRedirect",
    "TokenEndpointAuthMethod",
    "TokenStore",
    "__version__",
    "create_mcp_tool_provider",
    "terminal_redirect",
]
