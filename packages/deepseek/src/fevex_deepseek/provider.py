"""``create_deepseek``: connection settings, and the SDK clients they open.

A provider holds the API key, base URLs and schema policy; calling it with a model name
gives a :class:`~fevex_deepseek.model.DeepSeekModel`. Models of one provider share its
connection pool.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from typing import TYPE_CHECKING, Any, get_args
from urllib.parse import urlsplit, urlunsplit

from fevex.errors import FevexConfigurationError
from fevex_deepseek._sdk import require_openai
from fevex_deepseek.request import SchemaPolicy

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from fevex_deepseek.model import DeepSeekModel

__all__ = ["DEFAULT_BASE_URL", "DeepSeekProvider", "beta_base_url_for", "create_deepseek"]

DEFAULT_BASE_URL = "https://api.deepseek.com"
_SCHEMA_POLICIES: tuple[str, ...] = get_args(SchemaPolicy)


def create_deepseek(
    api_key: str | None = None,
    base_url: str | None = None,
    schema_policy: SchemaPolicy = "strict",
    *,
    beta_base_url: str | None = None,
    max_retries: int = 2,
    timeout: float | None = None,
) -> DeepSeekProvider:
    """DeepSeek settings; call the result with a model name to get a model.

    ``api_key`` and ``base_url`` default to ``DEEPSEEK_API_KEY`` and ``DEEPSEEK_BASE_URL``
    (then ``https://api.deepseek.com``). Strict tools go to ``beta_base_url``, by default
    the base URL with ``/beta`` in place of an optional ``/v1``. ``max_retries`` is how
    often the SDK retries a connection error, 429 or 5xx before the stream starts.
    """
    key = api_key if api_key is not None else os.environ.get("DEEPSEEK_API_KEY")
    if not key:
        raise FevexConfigurationError(
            "INVALID_MODEL",
            "DeepSeek needs an API key: set DEEPSEEK_API_KEY or pass create_deepseek(api_key=...).",
        )
    if schema_policy not in _SCHEMA_POLICIES:
        raise FevexConfigurationError(
            "INVALID_MODEL",
            f"schema_policy must be 'strict' or 'best-effort', not {schema_policy!r}.",
        )
    if not isinstance(max_retries, int) or max_retries < 0:
        raise FevexConfigurationError(
            "INVALID_MODEL", "max_retries must be a non-negative integer."
        )
    url = base_url or os.environ.get("DEEPSEEK_BASE_URL") or DEFAULT_BASE_URL
    return DeepSeekProvider(
        api_key=key,
        base_url=url,
        beta_base_url=beta_base_url or beta_base_url_for(url),
        schema_policy=schema_policy,
        max_retries=max_retries,
        timeout=timeout,
    )


def beta_base_url_for(base_url: str) -> str:
    """``https://api.deepseek.com`` and ``.../v1`` both become ``https://api.deepseek.com/beta``."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit(parts._replace(path=f"{path}/beta"))


class DeepSeekProvider:
    """Settings shared by the models it makes; ``provider("deepseek-v4-flash")``."""

    def __init__(
        self,
        *,
        api_key: str,
        base_url: str,
        beta_base_url: str,
        schema_policy: SchemaPolicy,
        max_retries: int,
        timeout: float | None,
    ) -> None:
        self.api_key = api_key
        self.base_url = base_url
        self.beta_base_url = beta_base_url
        self.schema_policy: SchemaPolicy = schema_policy
        self.max_retries = max_retries
        self.timeout = timeout
        # A connection pool belongs to the event loop that opened it, so each loop that
        # uses this provider gets its own pair of clients (the beta one shares the pool).
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[AsyncOpenAI, AsyncOpenAI]
        ] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"DeepSeekProvider(base_url={self.base_url!r}, schema_policy={self.schema_policy!r})"

    def __call__(self, model_name: str) -> DeepSeekModel:
        from fevex_deepseek.model import DeepSeekModel

        return DeepSeekModel(self, model_name)

    def client(self, *, beta: bool) -> AsyncOpenAI:
        loop = asyncio.get_running_loop()
        pair = self._clients.get(loop)
        if pair is None:
            openai = require_openai()
            options: dict[str, Any] = {"max_retries": self.max_retries}
            if self.timeout is not None:
                options["timeout"] = self.timeout
            regular: AsyncOpenAI = openai.AsyncOpenAI(
                api_key=self.api_key,
                base_url=self.base_url,
                default_headers=_isolated_headers(self.api_key, openai.Omit()),
                **options,
            )
            pair = (regular, regular.with_options(base_url=self.beta_base_url))
            self._clients[loop] = pair
        return pair[1] if beta else pair[0]

    async def aclose(self) -> None:
        """Close the connections this provider opened on the running event loop."""
        pair = self._clients.pop(asyncio.get_running_loop(), None)
        if pair is not None:
            await pair[0].close()


def _isolated_headers(api_key: str, omit: Any) -> dict[str, Any]:
    """Headers that keep the OpenAI settings of the environment away from DeepSeek.

    The SDK adds ``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID`` and ``OPENAI_CUSTOM_HEADERS``
    (an ``Authorization`` line included) to every client it builds; a process that also
    talks to OpenAI must not send those, nor an OpenAI credential, to another provider.
    ``omit`` values remove a header; an explicit ``Authorization`` makes the SDK drop the
    environment's.
    """
    headers: dict[str, Any] = {"OpenAI-Organization": omit, "OpenAI-Project": omit}
    for line in os.environ.get("OPENAI_CUSTOM_HEADERS", "").split("\n"):
        name, colon, _ = line.partition(":")
        if colon and name.strip() and name.strip().lower() != "authorization":
            headers[name.strip()] = omit
    headers["Authorization"] = f"Bearer {api_key}"
    return headers
