"""Progress of an evaluation on a stream: a bar redrawn in place on a terminal, one plain
line per case anywhere else (a CI log, a pipe), so that logs never fill with redraws."""

from __future__ import annotations

from typing import TextIO

from fevex.evals.report import CaseResult
from fevex.evals.reporters import printable

__all__ = ["EvalProgress"]

_BAR_WIDTH = 24
# Erase from the cursor to the end of the line: a shorter redraw leaves nothing behind.
_CLEAR_LINE = "\x1b[K"


class EvalProgress:
    """Call :meth:`case_finished` with each result, then :meth:`close`."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = total
        self.done = 0
        self.failing = 0
        isatty = getattr(stream, "isatty", None)
        self.redraws = bool(isatty()) if callable(isatty) else False
        if self.redraws and total:
            self._draw("")

    def case_finished(self, result: CaseResult) -> None:
        self.done += 1
        if result.status != "passed":
            self.failing += 1
        case_id = printable(result.case_id)
        if self.redraws:
            self._draw(f"{case_id} {result.status}")
        else:
            self.stream.write(
                f"[{self.done}/{self.total}] {case_id}: {result.status} "
                f"({result.duration_ms:.0f} ms)\n"
            )
        self.stream.flush()

    def close(self) -> None:
        if self.redraws and self.total:
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, last: str) -> None:
        filled = _BAR_WIDTH * self.done // self.total
        bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
        failing = f", {self.failing} not passed" if self.failing else ""
        # Kept to one short line: a line that wraps cannot be redrawn with a carriage return.
        last = last if len(last) <= 40 else last[:39] + "…"
        self.stream.write(f"\r[{bar}] {self.done}/{self.total}{failing} {last}{_CLEAR_LINE}")
        self.stream.flush()
