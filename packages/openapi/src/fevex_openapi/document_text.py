"""Reading a document the application hands over: a mapping, or its JSON or YAML text.

The result is plain JSON data (dicts with string keys, lists, strings, finite numbers,
booleans, ``None``) that no caller holds, with the SHA-256 of its source, by which the
process keeps one parsed copy of each document (:mod:`fevex_openapi.document`).

YAML is read by PyYAML's safe loader (``pip install "fevex-openapi[yaml]"``), which builds
plain data only and never a Python object the text names: its C loader where PyYAML was
built with libyaml, else the pure-Python one. What YAML has and JSON has not is refused or
made JSON: integer keys (``200:`` response codes) become strings, dates become their ISO
text, and aliases may not expand the document beyond a bound (a "billion laughs" document
is refused, not walked).

Even the C loader builds and resolves every node in Python, tens of times slower than
``json.loads`` (GitHub's REST description takes seconds as YAML, a tenth of one as JSON),
so YAML is read within a size bound (:data:`YAML_MAX_CHARACTERS`, checked before reading)
and a time bound (:data:`YAML_MAX_SECONDS`, checked while reading); beyond either the
document is refused with ``OPENAPI_DOCUMENT_TOO_LARGE``. JSON has neither bound.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import time
from collections.abc import Mapping
from typing import Any

from fevex_openapi.errors import configuration_error

__all__ = [
    "YAML_MAX_CHARACTERS",
    "YAML_MAX_SECONDS",
    "ParsedDocument",
    "document_digest",
    "document_source",
    "parse_document",
]

#: The longest YAML text read, in characters (16 MiB of ASCII): GitHub's REST description,
#: as big as public descriptions come, is about 10 MB as YAML.
YAML_MAX_CHARACTERS = 16 * 1024 * 1024
#: The longest reading of a YAML text may take before it is stopped, for text that is
#: slower to read than its length says (a loaded machine, millions of tiny scalars).
YAML_MAX_SECONDS = 60.0
# Deeper than any real document; keeps a hostile one from exhausting the stack.
_MAX_DEPTH = 256

ParsedDocument = dict[str, Any]


def document_source(document: Mapping[str, Any] | str | bytes) -> str | bytes:
    """The text a document is hashed and parsed from: text as given, a mapping as JSON.

    Serializing a mapping both proves it is plain JSON and detaches the parsed copy from
    later changes to the caller's dict.
    """
    if isinstance(document, bytes | bytearray):
        return bytes(document)
    if isinstance(document, str):
        return document
    if isinstance(document, Mapping):
        try:
            return json.dumps(document, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            raise _not_plain_json() from None
    raise configuration_error(
        "OPENAPI_DOCUMENT_INVALID",
        f"document must be a mapping or JSON or YAML text, not {type(document).__name__}.",
    )


def document_digest(source: str | bytes) -> str:
    """The SHA-256 of a document's source text (a ``str`` as its UTF-8)."""
    if isinstance(source, str):
        source = source.encode("utf-8", "surrogatepass")
    return hashlib.sha256(source).hexdigest()


def parse_document(source: str | bytes) -> ParsedDocument:
    """The document's source text as private JSON data; see the module documentation."""
    text = _as_text(source)
    stripped = text.lstrip("\ufeff \t\r\n")
    json_problem: str | None = None
    if stripped.startswith(("{", "[")):
        try:
            return _as_object(json.loads(stripped, parse_constant=_refuse_constant))
        except RecursionError:
            raise _too_deep() from None
        except ValueError as error:
            # YAML's flow style starts the same way; the YAML reader, when there is one,
            # decides.
            json_problem = str(error)
    return _as_object(_read_yaml(stripped, json_problem))


def _as_text(source: str | bytes) -> str:
    if isinstance(source, str):
        return source
    try:
        return source.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise configuration_error(
            "OPENAPI_DOCUMENT_UNREADABLE", "The OpenAPI document is not UTF-8 text."
        ) from None


