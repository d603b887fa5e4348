"""An OpenAPI 3.0.x or 3.1.x document, parsed and indexed once per process.

A document is data the application hands over at definition time. It is read once
(:mod:`fevex_openapi.document_text`), keyed by the SHA-256 of its source: every provider
made from the same text (or an equal mapping) in this process shares one private copy and
one index of its operations, so a second provider costs only what its own operations
reach. Nothing is checked here beyond what every provider needs (the version, the
dialect, a ``paths`` object); a provider checks the operations it allows and what their
references reach (:mod:`fevex_openapi.operations`).

References are local: a JSON Pointer into the document (``#/components/...``) or, in 3.1,
a URI that a schema of the document declares as its ``$id``, or a plain-name fragment that
one declares as its ``$anchor`` (JSON Schema 2020-12: the anchor names a place in the
schema resource of the nearest ``$id``). Anything else leaves the document and is refused
where it is reached, and so are references that lead back where they started.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from fevex.errors import FevexConfigurationError
from fevex_openapi.document_text import document_digest, document_source, parse_document
from fevex_openapi.errors import configuration_error

__all__ = [
    "SCHEMA_DIALECTS",
    "OpenApiDocument",
    "OperationEntry",
    "escape_part",
    "json_pointer",
    "load_document",
    "reference_loop",
    "reference_of",
    "unescape_part",
]

_VERSION = re.compile(r"3\.([01])\.\d+")
#: The dialects a 3.1 document may name (``jsonSchemaDialect``, a schema's ``$schema``):
#: OpenAPI 3.1's default one, whose vocabularies add annotations only, and plain 2020-12.
SCHEMA_DIALECTS = frozenset(
    {
        "https://spec.openapis.org/oas/3.1/dialect/base",
        "https://spec.openapis.org/oas/3.1/dialect/2024-10-25",
        "https://json-schema.org/draft/2020-12/schema",
    }
)
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_MAX_REF_HOPS = 32
# Documents kept parsed per process. A provider keeps only what its operations need, so an
# evicted document costs a second parse if it is used again, never a wrong answer.
_CACHE_SIZE = 8
# Values that are data, not schemas: a "$id" inside them declares nothing.
_DATA_KEYWORDS = frozenset({"example", "examples", "default", "enum", "const"})
_POINTER_ESCAPE = re.compile(r"~(?![01])")


def escape_part(part: str | int) -> str:
    """One JSON Pointer reference token (``/items`` becomes ``~1items``)."""
    return str(part).replace("~", "~0").replace("/", "~1")


def unescape_part(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def json_pointer(*parts: str | int) -> str:
    """A location in the document, as a JSON Pointer fragment (``#/paths/~1items/get``)."""
    return "#/" + "/".join(map(escape_part, parts)) if parts else "#"


def reference_of(node: Any, location: str) -> str | None:
    """The ``$ref`` of a Reference Object or schema, checked to be a string; ``None`` when
    ``node`` has none."""
    if not (isinstance(node, dict) and "$ref" in node):
        return None
    ref = node["$ref"]
    if ref is None:
        raise configuration_error(
            "OPENAPI_REF_INVALID",
            f"The $ref at {location} is null. In YAML an unquoted `$ref: #/...` is read as "
            "a comment: quote the reference (`$ref: '#/components/schemas/Name'`).",
            {"location": location},
        )
    if not isinstance(ref, str) or not ref:
        shown = "an empty string" if ref == "" else f"a {type(ref).__name__}"
        raise configuration_error(
            "OPENAPI_REF_INVALID",
            f"The $ref at {location} is {shown}; a reference is a URI string such as "
            "'#/components/schemas/Name'.",
            {"location": location},
        )
    return ref


def reference_loop(loop: Sequence[str]) -> FevexConfigurationError:
    """The refusal of references that lead back where they started: ``loop`` lists the
    locations in the order they are reached, the first one again at the end."""
    return configuration_error(
        "OPENAPI_REF_INVALID",
        f"The references starting at {loop[0]} loop back to it: {' → '.join(loop)}, so "
        "following them never ends. (A schema may refer to itself inside a property or an "
        "item, where each step checks a smaller value.)",
        {"location": loop[0], "loop": list(loop)},
    )


@dataclass(frozen=True, slots=True)
class OperationEntry:
    """Where an operation is: its path template, method and JSON Pointer location."""

    path: str
    method: str
    location: str


@dataclass(frozen=True, eq=False, slots=True, weakref_slot=True)
class OpenApiDocument:
    """A parsed document (a private copy, shared by every provider of this process) and the
    index of its operations by ``operationId``."""

    data: dict[str, Any]
    #: ``"3.0"`` or ``"3.1"``: which Schema Object dialect the schemas are written in.
    version: str
    operations: Mapping[str, OperationEntry]
    #: operationIds that more than one operation carries.
    duplicates: frozenset[str]
    #: Path items whose reference could not be followed, with why: the operations in them
    #: are not indexed, and naming an unknown one reports this instead.
    unreadable_paths: Mapping[str, FevexConfigurationError] = field(default_factory=dict)
    _names: dict[str, str] = field(default_factory=dict)
    _names_ready: list[bool] = field(default_factory=lambda: [False])

    def resolve(self, ref: str, location: str, base: str = "") -> tuple[Any, str]:
        """The value ``ref`` points at, and its location as a JSON Pointer fragment.

        ``base`` is the URI the reference is written under: the ``$id`` of the schema
        resource that holds it, or ``""`` (the document itself).
        """
        if ref.startswith("#") and _is_pointer(ref[1:]):
            pointer = ref
        else:
            pointer = self._named(ref, location, base)
        node: Any = self.data
        for part in _pointer_parts(pointer, ref, location):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise configuration_error(
                    "OPENAPI_REF_INVALID",
                    f"The $ref {ref[:120]!r} at {location} points at nothing in the document.",
                    {"location": location},
                )
        return node, _canonical(pointer)

    def follow(self, node: Any, location: str) -> tuple[Any, str]:
        """``node`` with Reference Objects followed, and the location it ends up at."""
        reached = [location]
        for _ in range(_MAX_REF_HOPS):
            ref = reference_of(node, location)
            if ref is None:
                return node, location
            node, location = self.resolve(ref, location)
            if location in reached:
                raise reference_loop([*reached[reached.index(location) :], location])
            reached.append(location)
        raise configuration_error(
            "OPENAPI_REF_INVALID",
            f"The references starting at {reached[0]} form a chain longer than {_MAX_REF_HOPS}.",
            {"location": reached[0]},
        )

    def _named(self, ref: str, location: str, base: str) -> str:
        """The JSON Pointer of what a URI names: a schema by its ``$id``, a place inside
        one by a JSON Pointer fragment, or a schema by its ``$anchor``."""
        uri, fragment = urldefrag(urljoin(base, ref))
        names = self._declared_names()
        if fragment and not _is_pointer(fragment):
            anchored = names.get(f"{uri}#{fragment}")
            if anchored is not None:
                return anchored
            if uri == "" or uri in names:
                raise configuration_error(
                    "OPENAPI_REF_INVALID",
                    f"The $ref {ref[:120]!r} at {location} names the anchor {fragment[:60]!r}, "
                    "which no schema of the document declares ($anchor).",
                    {"location": location},
                )
        resource = names.get(uri)
        if resource is None:
            raise configuration_error(
                "OPENAPI_REF_UNSUPPORTED",
                f"The $ref {ref[:120]!r} at {location} leaves the document: it is neither a "
                "local reference (#/...) nor the $id of a schema in it. Bundle the "
                "document first.",
                {"location": location},
            )
        return resource + fragment

    def _declared_names(self) -> dict[str, str]:
        """Every schema ``$id`` of a 3.1 document, as a URI resolved against the ``$id``s
        around it, and every ``$anchor`` as that URI with the anchor as its fragment; each
        with its location.

        Built on the first reference that needs it: most documents never do.
        """
        if not self._names_ready[0]:
            if self.version == "3.1":
                for uri, location in _declared_names(self.data, "", "#"):
                    self._names.setdefault(uri, location)
            self._names_ready[0] = True
        return self._names


def load_document(document: Mapping[str, Any] | str | bytes) -> OpenApiDocument:
    """The parsed, indexed ``document``: from this process's cache when the same source was
    loaded before."""
    source = document_source(document)
    # Only the caller's own text object can come back; a dict's JSON form never does.
    digest = _digest(source) if source is document else document_digest(source)
    with _LOCK:
        cached = _LOADED.get(digest)
        if cached is not None:
            _LOADED.move_to_end(digest)
            return cached
    loaded = _index(parse_document(source))
    with _LOCK:
        _LOADED[digest] = loaded
        while len(_LOADED) > _CACHE_SIZE:
            _LOADED.popitem(last=False)
    return loaded


def _digest(source: str | bytes) -> str:
    """The source's content hash; for the very text object hashed before, from memory.

    Text is immutable and the object is held here, so its id cannot name another text:
    several providers of one big document read into one ``bytes`` hash it once (SHA-256
    of GitHub's 12.4 MiB takes longer than reading one of its operations).
    """
    with _LOCK:
        known = _HASHED.get(id(source))
    if known is not None and known[0] is source:
        return known[1]
    digest = document_digest(source)
    with _LOCK:
        _HASHED[id(source)] = (source, digest)
        while len(_HASHED) > _CACHE_SIZE:
            _HASHED.popitem(last=False)
    return digest


_LOCK = threading.Lock()
_LOADED: OrderedDict[str, OpenApiDocument] = OrderedDict()
_HASHED: OrderedDict[int, tuple[str | bytes, str]] = OrderedDict()


def _index(data: dict[str, Any]) -> OpenApiDocument:
    version = _version(data)
    dialect = data.get("jsonSchemaDialect")
    if version == "3.1" and dialect is not None and dialect not in SCHEMA_DIALECTS:
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
    operations: dict[str, OperationEntry] = {}
    duplicates: set[str] = set()
    unreadable: dict[str, FevexConfigurationError] = {}
    document = OpenApiDocument(data, version, operations, frozenset())
    for path, item in data["paths"].items():
        try:
            path_item, _ = document.follow(item, json_pointer("paths", path))
        except FevexConfigurationError as error:
            # Only a provider that needs an operation of this path item may fail for it.
            unreadable[path] = error
            continue
        if not isinstance(path_item, dict):
            continue
        for method in _METHODS:
            operation = path_item.get(method)
            if not isinstance(operation, dict):
                continue
            operation_id = operation.get("operationId")
            if not isinstance(operation_id, str) or not operation_id:
                continue
            if operation_id in operations:
                duplicates.add(operation_id)
            operations[operation_id] = OperationEntry(
                path, method, json_pointer("paths", path, method)
            )
    return OpenApiDocument(data, version, operations, frozenset(duplicates), unreadable)


def _version(data: dict[str, Any]) -> str:
    version = data.get("openapi")
    if "swagger" in data and version is None:
        version = f"Swagger {data['swagger']}"
    match = _VERSION.fullmatch(version) if isinstance(version, str) else None
    if match is None:
        raise configuration_error(
            "OPENAPI_VERSION_UNSUPPORTED",
            f"OpenAPI version {version!r} is not supported; 3.0.x and 3.1.x documents are.",
            {"version": version if isinstance(version, str) else None},
        )
    return f"3.{match.group(1)}"


def _declared_names(node: Any, base: str, location: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        declared = node.get("$id")
        if isinstance(declared, str) and declared:
            base = urldefrag(urljoin(base, declared))[0]
            yield base, location
        anchor = node.get("$anchor")
        if isinstance(anchor, str) and anchor:
            yield f"{base}#{anchor}", location
        for key, value in node.items():
            if key not in _DATA_KEYWORDS and isinstance(value, dict | list):
                yield from _declared_names(value, base, f"{location}/{escape_part(key)}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _declared_names(value, base, f"{location}/{index}")


def _is_pointer(fragment: str) -> bool:
    """Whether a URI fragment is a JSON Pointer (empty, or ``/...``), not an anchor's name."""
    return not fragment or unquote(fragment).startswith("/")


def _pointer_parts(pointer: str, ref: str, location: str) -> list[str]:
    fragment = unquote(pointer[1:])
    if not fragment:
        return []
    if _POINTER_ESCAPE.search(fragment):
        raise configuration_error(
            "OPENAPI_REF_INVALID",
            f"The $ref {ref[:120]!r} at {location} is not a valid JSON Pointer: '~' must be "
            "followed by 0 or 1.",
            {"location": location},
        )
    return [unescape_part(part) for part in fragment[1:].split("/")]


def _canonical(pointer: str) -> str:
    """One spelling per location: percent-escapes decoded, JSON Pointer escapes kept."""
    return "#" + unquote(pointer[1:])
