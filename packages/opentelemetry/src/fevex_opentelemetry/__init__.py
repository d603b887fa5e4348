"""fevex-opentelemetry: fevex's traces as OpenTelemetry spans and GenAI metrics.

Importing this package (as plugin discovery does, through ``fevex_opentelemetry.plugin``)
does not import OpenTelemetry; :class:`OpenTelemetryExporter` loads it on first access.
"""

from typing import TYPE_CHECKING, Any

from fevex_opentelemetry.__about__ import __version__
from fevex_opentelemetry.plugin import create_opentelemetry_exporter

if TYPE_CHECKING:
    from fevex_opentelemetry.exporter import OpenTelemetryExporter

__all__ = ["OpenTelemetryExporter", "__version__", "create_opentelemetry_exporter"]


def __getattr__(name: str) -> Any:
    if name == "OpenTelemetryExporter":
        from fevex_opentelemetry.exporter import OpenTelemetryExporter

        return OpenTelemetryExporter
    raise AttributeError(f"module 'fevex_opentelemetry' has no attribute {name!r}")
