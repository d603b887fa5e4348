"""Turning a validated tool input into the parts of an HTTP request.

Parameters use OpenAPI's default serialization: ``simple`` for path and header values,
``form`` with ``explode`` for query values. A value is a string, a number, a boolean or an
array of those; objects have no default serialization and are refused. Path values are
percent-encoded whole, so a value can never add a path segment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from fevex_openapi.errors import run_error
from fevex_openapi.operations import Operation

__all__ = ["RequestParts", "request_parts"]


@dataclass(frozen=True, slots=True)
class RequestParts:
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    body: bytes | None


def request_parts(operation: Operation, value: Mapping[str, Any]) -> RequestParts:
    path_values: Mapping[str, Any] = value.get("path") or {}
    query_values: Mapping[str, Any] = value.get("query") or {}
    header_values: Mapping[str, Any] = value.get("headers") or {}
    path = operation.path
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    for parameter in operation.parameters:
        name = parameter.name
        if parameter.location == "path":
            text = ",".join(_texts(operation, f"path.{name}", path_values[name]))
            if text in ("", ".", ".."):
                raise _invalid(operation, f"path.{name}", "must name a path segment")
            path = path.replace("{" + name + "}", quote(text, safe=""))
        elif parameter.location == "query" and query_values.get(name) is not None:
            query.extend(
                (name, text) for text in _texts(operation, f"query.{name}", query_values[name])
            )
        elif parameter.location == "header" and header_values.get(name) is not None:
            text = ",".join(_texts(operation, f"headers.{name}", header_values[name]))
            if any(character in text for character in "\r\n\x00"):
                raise _invalid(operation, f"headers.{name}", "must not contain line breaks")
            headers[name] = text
    body = None
    if operation.body_media_type is not None and "body" in value:
        body = json.dumps(value["body"], ensure_ascii=False, allow_nan=False).encode()
    return RequestParts(path, query, headers, body)


def _texts(operation: Operation, where: str, value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    texts = []
    for item in values:
        if isinstance(item, bool):
            texts.append("true" if item else "false")
        elif isinstance(item, str):
            texts.append(item)
        elif isinstance(item, int | float):
            texts.append(json.dumps(item, allow_nan=False))
        else:
            raise _invalid(
                operation, where, "must be a string, number, boolean or an array of those"
            )
    return texts


def _invalid(operation: Operation, where: str, problem: str) -> Exception:
    return run_error(
        "OPENAPI_INPUT_INVALID",
        f"Input for operation {operation.operation_id} is invalid: {where} {problem}.",
        category="validation",
        details={"operation": operation.operation_id},
    )
