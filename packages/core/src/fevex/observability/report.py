"""What the background export did since the last report: ``app.flush_observability()``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ExportFailure", "ObservabilityReport"]


@dataclass(frozen=True, slots=True)
class ExportFailure:
    """One export call that raised or ran past ``export_timeout``: the exporter (its type
    name), the error's type and message, and how many spans the call carried."""

    exporter: str
    error_type: str
    message: str
    spans: int


@dataclass(frozen=True, slots=True)
class ObservabilityReport:
    """Since the previous report: ``spans`` finished and handed to the exporters, the
    events dropped because the queue was full (``dropped_events``), the spans dropped
    because the exporters fell behind (``dropped_spans``), the export calls that failed
    (``failures``, the first 100 of ``failed_exports``), and the pieces of content left out
    of spans because the application's ``redact`` raised (``content_dropped``)."""

    spans: int = 0
    dropped_events: int = 0
    dropped_spans: int = 0
    failed_exports: int = 0
    content_dropped: int = 0
    failures: tuple[ExportFailure, ...] = ()

    @property
    def ok(self) -> bool:
        """Every span of every event reached every exporter, with all its content."""
        return not (
            self.dropped_events or self.dropped_spans or self.failed_exports or self.content_dropped
        )
