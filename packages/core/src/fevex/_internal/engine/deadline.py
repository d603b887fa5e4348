"""The signal that a run's own deadline passed."""

from __future__ import annotations


class DeadlineReached(Exception):
    """The run's ``timeout`` ran out while it awaited something.

    Distinct from ``TimeoutError`` on purpose: a ``TimeoutError`` raised by a tool or a
    model is that code's failure, subject to its retry policy, never the run's timeout.
    """
