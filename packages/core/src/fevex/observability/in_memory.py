"""An exporter that keeps every span in a list: for tests, and for looking at traces in a
script."""

from __future__ import annotations

from collections.abc import Sequence

from fevex.observability.spans import Span, SpanKind

__all__ = ["InMemoryTraceExporter"]


class InMemoryTraceExporter:
    """Keeps the spans it is given, in the order it got them (``spans``)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.batches = 0

    async def export(self, spans: Sequence[Span]) -> None:
        self.spans.extend(spans)
        self.batches += 1

    def of_kind(self, kind: SpanKind) -> list[Span]:
        return [span for span in self.spans if span.kind == kind]

    def clear(self) -> None:
        self.spans.clear()
        self.batches = 0
