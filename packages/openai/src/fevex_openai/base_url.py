"""Base URLs: refused at configuration when they cannot work, and shown without secrets.

A base URL without a scheme (``127.0.0.1:8767``) is accepted by the SDK and then fails
every request with a bare "Connection error", so it is refused when the provider is
created, with the value and a suggestion. Messages show a URL without its user
information, query or fragment, which may hold credentials.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fevex.errors import FevexConfigurationError

__all__ = ["check_base_url", "host_of", "shown_url"]


def shown_url(value: str) -> str:
    """``value`` without user information, query or fragment, for messages."""
    scheme, separator, rest = value.partition("://")
    if not separator:
        scheme, rest = "", value
    authority, slash, path = rest.partition("/")
    authority = authority.rpartition("@")[2]
    shown = f"{scheme}{separator}{authority}{slash}{path}"
    return shown.split("?", 1)[0].split("#", 1)[0]


def host_of(url: str) -> str:
    """The ``host[:port]`` a URL points to, for network error messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return shown_url(url)
    if not host:
        return shown_url(url)
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}" if port is not None else host


def check_base_url(value: str, *, setting: str, provider: str) -> str:
    """``value`` when it is an ``http(s)://host...`` URL, else ``INVALID_MODEL``.

    ``setting`` names where the value came from (``OPENAI_BASE_URL``, ``base_url``).
    """
    shown = shown_url(value) if isinstance(value, str) else repr(value)
    problem: str | None = None
    if not isinstance(value, str):
        problem = "is not a string"
    else:
        try:
            parts = urlsplit(value.strip())
            host = parts.hostname
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError as error:
            problem = f"is not a URL ({error})"
        else:
            if parts.scheme.lower() not in ("http", "https") or "://" not in value:
                problem = "has no http:// or https:// scheme"
            elif not host:
                problem = "names no host"
    if problem is None:
        return str(value).strip()
    hint = ""
    if isinstance(value, str) and "://" not in value:
        hint = f"; did you mean 'http://{shown}' (or https://)?"
    raise FevexConfigurationError(
        "INVALID_MODEL",
        f"The {provider} base URL {shown!r} from {setting} {problem}{hint}",
        details={"provider": provider.lower(), "setting": setting, "base_url": shown},
    )
