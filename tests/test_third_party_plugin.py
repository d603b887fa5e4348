"""A third-party plugin distribution, installed next to the core, swaps in without code changes.

The plugin is built from a pyproject written here and installed, with the core, into one fresh
venv; every check then runs a program in that venv that never names the plugin. uv (the root
``test`` group's) makes the venv and installs: pip took up to a minute on a loaded suite worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# On one suite worker: the plugin's venv is installed once, not once per worker.
pytestmark = pytest.mark.xdist_group("third-party-plugin")

PLUGIN_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fevex-acme"
version = "1.2.3"
requires-python = ">=3.11"
dependencies = ["fevex"]

[project.entry-points.fevex]
acme = "fevex_acme.plugin"

[tool.hatch.build.targets.wheel]
packages = ["src/fevex_acme"]
"""

PLUGIN_MODULE = '''\
from pathlib import Path
from urllib.parse import urlsplit

from fevex.plugins import hookimpl
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel


def create_acme_model(model_name, **options):
    return FakeModel({"output": f"hello from acme {model_name}"})


class AcmeRunStore(InMemoryRunStore):
    """Writes each run it creates to the log file named by its URL."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log

    async def create_execution(self, create):
        session = await super().create_execution(create)
        with self.log.open("a") as file:
            file.write(create.run.id + "\\n")
        return session


def open_acme_store(url, **options):
    return AcmeRunStore(Path(urlsplit(url).path))


# Named otherwise than the hook: pluggy's specname= must reach it.
@hookimpl(specname="fevex_register_models")
def register_acme_models(register):
    register("acme", create_acme_model)


@hookimpl
def fevex_register_run_stores(register):
    register("acme", open_acme_store)
'''

# Names neither the plugin nor its store: they come from the model name (argv[1]; "fake" for
# a FakeModel given to the app) and from FEVEX_RUN_STORE.
APP = """\
import json, sys
from fevex import FevexError, create_fevex, define_agent
from fevex.testing import FakeModel

model = sys.argv[1]
try:
    if model == "fake":
        models = {"default": FakeModel({"output": "hello from a fake"})}
        agent = define_agent(name="a", instructions="hi")
    else:
        models = None
        agent = define_agent(name="a", instructions="hi", model=model)
    app = create_fevex(models=models, agents=[agent])
    result = app.run_agent_sync("a", input="x")
except FevexError as error:
    print(json.dumps({"error": type(error).__name__, "code": error.code, "message": error.message}))
    sys.exit(3)
print(json.dumps({"output": result.output, "run_id": result.run_id}))
"""


@dataclass(frozen=True)
class AcmeVenv:
    bin_dir: Path
    work: Path

    def run(
        self, *command: str, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        clean = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
        return subprocess.run(
            [str(self.bin_dir / command[0]), *command[1:]],
            capture_output=True,
            text=True,
            cwd=self.work,
            env={**clean, **(env or {})},
            timeout=120,
            check=False,
        )

    def run_app(
        self, model: str, env: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, str]]:
        completed = self.run("python", "-c", APP, model, env=env)
        assert completed.returncode in (0, 3), completed.stderr
        return completed.returncode, json.loads(completed.stdout.strip().splitlines()[-1])

    def plugins(self, env: Mapping[str, str] | None = None) -> list[dict[str, object]]:
        completed = self.run("fevex", "plugins", env=env)
        assert completed.returncode == 0, completed.stderr
        listed: list[dict[str, object]] = json.loads(completed.stdout)
        return listed


