"""Canonical JSON: one text for one value, so that files diff cleanly and digests are stable.

Keys are sorted, separators fixed, text kept as UTF-8 (``ensure_ascii=False``), tuples
written as arrays and ``-0.0`` as ``0.0``; floats keep Python's shortest round-trip form,
which is the same on every platform. NaN, infinities, non-string keys and values that are
not JSON are refused with ``TypeError`` rather than written in a form another reader would
reject or read back differently. :func:`json_digest` is the digest of a JSON value that
every durable record of fevex uses.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

__all__ = ["canonical_json", "json_digest"]

#: What every digest of :func:`json_digest` starts with: the algorithm, for a reader of a
#: stored digest.
DIGEST_PREFIX = "sha256:"


def canonical_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as canonical JSON text; ``indent`` spreads it over lines for review."""
    return _text(_normalized(value, "value"), indent).decode("utf-8")


def json_digest(value: Any) -> str:
    """``sha256:<hex>``: the one digest of a JSON value, for every record that must know
    a value again (the step journal, model cassettes, the pins of remote tool schemas).

    It hashes the compact text of ``value`` exactly as given, without normalizing it first:
    keys sorted, UTF-8, no whitespace, which is the text :func:`canonical_json` writes for
    every value it accepts that holds no ``-0.0``. ``-0.0`` keeps its sign, as in the digests
    the journal has stored since its first format (a stored run replays only if those stay
    what they were). NaN, infinities and values that are not JSON raise ``TypeError``.
    """
    try:
        text = _text(value, None)
    except ValueError as error:
        raise TypeError(f"value: {error}") from None
    return DIGEST_PREFIX + hashlib.sha256(text).hexdigest()


# The compact form, made once: every journalled step digests its input with it.
_COMPACT = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _text(value: Any, indent: int | None) -> bytes:
    separators = (",", ":") if indent is None else (",", ": ")
    if indent is None:
        text = _COMPACT.encode(value)
    else:
        text = json.dumps(
            value,
            sort_keys=True,
            separators=separators,
            ensure_ascii=False,
            indent=indent,
            allow_nan=False,
        )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate has no UTF-8 form: escape everything rather than write bytes no
        # reader can decode. Still one text for one value.
        text = json.dumps(
            value, sort_keys=True, separators=separators, ensure_ascii=True, indent=indent
        )
        return text.encode("ascii")


def _normalized(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TypeError(f"{where}: JSON has no NaN or infinity")
        return 0.0 if value == 0 else value
    if isinstance(value, dict):
        normalized: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: object key {key!r} is not a string")
            normalized[key] = _normalized(item, f"{where}.{key}")
        return normalized
    if isinstance(value, list | tuple):
        return [_normalized(item, f"{where}[{index}]") for index, item in enumerate(value)]
    raise TypeError(f"{where}: {type(value).__name__} is not JSON")
