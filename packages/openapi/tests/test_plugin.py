"""The installed plugin: found through its entry point, and cheap to discover."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import fevex_openapi
from fevex.plugins import list_plugins
from fevex.plugins.discovery import plugin_factory
from fevex_openapi import create_openapi_tool_provider


def modules_loaded_by(code: str) -> set[str]:
    probe = (
        f"import json, sys\n{code}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    return set(json.loads(completed.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import fevex_openapi.plugin",
        "import fevex.plugins; assert fevex.plugins.list_plugins()",
        "import fevex_openapi; fevex_openapi.create_openapi_tool_provider",
    ],
)
def test_discovering_the_plugin_imports_no_http_client(code: str) -> None:
    loaded = modules_loaded_by(code)
    assert "fevex" in loaded
    assert {"httpx2", "httpcore2", "httpx", "httpcore", "yaml"}.isdisjoint(loaded)


def test_the_probe_sees_httpx2_once_a_call_module_loads() -> None:
    assert "httpx2" in modules_loaded_by("import fevex_openapi.http_call")


@pytest.mark.usefixtures("fresh_plugins")
def test_the_entry_point_registers_the_openapi_tool_provider() -> None:
    (registered,) = [p for p in list_plugins() if p["name"] == "openapi"]
    assert registered["distribution"] == "fevex-openapi"
    assert registered["version"] == fevex_openapi.__version__ == "0.1.0"
    assert registered["tool_providers"] == ["openapi"]
    assert plugin_factory("tool_providers", "openapi") is create_openapi_tool_provider


def test_the_public_face_is_exactly_the_documented_names() -> None:
    assert sorted(fevex_openapi.__all__) == [
        "ANNOTATION_KEYWORDS",
        "CONSTRAINT_KEYWORDS",
        "HeaderSource",
        "OpenApiToolProvider",
        "OperationNames",
        "__version__",
        "create_openapi_tool_provider",
        "default_tool_name",
    ]
