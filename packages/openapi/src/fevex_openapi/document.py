"""Reading an OpenAPI document: bundled JSON, version 3.1.x, local references only.

A document is data the application hands over at definition time. It is read once, copied
(later changes to the caller's dict do not reach the provider) and refused whole when it
is something this plugin cannot honour exactly: YAML or other text, another OpenAPI
version, a ``$ref`` that leaves the document, a schema dialect other than the default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from fevex_openapi.errors import configuration_error

__all__ = ["OpenApiDocument", "escape_part", "json_pointer", "load_document", "unescape_part"]

_VERSION = re.compile(r"3\.1\.\d+")
_DIALECTS = frozenset(
    {
        "https://spec.openapis.org/oas/3.1/dialect/base",
        "https://spec.openapis.org/oas/3.1/dialect/2024-10-25",
        "https://json-schema.org/draft/2020-12/schema",
    }
)
_MAX_REF_HOPS = 32


def escape_part(part: str | int) -> str:
    """One JSON Pointer reference token (``/items`` becomes ``~1items``)."""
    return str(part).replace("~", "~0").replace("/", "~1")


def unescape_part(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def json_pointer(*parts: str | int) -> str:
    """A location in the document, as a JSON Pointer fragment (``#/paths/~1items/get``)."""
    return "#/" + "/".join(map(escape_part, parts)) if parts else "#"


@dataclass(frozen=True, slots=True)
class OpenApiDocument:
    """A checked document: a private JSON copy whose references all stay inside it."""

    data: dict[str, Any]

    def resolve(self, ref: str, location: str) -> Any:
        """The value a local ``$ref`` (``#/components/...``) points at."""
        node: Any = self.data
        for part in _pointer_parts(ref):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise configuration_error(
                    "OPENAPI_REF_INVALID",
                    f"The $ref {ref!r} at {location} points at nothing in the document.",
                    {"location": location},
                )
        return node

    def follow(self, node: Any, location: str) -> tuple[Any, str]:
        """``node`` with Reference Objects followed, and the location it ends up at."""
        for _ in range(_MAX_REF_HOPS):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node, location
            ref = node["$ref"]
            node, location = self.resolve(ref, location), ref
        raise configuration_error(
            "OPENAPI_REF_INVALID",
            f"The references starting at {location} form a loop or a chain longer than "
            f"{_MAX_REF_HOPS}.",
            {"location": location},
        )


def load_document(document: Mapping[str, Any] | str | bytes) -> OpenApiDocument:
    """Check and copy ``document``: a mapping, or its JSON text."""
    data = _as_json_object(document)
    _check_version(data)
    _check_references(data, "#")
    dialect = data.get("jsonSchemaDialect")
    if dialect is not None and dialect not in _DIALECTS:
        raise configuration_error(
            "OPENAPI_SCHEMA_UNSUPPORTED",
            f"jsonSchemaDialect {dialect!r} is not supported; only the OpenAPI 3.1 default "
            "dialect (JSON Schema 2020-12) is.",
            {"keyword": "jsonSchemaDialect", "location": "#/jsonSchemaDialect"},
        )
    if not isinstance(data.get("paths"), dict):
        raise configuration_error(
            "OPENAPI_DOCUMENT_INVALID", "The OpenAPI document has no 'paths' object."
        )
    return OpenApiDocument(data)


def _as_json_object(document: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
    if isinstance(document, bytes | bytearray):
        try:
            document = bytes(document).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise configuration_error(
                "OPENAPI_DOCUMENT_NOT_JSON", "The OpenAPI document is not UTF-8 JSON text."
            ) from None
    if isinstance(document, str):
        text = document.lstrip("\ufeff \t\r\n")
        try:
            data = json.loads(text, parse_constant=_refuse_constant)
        except ValueError:
            hint = (
                ""
                if text.startswith(("{", "["))
                else " YAML is not supported: convert the "
                "document to JSON (bundled, with local $refs only)."
            )
            raise configuration_error(
                "OPENAPI_DOCUMENT_NOT_JSON", f"The OpenAPI document is not valid JSON.{hint}"
            ) from None
    elif isinstance(document, Mapping):
        try:
            # A round trip through JSON both proves the value is plain JSON and detaches
            # the provider from later changes to the caller's dict.
            data = json.loads(json.dumps(document, allow_nan=False))
        except (TypeError, ValueError):
            raise configuration_error(
                "OPENAPI_DOCUMENT_INVALID",
                "The OpenAPI document must hold only JSON values (dicts with string keys, "
                "lists, strings, finite numbers, booleans and None).",
            ) from None
    else:
        raise configuration_error(
            "OPENAPI_DOCUMENT_INVALID",
            f"document must be a mapping or JSON text, not {type(document).__name__}.",
        )
    if not isinstance(data, dict):
        raise configuration_error(
            "OPENAPI_DOCUMENT_INVALID", "The OpenAPI document must be a JSON object."
        )
    return data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_version(data: dict[str, Any]) -> None:
    version = data.get("openapi")
    if "swagger" in data and version is None:
        version = f"Swagger {data['swagger']}"
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise configuration_error(
            "OPENAPI_VERSION_UNSUPPORTED",
            f"OpenAPI version {version!r} is not supported; only 3.1.x documents are.",
            {"version": version if isinstance(version, str) else None},
        )


def _check_references(node: Any, location: str) -> None:
    """Every ``$ref`` anywhere in the document must point inside it."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if "$ref" in node and not (isinstance(ref, str) and (ref == "#" or ref.startswith("#/"))):
            shown = ref[:120] if isinstance(ref, str) else type(ref).__name__
            raise configuration_error(
                "OPENAPI_REF_UNSUPPORTED",
                f"The $ref {shown!r} at {location} leaves the document; only local references "
                "(#/...) are supported. Bundle the document first.",
                {"location": location},
            )
        for key, value in node.items():
            _check_references(value, f"{location}/{escape_part(key)}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            _check_references(value, f"{location}/{index}")


def _pointer_parts(ref: str) -> list[str]:
    fragment = unquote(ref[1:])
    if not fragment:
        return []
    return [unescape_part(part) for part in fragment[1:].split("/")]
