"""``create_deepseek``: DeepSeek's base URLs and key, for fevex-openai's Chat Completions layer.

A provider holds the settings; calling it with a model name gives a
:class:`~fevex_deepseek.model.DeepSeekModel`.
"""

from __future__ import annotations

import os
from typing import get_args
from urllib.parse import urlsplit, urlunsplit

from fevex.errors import FevexConfigurationError
from fevex_deepseek.model import DeepSeekModel
from fevex_openai import ClientSettings, SchemaPolicy, check_base_url

__all__ = ["DEFAULT_BASE_URL", "DeepSeekProvider", "beta_base_url_for", "create_deepseek"]

DEFAULT_BASE_URL = "https://api.deepseek.com"


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
    often the SDK retries a connection error, 429 or 5xx before the stream starts. A base
    URL that is not ``http(s)://host...`` is refused with ``INVALID_MODEL``.
    """
    key = api_key if api_key is not None else os.environ.get("DEEPSEEK_API_KEY")
    if not key:
        raise _invalid(
            "DeepSeek needs an API key: set DEEPSEEK_API_KEY or pass create_deepseek(api_key=...)."
        )
    if schema_policy not in get_args(SchemaPolicy):
        raise _invalid(f"schema_policy must be 'strict' or 'best-effort', not {schema_policy!r}.")
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
        raise _invalid(f"max_retries must be a whole number of at least 0, not {max_retries!r}.")
    if base_url is not None:
        url = check_base_url(base_url, setting="base_url", provider="DeepSeek")
    elif os.environ.get("DEEPSEEK_BASE_URL"):
        url = check_base_url(
            os.environ["DEEPSEEK_BASE_URL"], setting="DEEPSEEK_BASE_URL", provider="DeepSeek"
        )
    else:
        url = DEFAULT_BASE_URL
    beta = (
        check_base_url(beta_base_url, setting="beta_base_url", provider="DeepSeek")
        if beta_base_url is not None
        else beta_base_url_for(url)
    )
    settings = ClientSettings(
        api_key=key,
        base_url=url,
        strict_tools_base_url=beta,
        timeout=timeout,
        max_retries=max_retries,
    )
    return DeepSeekProvider(settings, schema_policy=schema_policy)


def beta_base_url_for(base_url: str) -> str:
    """``https://api.deepseek.com`` and ``.../v1`` both become ``https://api.deepseek.com/beta``."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit(parts._replace(path=f"{path}/beta"))


class DeepSeekProvider:
    """Settings shared by the models it makes; ``provider("deepseek-v4-flash")``."""

    def __init__(self, settings: ClientSettings, *, schema_policy: SchemaPolicy) -> None:
        self.settings = settings
        self.schema_policy: SchemaPolicy = schema_policy

    def __repr__(self) -> str:
        return (
            f"DeepSeekProvider(base_url={self.settings.base_url!r}, "
            f"schema_policy={self.schema_policy!r})"
        )

    def __call__(self, model_name: str) -> DeepSeekModel:
        if not isinstance(model_name, str) or not model_name.strip():
            raise _invalid(f"A DeepSeek model needs a name, not {model_name!r}.")
        return DeepSeekModel(model_name, self.settings, schema_policy=self.schema_policy)


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_MODEL", message, details={"provider": "deepseek"})
