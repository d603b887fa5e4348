"""The one naming rule shared by agents, tools and the names models see."""

import re

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def is_valid_name(value: object) -> bool:
    return isinstance(value, str) and NAME_PATTERN.fullmatch(value) is not None
