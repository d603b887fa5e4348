"""The signature of an exported checkpoint: HMAC-SHA256, with the app's checkpoint key,
over the checkpoint's canonical JSON (keys sorted, no whitespace, UTF-8) without its
``signature`` field, written ``hmac-sha256:<hex>``.

An exported checkpoint travels between environments, and restoring one starts a run that
calls the app's tools: the signature says it is one that an app holding the same key
exported, unchanged. The key is a credential. It is given as text, bytes or an object
with ``get_secret_value()`` (pydantic's ``SecretStr``), and kept only inside an ``hmac``
object: no attribute, ``repr``, log line or error message holds it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from typing import Any, Protocol

from fevex._ground.canonical_json import canonical_json
from fevex.errors import FevexConfigurationError, FevexRunError

__all__ = [
    "CheckpointSigner",
    "SecretValue",
    "checkpoint_signer",
    "unverifiable",
]

_KEY_VARIABLE = "FEVEX_CHECKPOINT_KEY"
# The field of an exported checkpoint that holds its signature.
SIGNATURE_FIELD = "signature"
_PREFIX = "hmac-sha256:"
# RFC 2104 asks for a key at least as long as the hash's output.
_MIN_KEY_BYTES = 32
_WHERE_TO_SET = f"create_fevex(checkpoint_key=...) or {_KEY_VARIABLE}"


class SecretValue(Protocol):
    """A secret that gives its value only when asked (pydantic's ``SecretStr``)."""

    def get_secret_value(self) -> str | bytes: ...


class CheckpointSigner:
    """Signs the checkpoints an app exports and verifies the ones it is given back."""

    __slots__ = ("_mac",)

    def __init__(self, key: bytes) -> None:
        self._mac = hmac.new(key, digestmod=hashlib.sha256)

    def __repr__(self) -> str:
        return "CheckpointSigner(HMAC-SHA256)"

    def signed(self, checkpoint: dict[str, Any]) -> dict[str, Any]:
        """``checkpoint`` with its signature."""
        return {**checkpoint, SIGNATURE_FIELD: self._signature(checkpoint)}

    def verify(self, checkpoint: Mapping[str, Any]) -> None:
        """Refuse a ``checkpoint`` this key did not sign as it is:
        ``CHECKPOINT_SIGNATURE_INVALID``."""
        given = checkpoint.get(SIGNATURE_FIELD)
        try:
            expected: str | None = self._signature(checkpoint)
        except (TypeError, ValueError, RecursionError):
            expected = None  # not JSON: no key signed it
        if (
            expected is None
            or not isinstance(given, str)
            or not hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())
        ):
            raise FevexRunError(
                "CHECKPOINT_SIGNATURE_INVALID",
                "The checkpoint's signature does not match it: it was changed after it was "
                "exported, or signed with another key. Nothing was started.",
                details={"reason": "signature"},
            )

    def _signature(self, checkpoint: Mapping[str, Any]) -> str:
        unsigned = {key: value for key, value in checkpoint.items() if key != SIGNATURE_FIELD}
        mac = self._mac.copy()
        mac.update(canonical_json(unsigned).encode("utf-8"))
        return _PREFIX + mac.hexdigest()


def checkpoint_signer(key: object) -> CheckpointSigner | FevexConfigurationError | None:
    """The signer of ``key`` (``None``: ``FEVEX_CHECKPOINT_KEY``, and no signer when it is
    unset or empty), or the ``INVALID_CONFIG`` problem, naming neither the key nor any part
    of it, of a key that is not text, bytes or a secret holding one, or is shorter than 32
    bytes. The problem is returned, not raised: no frame of its traceback holds the key."""
    where = "checkpoint_key"
    if key is None:
        key = os.environ.get(_KEY_VARIABLE) or None
        where = _KEY_VARIABLE
        if key is None:
            return None
    get_secret_value = getattr(key, "get_secret_value", None)
    if callable(get_secret_value):
        key = get_secret_value()
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, bytes):
        return FevexConfigurationError(
            "INVALID_CONFIG",
            f"{where} must be text, bytes or a secret holding one (pydantic's SecretStr), "
            f"not {type(key).__name__}.",
        )
    if len(key) < _MIN_KEY_BYTES:
        return FevexConfigurationError(
            "INVALID_CONFIG",
            f"{where} must be at least {_MIN_KEY_BYTES} bytes long "
            "(secrets.token_urlsafe(32) makes one).",
        )
    return CheckpointSigner(key)


def unverifiable(reason: str) -> FevexRunError:
    """The refusal of a checkpoint whose signature cannot be checked: it has none
    (``CHECKPOINT_UNSIGNED``) or the app has no key (``CHECKPOINT_KEY_MISSING``)."""
    if reason == "unsigned":
        return FevexRunError(
            "CHECKPOINT_UNSIGNED",
            "The checkpoint is not signed, so nothing says which app exported it. Export it "
            f"from an app with a checkpoint key ({_WHERE_TO_SET}, the same key here), or "
            "pass trusted=True if you know where it came from. Nothing was started.",
            details={"reason": reason},
        )
    return FevexRunError(
        "CHECKPOINT_KEY_MISSING",
        "The checkpoint is signed, but this app has no checkpoint key to verify it with: "
        f"give it the key of the app that exported it ({_WHERE_TO_SET}), or pass "
        "trusted=True if you know where it came from. Nothing was started.",
        details={"reason": reason},
    )
