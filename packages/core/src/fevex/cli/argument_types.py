"""The checks of the command line's own values: a bad one exits with status 2 and one line
from the parser, before any command runs."""

from __future__ import annotations

import argparse
import math

__all__ = ["interval_seconds", "port_number", "positive_int", "positive_seconds", "score_tolerance"]

# The shortest wait between two passes of ``recover --interval`` or two looks of an idle
# ``worker``: each pass queries the store, so a shorter one is a busy loop against it.
MIN_INTERVAL = 0.1


def interval_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value < MIN_INTERVAL:
        raise argparse.ArgumentTypeError(
            f"must be at least {MIN_INTERVAL:g} seconds (each pass queries the store), not {text}"
        )
    return value


def positive_int(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text}")
    return number


def score_tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, not {text}")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return value


def port_number(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number, not {text!r}") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"must be from 0 to 65535, not {text}")
    return number
