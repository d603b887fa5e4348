"""Canonical JSON: one text for one value, so that files diff cleanly and digests are stable.

Keys are sorted, separators fixed, text kept as UTF-8 (``ensure_ascii=False``), tuples
written as arrays and ``-0.0`` as ``0.0``; floats keep Python's shortest round-trip form,
which is the same on every platform. NaN, infinities, non-string keys and values that are
not JSON are refused with ``TypeError`` rather than written in a form another reader would
reject or read back differently.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

__all__ = ["canonical_json", "json_digest"]


def canonical_json(value: Any, *, indent: int | None = None) -> str:
    """``value`` as canonical JSON text; ``indent`` spreads it over lines for review."""
    normalized = _normalized(value, "value")
    separators = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(
        normalized, sort_keys=True, separators=separators, ensure_ascii=False, indent=indent
    )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate has no UTF-8 form: escape everything rather than write bytes no
        # reader can decode. Still one text for one value.
        text = json.dumps(
            normalized, sort_keys=True, separators=separators, ensure_ascii=True, indent=indent
        )
    return text


def json_digest(value: Any) -> str:
    """``sha256:<hex>`` of the compact canonical form of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


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
