"""The plugin: its public names, its entry point, what discovery imports, the global
providers it uses by default, and the install a missing exporter names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import fevex_opentelemetry
from fevex.errors import FevexConfigurationError
from fevex.observability import TraceExporter
from fevex.plugins import list_plugins, open_trace_exporter, reset_plugins
from fevex.plugins.install_hints import install_command, missing_plugin
from fevex_opentelemetry import OpenTelemetryExporter

TESTS = Path(__file__).parent


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("FEVEX_PLUGINS", "FEVEX_DISABLE_PLUGIN_AUTOLOAD", "FEVEX_TRACE_EXPORTERS"):
        monkeypatch.delenv(name, raising=False)
    reset_plugins()
    yield
    reset_plugins()


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FEVEX_", "OTEL_"))}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**clean, "PYTHONPATH": str(TESTS)},
        timeout=120,
        check=False,
    )


def test_the_public_names_are_exactly_the_documented_ones() -> None:
    assert sorted(fevex_opentelemetry.__all__) == [
        "OpenTelemetryExporter",
        "__version__",
        "create_opentelemetry_exporter",
    ]
    assert fevex_opentelemetry.__version__ == "0.1.0"


@pytest.mark.usefixtures("fresh_plugins")
def test_the_entry_point_registers_the_opentelemetry_exporter() -> None:
    (plugin,) = [p for p in list_plugins() if p["name"] == "opentelemetry"]
    assert plugin["distribution"] == "fevex-opentelemetry"
    assert plugin["version"] == fevex_opentelemetry.__version__
    assert plugin["trace_exporters"] == ["opentelemetry"]

    exporter = open_trace_exporter("opentelemetry", tracer_provider=TracerProvider())
    assert isinstance(exporter, OpenTelemetryExporter)
    assert isinstance(exporter, TraceExporter)


def test_discovering_plugins_imports_no_opentelemetry() -> None:
    completed = run_python(
        """
        import json, sys
        import fevex_opentelemetry
        from fevex.plugins import list_plugins
        assert any(p["name"] == "opentelemetry" for p in list_plugins())
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
        """
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == []


def test_the_global_providers_are_used_by_default_once_the_application_sets_them() -> None:
    # In a process of its own: OpenTelemetry lets a process set its global providers once.
    completed = run_python(
        """
        import asyncio, json
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from fevex_opentelemetry import create_opentelemetry_exporter
        from otel_test_spans import model_span, run_span

        exporter = create_opentelemetry_exporter()
        # Before the application sets an SDK provider: nothing to export to, and no error.
        asyncio.run(exporter.export([run_span()]))

        finished = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(finished))
        trace.set_tracer_provider(provider)
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        asyncio.run(exporter.export([model_span()]))

        names = [
            metric.name
            for resource in reader.get_metrics_data().resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        ]
        print(json.dumps({
            "spans": [f"{s.context.span_id:016x}" for s in finished.get_finished_spans()],
            "metrics": sorted(names),
        }))
        """
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.splitlines()[-1]) == {
        "spans": ["b7ad6b7169203331"],
        "metrics": ["gen_ai.client.operation.duration", "gen_ai.client.token.usage"],
    }


def test_a_missing_opentelemetry_exporter_names_the_install() -> None:
    # As in an environment without the plugin: no entry point left out that would provide it.
    loaded = {"fevex", "opentelemetry"}
    error = missing_plugin("trace_exporters", "opentelemetry", registered=[], loaded=loaded)

    assert isinstance(error, FevexConfigurationError)
    assert (error.code, error.message) == (
        "MISSING_PLUGIN",
        "No trace exporter 'opentelemetry'; install the fevex-opentelemetry plugin: "
        + install_command("opentelemetry"),
    )
    # The suite runs on an install from the checkout: the command names its folder.
    assert "pip install -e ./packages/opentelemetry" in error.message


@pytest.mark.usefixtures("fresh_plugins")
def test_an_installed_exporter_left_out_by_the_plugin_switch_names_the_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FEVEX_PLUGINS", "fevex")

    with pytest.raises(FevexConfigurationError) as raised:
        open_trace_exporter("opentelemetry")

    assert raised.value.code == "MISSING_PLUGIN"
    assert "add 'opentelemetry' to FEVEX_PLUGINS" in raised.value.message