def _read_yaml(text: str, json_problem: str | None) -> Any:
    try:
        import yaml
    except ImportError:
        if json_problem is not None:
            raise configuration_error(
                "OPENAPI_DOCUMENT_UNREADABLE",
                f"The OpenAPI document is not valid JSON: {json_problem}.",
            ) from None
        raise configuration_error(
            "OPENAPI_YAML_UNAVAILABLE",
            "The OpenAPI document is not JSON, and reading YAML needs PyYAML (the extra "
            '"yaml" of fevex-openapi): pip install "pyyaml>=6.0" (or pass the document as JSON).',
        ) from None
    if len(text) > YAML_MAX_CHARACTERS:
        raise _too_large(
            f"is {len(text):,} characters long, over the {YAML_MAX_CHARACTERS:,} this plugin "
            "reads as YAML",
            {"characters": len(text), "limit": YAML_MAX_CHARACTERS},
        )
    loader = _bounded_loader(yaml, time.monotonic() + YAML_MAX_SECONDS)(text)
    try:
        raw = loader.get_single_data()
    except _OutOfTime:
        raise _too_large(
            f"took more than {YAML_MAX_SECONDS:g} s to read as YAML",
            {"seconds": YAML_MAX_SECONDS},
        ) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or "malformed text"
        raise configuration_error(
            "OPENAPI_DOCUMENT_UNREADABLE",
            f"The OpenAPI document is neither JSON nor valid YAML: {problem}{where}.",
        ) from None
    except RecursionError:
        raise _too_deep() from None
    finally:
        loader.dispose()
    # Aliases share one node between many places; expanded, each place is a copy. Without
    # aliases a document has fewer nodes than characters, so that is the bound.
    budget = [len(text) + 1000]
    return _plain(raw, 0, budget)


class _OutOfTime(Exception):
    """Reading a YAML text went past its deadline."""


def _bounded_loader(yaml: Any, deadline: float) -> Any:
    """PyYAML's safe loader (the C one when PyYAML was built with libyaml) that stops at
    ``deadline`` (of :func:`time.monotonic`): it looks at every node it resolves and every
    value it builds."""
    safe_loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class BoundedSafeLoader(safe_loader):  # type: ignore[misc]
        def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
            if time.monotonic() >= deadline:
                raise _OutOfTime
            return super().resolve(kind, value, implicit)

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            if time.monotonic() >= deadline:
                raise _OutOfTime
            return super().construct_object(node, deep)

    return BoundedSafeLoader


def _plain(value: Any, depth: int, budget: list[int]) -> Any:
    """A YAML value as JSON data: a fresh tree, with no node shared between two places."""
    budget[0] -= 1
    if budget[0] < 0:
        raise configuration_error(
            "OPENAPI_DOCUMENT_INVALID",
            "The YAML document's aliases expand it far beyond its size; refused.",
        )
    if depth > _MAX_DEPTH:
        raise _too_deep()
    if isinstance(value, dict):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, str | int):
                raise configuration_error(
                    "OPENAPI_DOCUMENT_INVALID",
                    f"The YAML document has a mapping key that is not a string: {key!r:.60}.",
                )
            result[str(key)] = _plain(item, depth + 1, budget)
        return result
    if isinstance(value, list):
        return [_plain(item, depth + 1, budget) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise configuration_error(
            "OPENAPI_DOCUMENT_INVALID", "The YAML document holds .nan or .inf, which JSON has not."
        )
    if isinstance(value, datetime.date):  # datetime included: YAML timestamps
        return value.isoformat()
    if isinstance(value, bytes):
        raise configuration_error(
            "OPENAPI_DOCUMENT_INVALID", "The YAML document holds !!binary data, which JSON has not."
        )
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise configuration_error(
        "OPENAPI_DOCUMENT_INVALID",
        f"The YAML document holds a {type(value).__name__}, which JSON has not.",
    )


def _as_object(data: Any) -> ParsedDocument:
    if not isinstance(data, dict):
        raise configuration_error(
            "OPENAPI_DOCUMENT_INVALID", "The OpenAPI document must be an object at the top."
        )
    return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _not_plain_json() -> Exception:
    return configuration_error(
        "OPENAPI_DOCUMENT_INVALID",
        "The OpenAPI document must hold only JSON values (dicts with string keys, "
        "lists, strings, finite numbers, booleans and None).",
    )


def _too_large(problem: str, details: dict[str, Any]) -> Exception:
    return configuration_error(
        "OPENAPI_DOCUMENT_TOO_LARGE",
        f"The OpenAPI document {problem}: YAML is read tens of times slower than JSON. "
        "Convert it to JSON once, ahead of time, and pass the JSON.",
        details,
    )


def _too_deep() -> Exception:
    return configuration_error(
        "OPENAPI_DOCUMENT_INVALID",
        f"The OpenAPI document nests deeper than {_MAX_DEPTH} levels.",
    )
