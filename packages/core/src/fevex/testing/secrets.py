"""Where an exception lets a caller reach a secret: the places error reporters look.

A plugin's tests hand the error their code raised and the credential it was given to
:func:`places_holding` and assert that the list is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

__all__ = ["places_holding"]

_DEPTH = 4  # containers inside containers a reporter would still show


def places_holding(secret: str, error: BaseException) -> list[str]:
    """Each place ``secret`` shows where error reporters look (Sentry, for one, walks
    ``__cause__`` and ``__context__`` and captures every frame's locals): the ``repr`` and
    ``str`` of ``error`` and of each exception it chains or groups, their ``args``, notes and
    attributes, and the locals of the traceback frames that run fevex's code (a module named
    ``fevex`` or ``fevex.*`` or ``fevex_*``), each value's ``repr`` and, inside containers and
    exceptions, each item's. An empty list means the secret is out of reach."""
    found: list[str] = []
    seen: set[int] = set()

    def look(place: str, value: Any, depth: int = 0) -> None:
        if id(value) in seen or depth > _DEPTH:
            return
        seen.add(id(value))
        if isinstance(value, BaseException):
            walk(place, value, depth)
            return
        if secret in _shown(repr, value):
            found.append(f"{place} ({type(value).__name__})")
        if isinstance(value, Mapping):
            for key, item in value.items():
                look(f"{place}[{key!r}]", item, depth + 1)
        elif isinstance(value, list | tuple | set | frozenset):
            for index, item in enumerate(value):
                look(f"{place}[{index}]", item, depth + 1)

    def walk(place: str, error: BaseException, depth: int) -> None:
        if secret in _shown(repr, error) + _shown(str, error):
            found.append(f"{place} ({type(error).__name__})")
        look(f"{place}.args", error.args, depth + 1)
        look(f"{place}.__notes__", getattr(error, "__notes__", None), depth + 1)
        for name, value in vars(error).items():
            look(f"{place}.{name}", value, depth + 1)
        look(f"{place}.__cause__", error.__cause__, depth)
        look(f"{place}.__context__", error.__context__, depth)
        if isinstance(error, BaseExceptionGroup):
            look(f"{place}.exceptions", error.exceptions, depth)
        traceback: TracebackType | None = error.__traceback__
        while traceback is not None:
            frame = traceback.tb_frame
            module = str(frame.f_globals.get("__name__", ""))
            if module == "fevex" or module.startswith(("fevex.", "fevex_")):
                look(f"{place}: {module}.{frame.f_code.co_name}", dict(frame.f_locals), depth)
            traceback = traceback.tb_next

    look("error", error)
    return found


def _shown(show: Callable[[Any], str], value: Any) -> str:
    try:
        return show(value)
    except Exception:
        return ""
