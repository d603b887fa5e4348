"""How an app observes its runs: ``create_fevex(observability=Observability(...))``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fevex.errors import FevexConfigurationError
from fevex.events.cost import CostCalculator
from fevex.observability.content import ContentPolicy
from fevex.observability.spans import TraceExporter

__all__ = ["Observability"]


@dataclass(frozen=True, slots=True)
class Observability:
    """Trace exporters, the price of model steps, and what content spans may carry.

    ``exporters`` receive every finished span, in batches, from a background task of the
    app; ``None`` (the default) opens the exporters ``FEVEX_TRACE_EXPORTERS`` names
    (``opentelemetry,...``) through plugins, and none when it is unset. ``calculate_cost``
    prices each model step live (see :mod:`fevex.events.cost`). ``content`` says
    which inputs, outputs and error messages spans carry (none by default); ``redact``
    changes any content that is included, after its sensitive keys were redacted, and a
    ``redact`` that raises drops that content. At most ``queue_size`` events wait for the
    background task: a run never waits for it, and events past that are dropped and
    counted (so are spans, past ``queue_size`` waiting for slow exporters). Spans are
    exported in batches, ``export_interval`` seconds after the first of a batch ended
    (``await app.flush_observability()`` exports at once). One export call may take
    ``export_timeout`` seconds; one that takes longer, or raises, is counted as failed and
    never reaches a run.
    """

    exporters: Sequence[TraceExporter] | None = None
    calculate_cost: CostCalculator | None = None
    content: ContentPolicy = field(default_factory=ContentPolicy)
    redact: Callable[[Any], Any] | None = None
    queue_size: int = 10_000
    export_timeout: float = 10.0
    export_interval: float = 1.0

    def problems(self) -> list[FevexConfigurationError]:
        """Every problem of this configuration (``INVALID_OBSERVABILITY``), for
        ``create_fevex`` to report with the composition's others."""
        found = []
        exporters = self.exporters
        if exporters is not None:
            if isinstance(exporters, str | bytes) or not isinstance(exporters, Sequence):
                found.append(_invalid("Observability.exporters must be a list of exporters."))
            else:
                for exporter in exporters:
                    if not callable(getattr(exporter, "export", None)):
                        found.append(
                            _invalid(
                                f"The trace exporter {exporter!r} has no export(spans) method."
                            )
                        )
        if self.calculate_cost is not None and not callable(self.calculate_cost):
            found.append(_invalid("Observability.calculate_cost must be a function."))
        if self.redact is not None and not callable(self.redact):
            found.append(_invalid("Observability.redact must be a function."))
        if not isinstance(self.content, ContentPolicy):
            found.append(_invalid("Observability.content must be a ContentPolicy."))
        size = self.queue_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            found.append(_invalid("Observability.queue_size must be a positive integer."))
        timeout = self.export_timeout
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < math.inf
        ):
            found.append(_invalid("Observability.export_timeout must be positive seconds."))
        interval = self.export_interval
        if (
            isinstance(interval, bool)
            or not isinstance(interval, int | float)
            or not 0 <= interval < math.inf
        ):
            found.append(_invalid("Observability.export_interval must be 0 or more seconds."))
        return found


def _invalid(message: str) -> FevexConfigurationError:
    return FevexConfigurationError("INVALID_OBSERVABILITY", message)
