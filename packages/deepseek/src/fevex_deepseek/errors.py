"""DeepSeek failures as fevex errors with stable codes.

The provider's own message is kept, because it is what a user acts on, but the API key is
scrubbed from it and no header ever reaches an error, a log or an event.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

from fevex.errors import ErrorCategory, FevexRunError

__all__ = [
    "PROVIDER_AUTHENTICATION",
    "PROVIDER_CONTENT_UNSUPPORTED",
    "PROVIDER_CONTEXT_LENGTH",
    "PROVIDER_EMPTY_OUTPUT",
    "PROVIDER_ERROR",
    "PROVIDER_NETWORK_ERROR",
    "PROVIDER_OPTION_NOT_ALLOWED",
    "PROVIDER_RATE_LIMITED",
    "PROVIDER_REFUSAL",
    "PROVIDER_SCHEMA_UNSUPPORTED",
    "provider_error",
    "translate_sdk_error",
]

PROVIDER_AUTHENTICATION = "PROVIDER_AUTHENTICATION"
PROVIDER_RATE_LIMITED = "PROVIDER_RATE_LIMITED"
PROVIDER_CONTEXT_LENGTH = "PROVIDER_CONTEXT_LENGTH"
PROVIDER_ERROR = "PROVIDER_ERROR"
PROVIDER_NETWORK_ERROR = "PROVIDER_NETWORK_ERROR"
PROVIDER_EMPTY_OUTPUT = "PROVIDER_EMPTY_OUTPUT"
PROVIDER_REFUSAL = "PROVIDER_REFUSAL"
PROVIDER_SCHEMA_UNSUPPORTED = "PROVIDER_SCHEMA_UNSUPPORTED"
PROVIDER_OPTION_NOT_ALLOWED = "PROVIDER_OPTION_NOT_ALLOWED"
PROVIDER_CONTENT_UNSUPPORTED = "PROVIDER_CONTENT_UNSUPPORTED"

# What DeepSeek (like OpenAI) says when the prompt plus max_tokens exceed the window.
_CONTEXT_LENGTH_MARKERS = ("context length", "context_length", "context window")


def provider_error(
    code: str,
    message: str,
    *,
    recoverable: bool = False,
    category: ErrorCategory = "model",
    **details: Any,
) -> FevexRunError:
    return FevexRunError(
        code,
        message,
        recoverable=recoverable,
        category=category,
        details={"provider": "deepseek", **details},
    )


def translate_sdk_error(error: BaseException, api_key: str | None) -> FevexRunError | None:
    """The fevex error for an exception of the openai SDK, or ``None`` for anything else."""
    import openai

    if not isinstance(error, openai.OpenAIError):
        return None
    message = _scrubbed(_provider_message(error), api_key)
    if isinstance(error, openai.APIConnectionError):
        timed_out = isinstance(error, openai.APITimeoutError)
        return provider_error(
            PROVIDER_NETWORK_ERROR,
            f"DeepSeek could not be reached: {message}",
            recoverable=True,
            timed_out=timed_out,
        )
    if isinstance(error, openai.APIStatusError):
        return _from_status(error, message)
    if isinstance(error, openai.APIError):
        # An error event inside a stream that had already started: the request itself was
        # accepted, so the failure is on the provider's side and worth retrying.
        return provider_error(
            PROVIDER_ERROR,
            f"DeepSeek failed while streaming: {message}",
            recoverable=True,
            provider_code=error.code,
        )
    return provider_error(PROVIDER_ERROR, f"DeepSeek request failed: {message}")


def _from_status(error: Any, message: str) -> FevexRunError:
    status: int = error.status_code
    context = {"status_code": status, "provider_code": error.code}
    if status in (401, 403):
        return provider_error(
            PROVIDER_AUTHENTICATION,
            f"DeepSeek rejected the credentials ({status}): {message}. Check DEEPSEEK_API_KEY.",
            **context,
        )
    if status == 429:
        retry_after = _retry_after(error.response.headers)
        return provider_error(
            PROVIDER_RATE_LIMITED,
            f"DeepSeek rate limit reached: {message}",
            recoverable=True,
            retry_after=retry_after,
            **context,
        )
    lowered = message.lower()
    if status in (400, 413, 422) and any(marker in lowered for marker in _CONTEXT_LENGTH_MARKERS):
        return provider_error(
            PROVIDER_CONTEXT_LENGTH,
            f"The request does not fit the model's context window: {message}",
            **context,
        )
    if status >= 500:
        return provider_error(
            PROVIDER_ERROR,
            f"DeepSeek failed ({status}): {message}",
            recoverable=True,
            **context,
        )
    return provider_error(
        PROVIDER_ERROR, f"DeepSeek rejected the request ({status}): {message}", **context
    )


def _provider_message(error: Any) -> str:
    body = getattr(error, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
    return str(getattr(error, "message", None) or error)


def _scrubbed(message: str, api_key: str | None) -> str:
    if api_key and len(api_key) >= 4:
        message = message.replace(api_key, "[redacted]")
    return message


def _retry_after(headers: Any) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or a date)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(float(milliseconds) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - time.time(), 0.0)
