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
    "module",
    # fevex.net's transport needs httpx2 (its plugins' dependency): read, not imported.
    ["fevex", "fevex.testing", "fevex.runtime", "fevex.plugins", "fevex.channels", "fevex.net"],
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
    # Workflows, teams and knowledge: their names are exported lazily, their run kinds are
    # built when first looked up, the default memory store is made when first read.
    "fevex.workflows", "fevex.teams", "fevex.knowledge", "fevex._internal.workflows",
    "fevex._internal.workflows.workflow_kind", "fevex._internal.workflows.team_kind",
    "fevex._internal.agents.knowledge_context", "fevex.knowledge.memory_store",
    "fevex.knowledge.in_memory_memory_store",
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


LAZY_NAMES = """
import json, sys
import fevex
listed = [name in dir(fevex) for name in ("define_workflow", "TeamDefinition")]
loaded = ["fevex.workflows" in sys.modules, "fevex.teams" in sys.modules]
from fevex import TeamDefinition, define_workflow
from fevex.teams import TeamDefinition as team_definition
from fevex.workflows import define_workflow as workflow_decorator
same = [define_workflow is workflow_decorator, TeamDefinition is team_definition]
try:
    fevex.define_workflows
    missing = None
except AttributeError as error:
    missing = str(error)
print(json.dumps([listed, loaded, same, missing]))
"""


def test_the_lazy_names_of_fevex_import_dir_and_refuse_unknown_names() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", LAZY_NAMES], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    listed, loaded, same, missing = json.loads(completed.stdout.strip().splitlines()[-1])
    assert listed == [True, True]
    # Listed, yet not loaded until read.
    assert loaded == [False, False]
    assert same == [True, True]
    assert missing == "module 'fevex' has no attribute 'define_workflows'"


def test_every_name_in_fevex_all_resolves_from_a_fresh_interpreter() -> None:
    code = "import fevex; print([name for name in fevex.__all__ if not hasattr(fevex, name)])"
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "[]"


WHEN_FIRST_USED = """
import json, sys
from fevex import create_fevex, define_workflow

kind = "fevex._internal.workflows.workflow_kind"
memory = "fevex.knowledge.in_memory_memory_store"


@define_workflow(name="double", version="1")
async def double(step, value: int) -> int:
    return await step.run("twice", lambda: value * 2)


app = create_fevex(workflows=[double])
created = [kind in sys.modules, memory in sys.modules]
output = app.run_workflow_sync("double", input=21).output
store = app.memory_store
read = [kind in sys.modules, memory in sys.modules, store is app.memory_store]
app.close_sync()
print(json.dumps([created, output, read, type(store).__name__]))
"""


def test_a_run_kind_and_the_default_memory_store_load_when_first_used() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", WHEN_FIRST_USED], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    created, output, read, store = json.loads(completed.stdout.strip().splitlines()[-1])
    assert created == [False, False]
    assert output == 42
    # The workflow kind was built for the run; the store, once, when first read.
    assert read == [True, True, True]
    assert store == "InMemoryMemoryStore"
