"""The allowlisted operations of a document, each read into what a tool call needs.

A tool's input schema groups the operation's parameters by where they go, so names never
collide (a query parameter and a body property may both be called ``id``)::

    {"path": {...}, "query": {...}, "headers": {...}, "body": <the JSON request body>}

Only the groups an operation uses appear; ``path`` is required when the operation has
path parameters, ``body`` when its request body is required. Everything this plugin
cannot send or read exactly is refused here, at definition time.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fevex_openapi.deferred_schema import DeferredSchema
from fevex_openapi.document import OpenApiDocument, escape_part, json_pointer
from fevex_openapi.errors import configuration_error
from fevex_openapi.schema_subset import SchemaBuilder

__all__ = [
    "Operation",
    "Parameter",
    "ResponseShape",
    "is_header_name",
    "is_json_media_type",
    "read_operations",
]

_LOCATIONS = {"path": "path", "query": "query", "header": "headers"}
_DEFAULT_STYLES = {"path": ("simple", False), "query": ("form", True), "header": ("simple", False)}
# OpenAPI 3.1 says header parameters with these names SHALL be ignored.
_IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})
# Headers that shape the connection or the message itself; a model must never set them.
_RESERVED_HEADERS = frozenset(
    {
        "connection",
        "content-length",
        "cookie",
        "expect",
        "host",
        "keep-alive",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_SUCCESS = re.compile(r"2(\d\d|XX)|default")


def is_header_name(name: object) -> bool:
    """Whether ``name`` is an HTTP field name (an RFC 9110 token)."""
    return isinstance(name, str) and _HEADER_NAME.fullmatch(name) is not None


def is_json_media_type(media_type: str) -> bool:
    """``application/json`` or a ``+json`` type (``application/problem+json``)."""
    essence = media_type.split(";", 1)[0].strip().lower()
    kind, _, subtype = essence.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    location: str  # "path", "query" or "header"


@dataclass(frozen=True, slots=True)
class ResponseShape:
    """A documented response: whether it has a JSON body, and its standalone schema."""

    has_content: bool
    schema: DeferredSchema | None = None


@dataclass(frozen=True, slots=True)
class Operation:
    operation_id: str
    method: str
    path: str
    server_url: str
    description: str
    parameters: tuple[Parameter, ...]
    body_media_type: str | None  # None: the operation takes no request body
    input_schema: Mapping[str, Any]
    input_validator: DeferredSchema
    responses: Mapping[str, ResponseShape] = field(default_factory=dict)

    def response_for(self, status: int) -> ResponseShape | None:
        """The documented response for ``status``: exact code, then range, then default."""
        for key in (str(status), f"{str(status)[0]}XX", "default"):
            if key in self.responses:
                return self.responses[key]
        return None


def read_operations(
    document: OpenApiDocument, allow: Sequence[str], base_url: str | None
) -> dict[str, Operation]:
    """The operations named in ``allow``, in that order; unknown names are refused.

    Each is read (and everything it reaches checked) once per document and process: a
    second provider of the same operation reuses it.
    """
    unknown = [name for name in allow if name not in document.operations]
    if unknown and document.unreadable_paths:
        # The operation may be in a path item that could not be read: say why.
        broken = next(iter(document.unreadable_paths.values()))
        raise configuration_error(broken.code, broken.message, dict(broken.details))
    if unknown:
        raise configuration_error(
            "OPENAPI_OPERATION_UNKNOWN",
            f"The document has no operation with operationId {', '.join(map(repr, unknown))}.",
            {"operations": unknown},
        )
    ambiguous = [name for name in allow if name in document.duplicates]
    if ambiguous:
        raise configuration_error(
            "OPENAPI_DOCUMENT_INVALID",
            f"More than one operation has operationId {', '.join(map(repr, ambiguous))}.",
            {"operations": ambiguous},
        )
    with _READ_LOCK:
        read = _READ.setdefault(document, {})
    builder = SchemaBuilder.for_document(document)
    operations: dict[str, Operation] = {}
    for name in allow:
        operation = read.get((name, base_url))
        if operation is None:
            entry = document.operations[name]
            path_item, _ = document.follow(
                document.data["paths"][entry.path], json_pointer("paths", entry.path)
            )
            reader = _OperationReader(
                document, builder, name, entry.path, entry.method, path_item, entry.location
            )
            operation = read[(name, base_url)] = reader.read(base_url)
        operations[name] = operation
    return operations


# The operations read from each document: (operationId, base_url) -> Operation.
_READ: weakref.WeakKeyDictionary[OpenApiDocument, dict[tuple[str, str | None], Operation]] = (
    weakref.WeakKeyDictionary()
)
_READ_LOCK = threading.Lock()


class _OperationReader:
    def __init__(
        self,
        document: OpenApiDocument,
        builder: SchemaBuilder,
        operation_id: str,
        path: str,
        method: str,
        path_item: dict[str, Any],
        location: str,
    ) -> None:
        self.document = document
        self.builder = builder
        self.operation_id = operation_id
        self.path = path
        self.method = method
        self.path_item = path_item
        self.operation: dict[str, Any] = path_item[method]
        self.location = location
        self.defs: dict[str, Any] = {}

    def read(self, base_url: str | None) -> Operation:
        groups: dict[str, dict[str, Any]] = {}
        parameters = self.parameters(groups)
        self.check_placeholders(parameters)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for group in ("path", "query", "headers"):
            if group in groups:
                properties[group] = groups[group]
                if groups[group]["required"]:
                    required.append(group)
                else:
                    del groups[group]["required"]
        body_media_type, body_required = self.body(properties)
        if body_required:
            required.append("body")
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            schema["required"] = required
        if self.defs:
            schema["$defs"] = self.defs
        return Operation(
            operation_id=self.operation_id,
            method=self.method.upper(),
            path=self.path,
            server_url=self.server_url(base_url),
            description=self.description(),
            parameters=tuple(parameters),
            body_media_type=body_media_type,
            input_schema=schema,
            input_validator=DeferredSchema(
                schema, operation_id=self.operation_id, location=self.location
            ),
            responses=self.responses(),
        )

    def refuse(self, code: str, problem: str, location: str) -> Exception:
        return configuration_error(
            code,
            f"Operation {self.operation_id}: {problem} (at {location}).",
            {"operation": self.operation_id, "location": location},
        )

    def description(self) -> str:
        parts = [
            text.strip()
            for text in (self.operation.get("summary"), self.operation.get("description"))
            if isinstance(text, str) and text.strip()
        ]
        return "\n\n".join(parts) or f"{self.method.upper()} {self.path}"

    def parameters(self, groups: dict[str, dict[str, Any]]) -> list[Parameter]:
        declared: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        for owner, owner_location in (
            (self.path_item, json_pointer("paths", self.path)),
            (self.operation, self.location),
        ):
            entries = owner.get("parameters", [])
            if not isinstance(entries, list):
                raise self.refuse(
                    "OPENAPI_DOCUMENT_INVALID", "parameters must be an array", owner_location
                )
            for index, entry in enumerate(entries):
                here = f"{owner_location}/parameters/{index}"
                parameter, here = self.document.follow(entry, here)
                if not (
                    isinstance(parameter, dict)
                    and isinstance(parameter.get("name"), str)
                    and isinstance(parameter.get("in"), str)
                ):
                    raise self.refuse(
                        "OPENAPI_DOCUMENT_INVALID", "a parameter needs a name and an 'in'", here
                    )
                key_name = parameter["name"]
                if parameter["in"] == "header":
                    key_name = key_name.lower()
                # An operation's parameter replaces the path item's one of the same name.
                declared[(parameter["in"], key_name)] = (parameter, here)
        result: list[Parameter] = []
        for parameter, here in declared.values():
            converted = self.parameter(parameter, here)
            if converted is None:
                continue
            group = groups.setdefault(
                _LOCATIONS[converted.location],
                {"type": "object", "properties": {}, "required": [], "additionalProperties": False},
            )
            schema = self.builder.convert(
                parameter.get("schema", True), f"{here}/schema", self.defs
            )
            group["properties"][converted.name] = _described(schema, parameter.get("description"))
            if parameter.get("required") is True:
                group["required"].append(converted.name)
            result.append(converted)
        return result

    def parameter(self, parameter: dict[str, Any], here: str) -> Parameter | None:
        name, location = parameter["name"], parameter["in"]
        if location == "cookie":
            raise self.refuse(
                "OPENAPI_PARAMETER_UNSUPPORTED", f"cookie parameter {name!r} is not supported", here
            )
        if location not in _DEFAULT_STYLES:
            raise self.refuse(
                "OPENAPI_DOCUMENT_INVALID", f"parameter {name!r} has an unknown 'in'", here
            )
        if location == "header" and name.lower() in _IGNORED_HEADERS:
            return None
        if location == "header" and not is_header_name(name):
            raise self.refuse(
                "OPENAPI_PARAMETER_UNSUPPORTED", f"{name!r} is not an HTTP header name", here
            )
        if location == "header" and name.lower() in _RESERVED_HEADERS:
            raise self.refuse(
                "OPENAPI_PARAMETER_UNSUPPORTED",
                f"header parameter {name!r} would let a caller set a connection header",
                here,
            )
        if "content" in parameter:
            raise self.refuse(
                "OPENAPI_PARAMETER_UNSUPPORTED",
                f"parameter {name!r} uses 'content'; only 'schema' parameters are supported",
                here,
            )
        style, explode = _DEFAULT_STYLES[location]
        if parameter.get("style", style) != style or parameter.get("explode", explode) != explode:
            raise self.refuse(
                "OPENAPI_PARAMETER_UNSUPPORTED",
                f"parameter {name!r} uses a style or explode other than the default for "
                f"{location} parameters ({style}, explode={str(explode).lower()})",
                here,
            )
        if parameter.get("allowReserved") is True:
            raise self.refuse(
                "OPENAPI_PARAMETER_UNSUPPORTED",
                f"parameter {name!r} sets allowReserved; values are always percent-encoded",
                here,
            )
        if location == "path" and parameter.get("required") is not True:
            raise self.refuse(
                "OPENAPI_DOCUMENT_INVALID", f"path parameter {name!r} must be required", here
            )
        return Parameter(name, location)

    def check_placeholders(self, parameters: list[Parameter]) -> None:
        placeholders = set(_PLACEHOLDER.findall(self.path))
        declared = {p.name for p in parameters if p.location == "path"}
        if placeholders != declared:
            missing = sorted(placeholders - declared) or sorted(declared - placeholders)
            raise self.refuse(
                "OPENAPI_DOCUMENT_INVALID",
                f"the path template and its path parameters disagree about {missing}",
                self.location,
            )

    def body(self, properties: dict[str, Any]) -> tuple[str | None, bool]:
        entry = self.operation.get("requestBody")
        if entry is None:
            return None, False
        request_body, here = self.document.follow(entry, f"{self.location}/requestBody")
        if not isinstance(request_body, dict) or not isinstance(request_body.get("content"), dict):
            raise self.refuse(
                "OPENAPI_DOCUMENT_INVALID", "a request body needs a 'content' object", here
            )
        media_type = _json_media_type(request_body["content"])
        if media_type is None:
            offered = ", ".join(sorted(request_body["content"])) or "nothing"
            raise self.refuse(
                "OPENAPI_CONTENT_UNSUPPORTED",
                f"the request body offers {offered}; only JSON bodies (application/json) "
                "are supported",
                here,
            )
        content = request_body["content"][media_type]
        schema_location = f"{here}/content/{escape_part(media_type)}/schema"
        schema = content.get("schema", True) if isinstance(content, dict) else True
        properties["body"] = self.builder.convert(schema, schema_location, self.defs)
        return media_type, request_body.get("required") is True

    def responses(self) -> dict[str, ResponseShape]:
        entries = self.operation.get("responses", {})
        if not isinstance(entries, dict):
            raise self.refuse(
                "OPENAPI_DOCUMENT_INVALID", "responses must be an object", self.location
            )
        shapes: dict[str, ResponseShape] = {}
        for status, entry in entries.items():
            key = str(status).upper() if str(status) != "default" else "default"
            if not _SUCCESS.fullmatch(key):
                continue  # error responses are reported, never parsed: any media type will do
            response, here = self.document.follow(
                entry, f"{self.location}/responses/{escape_part(str(status))}"
            )
            content = response.get("content") if isinstance(response, dict) else None
            if not content:
                shapes[key] = ResponseShape(has_content=False)
                continue
            if not isinstance(content, dict):
                raise self.refuse("OPENAPI_DOCUMENT_INVALID", "content must be an object", here)
            media_type = _json_media_type(content)
            if media_type is None:
                raise self.refuse(
                    "OPENAPI_CONTENT_UNSUPPORTED",
                    f"response {status} offers {', '.join(sorted(content))}; only JSON "
                    "responses (application/json) are supported",
                    here,
                )
            media = content[media_type]
            if not (isinstance(media, dict) and "schema" in media):
                shapes[key] = ResponseShape(has_content=True)
                continue
            defs: dict[str, Any] = {}
            schema = self.builder.convert(
                media["schema"], f"{here}/content/{escape_part(media_type)}/schema", defs
            )
            shapes[key] = ResponseShape(
                has_content=True,
                schema=DeferredSchema(
                    _standalone(schema, defs), operation_id=self.operation_id, location=here
                ),
            )
        return shapes

    def server_url(self, base_url: str | None) -> str:
        if base_url is not None:
            return _absolute_server(base_url, "base_url")
        for owner, here in (
            (self.operation, self.location),
            (self.path_item, json_pointer("paths", self.path)),
            (self.document.data, "#"),
        ):
            servers = owner.get("servers")
            if isinstance(servers, list) and servers:
                return _absolute_server(_expand_server(servers[0], f"{here}/servers/0"), here)
        raise self.refuse(
            "OPENAPI_SERVER_INVALID",
            "the document names no server; pass base_url to create_openapi_tool_provider",
            self.location,
        )


def _described(schema: Any, description: Any) -> Any:
    """A parameter's description carried onto its schema, where the model will read it."""
    if not (isinstance(description, str) and description.strip()):
        return schema
    if schema is True:
        return {"description": description}
    if isinstance(schema, dict) and "description" not in schema:
        return {**schema, "description": description}
    return schema


