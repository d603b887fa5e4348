"""What of a run's content (inputs, outputs, error messages) spans may carry, and how it
is redacted first.

Spans carry metadata only unless :class:`ContentPolicy` ``include`` names a kind of
content. Content that is included is redacted in two passes: every value under a key that
looks sensitive (a key containing ``authorization``, ``api_key``, ``password``, ``token``,
``secret`` or ``cookie``, at any depth) becomes ``"[REDACTED]"``; then the application's
``redact`` function sees what is left. Keys are compared ignoring case, ``-`` and ``_``
(``X-Api-Key`` and ``apiKey`` match ``api_key``), by substring, so the match errs on the
side of hiding (``max_tokens`` is hidden too).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from fevex.errors import FevexConfigurationError

__all__ = [
    "CONTENT_KINDS",
    "DEFAULT_SENSITIVE_KEYS",
    "REDACTED",
    "ContentKind",
    "ContentPolicy",
    "redact_sensitive_keys",
]

ContentKind = Literal["input", "output", "error_message"]
CONTENT_KINDS: tuple[ContentKind, ...] = ("input", "output", "error_message")
DEFAULT_SENSITIVE_KEYS: tuple[str, ...] = (
    "authorization",
    "api_key",
    "password",
    "token",
    "secret",
    "cookie",
)
REDACTED = "[REDACTED]"


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """Which content spans carry (``include``: any of ``"input"``, ``"output"``,
    ``"error_message"``), the key fragments that mark a value as sensitive, and the
    longest text one content attribute keeps (longer JSON is cut, and says so)."""

    include: Collection[str] = frozenset()
    sensitive_keys: Collection[str] = DEFAULT_SENSITIVE_KEYS
    max_length: int = 8192
    _fragments: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        include = self.include
        if isinstance(include, str) or not isinstance(include, Iterable):
            raise _invalid(
                f"ContentPolicy.include must be a collection of {_kinds()}, not {include!r}."
            )
        unknown = sorted(str(kind) for kind in include if kind not in CONTENT_KINDS)
        if unknown:
            raise _invalid(
                f"ContentPolicy.include names {', '.join(map(repr, unknown))}; it takes {_kinds()}."
            )
        keys = self.sensitive_keys
        if (
            isinstance(keys, str)
            or not isinstance(keys, Iterable)
            or not all(isinstance(key, str) and _normal(key) for key in keys)
        ):
            raise _invalid(
                "ContentPolicy.sensitive_keys must be a collection of texts with a letter or "
                "digit each."
            )
        length = self.max_length
        if isinstance(length, bool) or not isinstance(length, int) or length < 16:
            raise _invalid("ContentPolicy.max_length must be an integer of 16 or more.")
        object.__setattr__(self, "include", frozenset(include))
        object.__setattr__(self, "sensitive_keys", tuple(keys))
        object.__setattr__(self, "_fragments", tuple(_normal(key) for key in keys))

    def is_sensitive(self, key: str) -> bool:
        normal = _normal(key)
        return any(fragment in normal for fragment in self._fragments)


def redact_sensitive_keys(value: Any, policy: ContentPolicy) -> Any:
    """A copy of the JSON ``value`` with the value of every sensitive key replaced."""
    if isinstance(value, Mapping):
        return {
            key: REDACTED
            if isinstance(key, str) and policy.is_sensitive(key)
            else redact_sensitive_keys(item, policy)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_sensitive_keys(item, policy) for item in value]
    return value


def _normal(key: str) -> str:
    return key.lower().replace("-", "").replace("_", "")


def _kinds() -> str:
    return ", ".join(repr(kind) for kind in CONTENT_KINDS)


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_OBSERVABILITY", message)
