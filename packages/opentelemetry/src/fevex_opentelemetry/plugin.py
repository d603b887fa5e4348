"""The ``opentelemetry`` entry point of the ``fevex`` plugin group: the ``opentelemetry``
trace exporter, which ``FEVEX_TRACE_EXPORTERS=opentelemetry`` names.

Discovering plugins imports this module, which does not import OpenTelemetry: opening the
exporter does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fevex.plugins import Register, hookimpl

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from fevex_opentelemetry.exporter import OpenTelemetryExporter

__all__ = ["create_opentelemetry_exporter", "fevex_register_trace_exporters"]


def create_opentelemetry_exporter(
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> OpenTelemetryExporter:
    """A fevex trace exporter to OpenTelemetry, on the global providers unless others are
    given; see :class:`~fevex_opentelemetry.OpenTelemetryExporter`."""
    from fevex_opentelemetry.exporter import OpenTelemetryExporter

    return OpenTelemetryExporter(tracer_provider=tracer_provider, meter_provider=meter_provider)


@hookimpl
def fevex_register_trace_exporters(register: Register) -> None:
    register("opentelemetry", create_opentelemetry_exporter)
