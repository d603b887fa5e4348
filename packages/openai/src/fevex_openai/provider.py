"""``create_openai``: configure once, then name models.

``create_openai(api_key=..., base_url=..., schema_policy=..., api=...)("gpt-5-mini")``
returns an :class:`~fevex_openai.model.OpenAIModel`. Unset ``api_key`` and ``base_url``
come from ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import get_args

from fevex.errors import FevexConfigurationError
from fevex_openai.base_url import check_base_url
from fevex_openai.model import ClientSettings, OpenAIApi, OpenAIModel, SchemaPolicy

__all__ = ["OpenAIProvider", "create_openai"]


class OpenAIProvider:
    """Builds :class:`OpenAIModel` gateways that share one configuration."""

    def __init__(
        self, settings: ClientSettings, *, schema_policy: SchemaPolicy, api: OpenAIApi
    ) -> None:
        self.settings = settings
        self.schema_policy: SchemaPolicy = schema_policy
        self.api: OpenAIApi = api

    def __call__(self, model_name: str) -> OpenAIModel:
        if not isinstance(model_name, str) or not model_name.strip():
            raise _invalid(f"An OpenAI model needs a name, not {model_name!r}.")
        return OpenAIModel(
            model_name, self.settings, schema_policy=self.schema_policy, api=self.api
        )

    def __repr__(self) -> str:
        return (
            f"OpenAIProvider(api={self.api!r}, schema_policy={self.schema_policy!r}, "
            f"base_url={self.settings.base_url!r})"
        )


def create_openai(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    schema_policy: SchemaPolicy = "strict",
    api: OpenAIApi = "responses",
    organization: str | None = None,
    project: str | None = None,
    timeout: float | None = None,
    max_retries: int = 0,
    default_headers: Mapping[str, str] | None = None,
) -> OpenAIProvider:
    """Configure access to OpenAI or an OpenAI-compatible server.

    ``schema_policy="strict"`` (the default) sends tools and the output format with
    ``strict: true`` after checking their schemas against OpenAI's supported subset;
    ``"best-effort"`` sends them as they are and leaves validation to fevex.
    ``api="responses"`` (the default) uses the Responses API; ``api="chat"`` uses Chat
    Completions, which most OpenAI-compatible servers speak. ``max_retries`` is the SDK's
    own retrying of failed requests, off by default: errors come back as fevex errors
    marked ``recoverable`` (with ``retry_after`` for rate limits) for the caller to decide.
    A base URL that is not ``http(s)://host...`` is refused here with ``INVALID_MODEL``.
    """
    if schema_policy not in get_args(SchemaPolicy):
        raise _invalid(f"schema_policy must be 'strict' or 'best-effort', not {schema_policy!r}.")
    if api not in get_args(OpenAIApi):
        raise _invalid(f"api must be 'responses' or 'chat', not {api!r}.")
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
        raise _invalid(f"max_retries must be a whole number of at least 0, not {max_retries!r}.")
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    if not key:
        raise _invalid(
            "No OpenAI API key: set OPENAI_API_KEY or pass create_openai(api_key=...). "
            "A local OpenAI-compatible server that ignores keys still needs a placeholder."
        )
    url = base_url if base_url is not None else os.environ.get("OPENAI_BASE_URL") or None
    if url is not None:
        setting = "base_url" if base_url is not None else "OPENAI_BASE_URL"
        url = check_base_url(url, setting=setting, provider="OpenAI")
    settings = ClientSettings(
        api_key=key,
        base_url=url,
        organization=organization,
        project=project,
        timeout=timeout,
        max_retries=max_retries,
        default_headers=dict(default_headers) if default_headers else None,
    )
    return OpenAIProvider(settings, schema_policy=schema_policy, api=api)


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_MODEL", message, details={"provider": "openai"})
