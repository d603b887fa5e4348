"""Failures of OpenAI and OpenAI-compatible APIs as fevex errors with stable codes.

The provider's own message is kept because it says what to fix; request headers, and so
the API key, never reach a message or ``details``, and :func:`without_key` scrubs the key
from whatever the provider sent back and cuts the error from the exceptions and frames that
held the SDK's objects. ``details`` holds the provider, the status code, the provider's
error code, the request id, for rate limits ``retry_after`` seconds, and for network errors
the host that could not be reached (never its credentials, path or query).
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fevex.errors import FevexError, FevexRunError
from fevex_openai._sdk import load_openai
from fevex_openai.base_url import host_of

if TYPE_CHECKING:
    from fevex_openai.profile import ProviderProfile

__all__ = [
    "error_from_sdk",
    "error_from_stream_event",
    "invalid_request",
    "provider_error",
    "retry_after_seconds",
    "without_key",
]


def provider_error(
    provider: str, code: str, message: str, *, recoverable: bool = False, **details: Any
) -> FevexRunError:
    """A failure on the model's side of a step."""
    return FevexRunError(
        code,
        message,
        category="model",
        recoverable=recoverable,
        details={"provider": provider, **{k: v for k, v in details.items() if v is not None}},
    )


def invalid_request(provider: str, code: str, message: str, **details: Any) -> FevexRunError:
    """A request fevex refuses to send: the fix is in the agent's configuration."""
    return FevexRunError(
        code,
        message,
        category="configuration",
        details={"provider": provider, **{k: v for k, v in details.items() if v is not None}},
    )


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
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


def _is_context_length(code: str | None, message: str) -> bool:
    lowered = message.lower()
    return code == "context_length_exceeded" or any(
        marker in lowered for marker in ("context length", "context_length", "context window")
    )


def _body_message(body: object, fallback: str) -> str:
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, Mapping) else None
        if isinstance(message, str) and message:
            return message
    return fallback


def without_key(error: FevexError, api_key: str) -> FevexError:
    """``error`` with ``api_key`` replaced in its message and ``details``, and without the
    exceptions it chains or the traceback it was raised through, whose frames held the
    SDK's request and the provider's answer."""
    error.message = _scrubbed(error.message, api_key)
    error.args = (error.message,)
    error.details = _scrubbed(error.details, api_key)
    error.__cause__ = error.__context__ = None
    return error.with_traceback(None)


def _scrubbed(value: Any, api_key: str) -> Any:
    if isinstance(value, str):
        return value.replace(api_key, "[redacted]") if len(api_key) >= 4 else value
    if isinstance(value, Mapping):
        return {key: _scrubbed(item, api_key) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(item, api_key) for item in value]
    return value


def error_from_sdk(error: BaseException, profile: ProviderProfile) -> FevexRunError | None:
    """The fevex error for an exception the SDK raised, or ``None`` for any other.

    Its text may quote what the provider sent, the key included: :func:`without_key`
    before it is raised."""
    openai = load_openai()
    label = profile.label
    name = profile.name
    if isinstance(error, openai.APIConnectionError):
        host = host_of(str(error.request.url))
        if isinstance(error, openai.APITimeoutError):
            return provider_error(
                name,
                "PROVIDER_NETWORK_ERROR",
                f"The request to {label} at {host} timed out.",
                recoverable=True,
                timeout=True,
                host=host,
            )
        cause = error.__cause__
        reason = f" ({type(cause).__name__})" if cause is not None else ""
        return provider_error(
            name,
            "PROVIDER_NETWORK_ERROR",
            f"Could not reach {label} at {host}{reason}: {error.message}",
            recoverable=True,
            host=host,
        )
    if isinstance(error, openai.APIStatusError):
        return _from_status(error, profile)
    if isinstance(error, openai.APIError):
        # Raised while reading a stream: the server sent an error object instead of a chunk.
        return error_from_stream_event(
            profile,
            error.code,
            _body_message(error.body, error.message),
            error_type=error.type,
        )
    if isinstance(error, openai.OpenAIError):
        return provider_error(name, "PROVIDER_ERROR", f"The {label} request failed: {error}")
    if isinstance(error, json.JSONDecodeError):
        # The SDK reads each server-sent event as JSON; the error holds the event's text.
        return provider_error(
            name,
            "PROVIDER_ERROR",
            f"{label} sent a stream event that is not JSON ({error.msg}).",
            recoverable=True,
        )
    return None


def _from_status(error: Any, profile: ProviderProfile) -> FevexRunError:
    label = profile.label
    name = profile.name
    status: int = error.status_code
    code: str | None = error.code
    message = _body_message(error.body, error.message)
    details: dict[str, Any] = {
        "status_code": status,
        "provider_code": code,
        "request_id": error.request_id,
    }
    if status in (401, 403):
        return provider_error(
            name,
            "PROVIDER_AUTHENTICATION",
            f"{label} rejected the credentials ({status}): {message} "
            f"(check {profile.api_key_variable} or the api_key argument).",
            **details,
        )
    if status == 429:
        # An exhausted quota is also a 429, but waiting does not help.
        return provider_error(
            name,
            "PROVIDER_RATE_LIMITED",
            f"{label} rate-limited the request: {message}",
            recoverable=code != "insufficient_quota",
            retry_after=retry_after_seconds(error.response.headers),
            **details,
        )
    if status in (400, 413, 422) and _is_context_length(code, message):
        return provider_error(
            name,
            "PROVIDER_CONTEXT_LENGTH",
            f"The conversation is longer than the model's context window: {message}",
            **details,
        )
    return provider_error(
        name,
        "PROVIDER_ERROR",
        f"{label} answered {status}: {message}",
        recoverable=status >= 500 or status in (408, 409),
        **details,
    )


def error_from_stream_event(
    profile: ProviderProfile, code: str | None, message: str, *, error_type: str | None = None
) -> FevexRunError:
    """An error the server reported inside an open stream."""
    name = profile.name
    details: dict[str, Any] = {"provider_code": code, "mid_stream": True}
    if _is_context_length(code, message):
        return provider_error(
            name,
            "PROVIDER_CONTEXT_LENGTH",
            f"The conversation is longer than the model's context window: {message}",
            **details,
        )
    if code == "rate_limit_exceeded":
        return provider_error(
            name,
            "PROVIDER_RATE_LIMITED",
            f"{profile.label} rate-limited the request: {message}",
            recoverable=True,
            **details,
        )
    # A server fault may pass on a second try; a rejected prompt or image will not.
    transient = code in (None, "server_error") and error_type != "invalid_request_error"
    return provider_error(
        name,
        "PROVIDER_ERROR",
        f"{profile.label} reported an error during the stream: {message}",
        recoverable=transient or error_type == "server_error",
        **details,
    )
