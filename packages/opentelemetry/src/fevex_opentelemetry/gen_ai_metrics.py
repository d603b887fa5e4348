"""The GenAI client metrics of a model step: ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration``, as the OpenTelemetry semantic conventions define them
(units, attributes, advised bucket boundaries).

They are recorded from the finished model spans the exporter receives, so they count what
fevex ran, retries and resumed runs included, and cost nothing on the run path.
"""

from __future__ import annotations

from opentelemetry.metrics import MeterProvider

from fevex_opentelemetry.__about__ import __version__
from fevex_opentelemetry.span_mapping import MappedSpan, OtelAttributes

__all__ = ["INSTRUMENTATION_SCOPE", "GenAIMetrics"]

INSTRUMENTATION_SCOPE = "fevex_opentelemetry"

# fmt: off
TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)
DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)
# fmt: on

# The attributes both metrics take from the span, where it has them.
_SHARED = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "server.address",
    "server.port",
)
_TOKEN_COUNTS = (("input", "gen_ai.usage.input_tokens"), ("output", "gen_ai.usage.output_tokens"))


class GenAIMetrics:
    """The two histograms, on a meter of ``meter_provider``."""

    def __init__(self, meter_provider: MeterProvider) -> None:
        meter = meter_provider.get_meter(INSTRUMENTATION_SCOPE, __version__)
        self._token_usage = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self._duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    def record(self, span: MappedSpan) -> None:
        """Record a model step's duration and token counts; other spans have none."""
        if span.fevex_kind != "model":
            return
        shared: OtelAttributes = {
            key: span.attributes[key] for key in _SHARED if key in span.attributes
        }
        shared.setdefault("gen_ai.operation.name", "chat")
        duration = dict(shared)
        if span.error_type is not None:
            duration["error.type"] = span.error_type
        self._duration.record((span.end_ns - span.start_ns) / 1e9, duration)
        for token_type, key in _TOKEN_COUNTS:
            count = span.attributes.get(key)
            if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                self._token_usage.record(count, {**shared, "gen_ai.token.type": token_type})
