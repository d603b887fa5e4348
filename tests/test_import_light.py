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


# Parts of fevex and of the standard library that an app's first agent run never needs:
# `import fevex` must not load them, and the first run must not either (which keeps the list
# honest: nothing on it is needed by a run).
NOT_NEEDED_BY_A_FIRST_RUN = (
    "fevex.cli", "fevex.channels", "fevex.evals", "fevex.http", "fevex.kits", "fevex.plugins",
    "fevex.testing", "fevex._internal.tracing", "pluggy", "sqlite3", "argparse", "tomllib",
    "multiprocessing",
)  # fmt: skip

FIRST_RUN = """
import asyncio, json, sys
{code}
loaded_by_import = sorted(n for n in {names!r} if n in sys.modules)
from fevex import create_fevex, define_agent, define_tool
from fevex.models import Completed, ModelResult, OutputDelta, ToolCall


@define_tool(name="accounts_get", description="Get an account.")
async def get_account(account_id: int) -> dict:
    return {{"id": account_id}}


class Model:
    async def stream(self, input):
        if input.messages[-1].tool_results:
            yield OutputDelta("done")
            yield Completed(ModelResult(output="done"))
        else:
            call = ToolCall("c1", "accounts_get", {{"account_id": 1}})
            yield Completed(ModelResult(tool_calls=[call]))


app = create_fevex(
    models={{"default": Model()}},
    agents=[define_agent(name="a", instructions="Be brief.", tools=["accounts_get"])],
    tools=[get_account],
)
assert app.run_agent_sync("a", input="hi").output == "done"
loaded_by_run = sorted(n for n in {names!r} if n in sys.modules)
print(json.dumps([loaded_by_import, loaded_by_run]))
"""


def test_import_fevex_and_its_first_run_load_nothing_the_run_does_not_need() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    code = FIRST_RUN.format(code="import fevex", names=set(NOT_NEEDED_BY_A_FIRST_RUN))
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    by_import, by_run = json.loads(completed.stdout.strip().splitlines()[-1])
    assert by_import == []
    assert by_run == []


def test_the_first_run_probe_sees_a_loaded_module() -> None:
    # Guards the probe: a listed module imported before the run is reported.
    code = FIRST_RUN.format(code="import fevex, sqlite3", names=set(NOT_NEEDED_BY_A_FIRST_RUN))
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == [["sqlite3"], ["sqlite3"]]
