"""Importing fevex, or discovering every installed plugin, imports no optional SDK.

Each check runs in a fresh interpreter so that nothing this test process imported hides a leak.
"""

import json
import os
import subprocess
import sys

import pytest

OPTIONAL_SDKS = (
    "openai", "mcp", "sqlalchemy", "opentelemetry", "httpx", "httpx2", "psycopg", "starlette",
    "uvicorn",
)  # fmt: skip

PROBE = """
import json, sys
{code}
leaked = sorted(name for name in sys.modules if name.split(".")[0] in {sdks!r})
print(json.dumps(leaked))
"""


def _modules_leaked_by(code: str) -> list[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    completed = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code, sdks=set(OPTIONAL_SDKS))],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    leaked: list[str] = json.loads(completed.stdout.strip().splitlines()[-1])
    return leaked


@pytest.mark.parametrize(
    "module", ["fevex", "fevex.testing", "fevex.runtime", "fevex.plugins", "fevex.channels"]
)
def test_import_loads_no_optional_sdk(module: str) -> None:
    assert _modules_leaked_by(f"import {module}") == []


def test_plugin_discovery_loads_no_optional_sdk() -> None:
    # In the suite's environment every plugin of the workspace is installed, so this covers
    # each plugin's registration module: factories must import their SDK lazily.
    code = "import fevex.plugins\nassert fevex.plugins.list_plugins()"
    assert _modules_leaked_by(code) == []


def test_import_fevex_leaves_the_http_protocol_out() -> None:
    # fevex.http needs its extra; importing the core, its CLI or its channels never loads it.
    code = "import fevex, fevex.cli, fevex.channels; print('fevex.http' in sys.modules)"
    completed = subprocess.run(
        [sys.executable, "-c", f"import sys; {code}"], capture_output=True, text=True, timeout=120
    )
    assert completed.stdout.strip() == "False", completed.stderr


def test_the_probe_sees_an_imported_sdk() -> None:
    # Guards the probe itself: a module it should flag is flagged.
    assert _modules_leaked_by("import json as httpx; sys.modules['httpx'] = httpx") == ["httpx"]
