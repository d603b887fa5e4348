"""Tool names for operations: chosen by the application, or derived from the operationId.

A tool name matches ``[A-Za-z0-9_-]{1,64}``; an operationId may be anything (GitHub's are
``repos/get``, some of them 74 characters long). The default name is the operationId when
it is a valid tool name already, else:

1. every run of characters outside ``[A-Za-z0-9_-]`` becomes one ``_``, and ``_`` at
   either end is dropped (``repos/get`` → ``repos_get``, ``pets.list`` → ``pets_list``);
   nothing left gives ``operation``;
2. a result longer than 64 characters keeps its first 55 and ends with ``_`` and the first
   8 hex digits of the SHA-256 of the whole operationId, so the same operationId always
   gives the same name and two long ones that share a beginning do not meet.

Whatever the names come from, two operations of one provider may not get the same one:
that is refused naming both operations, never settled by dropping one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from fevex_openapi.errors import configuration_error

__all__ = ["OperationNames", "TOOL_NAME", "default_tool_name", "tool_names"]

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]+")
_MAX = 64
_SUFFIX_DIGITS = 8

#: ``operation_names=``: operationId -> tool name, or a function of the operationId.
OperationNames: TypeAlias = Mapping[str, str] | Callable[[str], str]


def default_tool_name(operation_id: str) -> str:
    """The tool name of ``operation_id`` when the application names none (see above)."""
    if TOOL_NAME.fullmatch(operation_id):
        return operation_id
    name = _OUTSIDE.sub("_", operation_id).strip("_") or "operation"
    if len(name) <= _MAX:
        return name
    digest = hashlib.sha256(operation_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{name[: _MAX - _SUFFIX_DIGITS - 1]}_{digest[:_SUFFIX_DIGITS]}"


def tool_names(allow: Sequence[str], names: OperationNames | None) -> dict[str, str]:
    """operationId -> tool name for the allowed operations, every name valid and distinct."""
    if names is not None and not (isinstance(names, Mapping) or callable(names)):
        raise configuration_error(
            "OPENAPI_OPERATION_NAMES_INVALID",
            "operation_names must be a mapping of operationId to tool name, or a function "
            f"of the operationId; not a {type(names).__name__}.",
        )
    if isinstance(names, Mapping):
        strays = sorted(str(key) for key in names if key not in allow)
        if strays:
            raise configuration_error(
                "OPENAPI_OPERATION_NAMES_INVALID",
                f"operation_names names operations that are not allowed: {strays!r:.300}.",
                {"operations": strays},
            )
    chosen: dict[str, str] = {}
    for operation_id in allow:
        name = _chosen_name(operation_id, names)
        if not (isinstance(name, str) and TOOL_NAME.fullmatch(name)):
            raise configuration_error(
                "OPENAPI_OPERATION_NAMES_INVALID",
                f"operation_names gives operation {operation_id!r} the name {name!r:.80}, "
                "which is not a tool name ([A-Za-z0-9_-]{1,64}).",
                {"operation": operation_id},
            )
        chosen[operation_id] = name
    by_name: dict[str, str] = {}
    for operation_id, name in chosen.items():
        other = by_name.setdefault(name, operation_id)
        if other != operation_id:
            raise configuration_error(
                "OPENAPI_OPERATION_NAME_CONFLICT",
                f"Operations {other!r} and {operation_id!r} would both be the tool {name!r}; "
                "name one of them with operation_names.",
                {"operations": [other, operation_id], "tool": name},
            )
    return chosen


def _chosen_name(operation_id: str, names: OperationNames | None) -> Any:
    if names is None:
        return default_tool_name(operation_id)
    if isinstance(names, Mapping):
        return names.get(operation_id, default_tool_name(operation_id))
    return names(operation_id)