@pytest.fixture(scope="module")
def acme(tmp_path_factory: pytest.TempPathFactory) -> AcmeVenv:
    work = tmp_path_factory.mktemp("acme")
    project = work / "fevex-acme"
    (project / "src" / "fevex_acme").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PLUGIN_PYPROJECT)
    (project / "src" / "fevex_acme" / "__init__.py").write_text("")
    (project / "src" / "fevex_acme" / "plugin.py").write_text(PLUGIN_MODULE)

    venv = work / "venv"
    uv = [sys.executable, "-m", "uv", "--quiet"]
    subprocess.run([*uv, "venv", "--python", sys.executable, str(venv)], check=True, timeout=300)
    bin_dir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    install = subprocess.run(
        [
            *uv, "pip", "install", "--python", str(bin_dir / "python"),
            "-e", str(ROOT / "packages" / "core"), str(project),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    return AcmeVenv(bin_dir, work)


def _acme_store_url(acme: AcmeVenv, name: str) -> tuple[str, Path]:
    log = acme.work / name
    return f"acme://{log.as_posix()}", log


def test_plugin_model_and_store_serve_an_app_that_never_names_them(acme: AcmeVenv) -> None:
    url, log = _acme_store_url(acme, "runs.log")

    code, answer = acme.run_app("acme:tiny", {"FEVEX_RUN_STORE": url})

    assert code == 0, answer
    assert answer["output"] == "hello from acme tiny"
    assert log.read_text().split() == [answer["run_id"]]


def test_plugin_store_alone_serves_an_app_with_its_own_model(acme: AcmeVenv) -> None:
    url, log = _acme_store_url(acme, "store-only.log")

    code, answer = acme.run_app("fake", {"FEVEX_RUN_STORE": url})

    assert code == 0, answer
    assert answer["output"] == "hello from a fake"
    assert log.read_text().split() == [answer["run_id"]]


def test_fevex_plugins_lists_the_plugin_with_its_distribution(acme: AcmeVenv) -> None:
    listed = {plugin["name"]: plugin for plugin in acme.plugins()}

    assert listed["acme"] == {
        "name": "acme",
        "distribution": "fevex-acme",
        "version": "1.2.3",
        "models": ["acme"],
        "run_stores": ["acme"],
        "tool_providers": [],
        "trace_exporters": [],
        "memory_stores": [],
        "record_stores": [],
        "commands": [],
    }
    about: dict[str, str] = {}
    exec((ROOT / "packages/core/src/fevex/__about__.py").read_text(), about)
    assert listed["fevex"]["distribution"] == "fevex"
    assert listed["fevex"]["version"] == about["__version__"]


def test_fevex_plugins_naming_the_plugin_loads_it(acme: AcmeVenv) -> None:
    url, log = _acme_store_url(acme, "named.log")

    code, answer = acme.run_app("acme:tiny", {"FEVEX_PLUGINS": "acme", "FEVEX_RUN_STORE": url})

    assert code == 0, answer
    assert answer["output"] == "hello from acme tiny"
    assert log.read_text().split() == [answer["run_id"]]
    assert "acme" in {plugin["name"] for plugin in acme.plugins({"FEVEX_PLUGINS": "acme"})}


@pytest.mark.parametrize(
    "switch",
    [{"FEVEX_PLUGINS": ""}, {"FEVEX_DISABLE_PLUGIN_AUTOLOAD": "1"}],
    ids=["FEVEX_PLUGINS-empty", "FEVEX_DISABLE_PLUGIN_AUTOLOAD"],
)
@pytest.mark.parametrize("model", ["acme:tiny", "fake"], ids=["acme-model", "acme-store-only"])
def test_switching_autoload_off_leaves_the_plugin_out(
    acme: AcmeVenv, switch: dict[str, str], model: str
) -> None:
    url, log = _acme_store_url(acme, "disabled.log")

    code, answer = acme.run_app(model, {**switch, "FEVEX_RUN_STORE": url})

    assert code == 3, answer
    assert answer["error"] == "FevexConfigurationError"
    assert answer["code"] == "MISSING_PLUGIN"
    # Installed, so the error names the switch that left it out, not an install.
    assert answer["message"].startswith(
        f"No {'model provider' if model == 'acme:tiny' else 'run store for scheme'} 'acme': "
        "the fevex-acme plugin is installed, but "
    )
    assert next(iter(switch)) in answer["message"]
    assert "pip install" not in answer["message"]
    assert not log.exists()
    assert "acme" not in {plugin["name"] for plugin in acme.plugins(switch)}


def test_a_fevex_plugin_that_is_not_installed_is_named_with_its_install(acme: AcmeVenv) -> None:
    code, answer = acme.run_app("openai:gpt-5-mini")

    assert code == 3, answer
    assert answer["code"] == "MISSING_PLUGIN"
    # The venv has the core installed from this checkout, where no index has the plugin.
    assert answer["message"] == (
        "No model provider 'openai'; install the fevex-openai plugin: pip install -e "
        f"./packages/openai (fevex was installed from the checkout at {ROOT}; run it there)"
    )


def test_a_misspelt_provider_gets_a_suggestion(acme: AcmeVenv) -> None:
    code, answer = acme.run_app("opnai:gpt-5")

    assert code == 3, answer
    assert answer["code"] == "MISSING_PLUGIN"
    assert answer["message"] == "No model provider 'opnai'. Did you mean 'openai'?"


def test_a_misspelt_fevex_plugins_entry_is_an_error(acme: AcmeVenv) -> None:
    code, answer = acme.run_app("acme:tiny", {"FEVEX_PLUGINS": "acm"})

    assert code == 3, answer
    assert answer["code"] == "UNKNOWN_PLUGIN"
    assert answer["message"] == (
        "FEVEX_PLUGINS names plugins that cannot be loaded: 'acm' is no installed plugin. "
        "Did you mean 'acme'? Installed plugins: 'acme'."
    )
