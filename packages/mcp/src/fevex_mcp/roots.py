"""Roots: the folders a provider tells its server it may work in (``roots/list``).

They come from the provider's configuration only (``roots=``), are checked when the
provider is created (``MCP_ROOTS_INVALID``) and never change while it lives, so fevex
never sends ``notifications/roots/list_changed``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from fevex_mcp.errors import ROOTS_INVALID, configuration_error

__all__ = ["MCPRoot", "parse_roots"]

MAX_ROOTS = 100
MAX_NAME_CHARS = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass(frozen=True, slots=True)
class MCPRoot:
    """One root: ``location`` is an absolute path or a ``file://`` URI, ``name`` what the
    server may show for it."""

    location: str | os.PathLike[str]
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Root:
    """A checked root: its ``file://`` URI and name."""

    uri: str
    name: str | None


def parse_roots(
    roots: Iterable[MCPRoot | str | os.PathLike[str]] | None,
) -> tuple[Root, ...] | None:
    """The provider's ``roots=`` as ``file://`` URIs; ``None`` when none were given (the
    capability is then not declared)."""
    if roots is None:
        return None
    if isinstance(roots, str | os.PathLike):
        roots = [roots]
    checked = tuple(_root(root) for root in roots)
    if len(checked) > MAX_ROOTS:
        raise _invalid(f"at most {MAX_ROOTS} roots")
    return checked


def _root(root: MCPRoot | str | os.PathLike[str]) -> Root:
    given = root if isinstance(root, MCPRoot) else MCPRoot(root)
    location, name = given.location, given.name
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not isinstance(location, str) or not location or _CONTROL.search(location):
        raise _invalid("each root is an absolute path or a file:// URI, without control characters")
    if name is not None and (
        not isinstance(name, str) or len(name) > MAX_NAME_CHARS or _CONTROL.search(name)
    ):
        raise _invalid(f"a root's name is text of at most {MAX_NAME_CHARS} characters")
    if "://" in location:
        return Root(_file_uri(location), name)
    if not os.path.isabs(location):
        raise _invalid(f"root {location[:200]!r} is not an absolute path")
    return Root(PurePosixPath(os.path.normpath(location)).as_uri(), name)


def _file_uri(location: str) -> str:
    parts = urlsplit(location)
    if parts.scheme.lower() != "file":
        raise _invalid(f"root {location[:200]!r} is not a file:// URI (roots are local folders)")
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise _invalid(f"root {location[:200]!r} names a host, a query or a fragment")
    path = unquote(parts.path)
    if not path.startswith("/") or ".." in PurePosixPath(path).parts:
        raise _invalid(f"root {location[:200]!r} is not an absolute path")
    return PurePosixPath(path).as_uri()


def _invalid(message: str) -> Exception:
    return configuration_error(ROOTS_INVALID, f"MCP provider: {message}.")
