"""The one naming rule shared by agents, tools and the names models see."""

import difflib
import re
from collections.abc import Iterable

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_valid_name(value: object) -> bool:
    return isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` Did you mean 'x'?`` for the closest of ``known`` names to a misspelt ``name``, or
    an empty string: the tail of an error message about an unknown name."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""