def _json_media_type(content: dict[str, Any]) -> str | None:
    json_types = [media_type for media_type in content if is_json_media_type(media_type)]
    if not json_types:
        return None
    return "application/json" if "application/json" in json_types else json_types[0]


def _standalone(schema: Any, defs: dict[str, Any]) -> dict[str, Any]:
    root: dict[str, Any] = {"allOf": [schema]} if isinstance(schema, bool) else dict(schema)
    if defs:
        root["$defs"] = defs
    return root


def _expand_server(server: Any, here: str) -> str:
    if not isinstance(server, dict) or not isinstance(server.get("url"), str):
        raise configuration_error(
            "OPENAPI_SERVER_INVALID", f"The server at {here} has no url.", {"location": here}
        )
    variables = server.get("variables") or {}

    def substitute(match: re.Match[str]) -> str:
        variable = variables.get(match.group(1)) if isinstance(variables, dict) else None
        default = variable.get("default") if isinstance(variable, dict) else None
        if not isinstance(default, str):
            raise configuration_error(
                "OPENAPI_SERVER_INVALID",
                f"The server at {here} uses variable {match.group(1)!r} without a default.",
                {"location": here},
            )
        return default

    return _PLACEHOLDER.sub(substitute, server["url"])


def _absolute_server(url: str, here: str) -> str:
    if not isinstance(url, str):
        raise configuration_error("OPENAPI_SERVER_INVALID", f"{here} must be a URL string.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a malformed port)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise configuration_error(
            "OPENAPI_SERVER_INVALID",
            f"The server URL at {here} must be an absolute http or https URL; a relative "
            "server needs base_url.",
            {"location": here},
        )
    if parts.username is not None or parts.password is not None:
        raise configuration_error(
            "OPENAPI_SERVER_INVALID",
            f"The server URL at {here} carries user information; pass credentials as "
            "headers instead.",
            {"location": here},
        )
    if parts.query or parts.fragment:
        raise configuration_error(
            "OPENAPI_SERVER_INVALID",
            f"The server URL at {here} must not have a query or a fragment.",
            {"location": here},
        )
    return url.rstrip("/")
