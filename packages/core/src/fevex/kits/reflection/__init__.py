"""Reflection over run history (DESIGN §12): a question answered by an agent run whose one
read-only tool, ``history_query``, discovers runs, reads their events and submits the
report, from fixed metadata only, every observed finding citing evidence it was shown."""

from fevex.kits.reflection.definition import Reflection, define_reflection
from fevex.kits.reflection.report import (
    Finding,
    Limitation,
    ReflectionCoverage,
    ReflectionReport,
)
from fevex.kits.reflection.sources import (
    HistoryApp,
    LogReader,
    ReflectionSource,
    SourcePage,
    SourceScope,
    log_source,
    run_history_source,
)

__all__ = [
    "Finding",
    "HistoryApp",
    "Limitation",
    "LogReader",
    "Reflection",
    "ReflectionCoverage",
    "ReflectionReport",
    "ReflectionSource",
    "SourcePage",
    "SourceScope",
    "define_reflection",
    "log_source",
    "run_history_source",
]
