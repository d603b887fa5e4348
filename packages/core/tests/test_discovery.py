"""Discovery of installed plugins: pluggy's hook callers, the environment switches and the
errors that say what to do.

The installed plugin here is real: a distribution's ``.dist-info`` with an entry point of the
``fevex`` group, on ``sys.path``, found by ``importlib.metadata`` like any installed one.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fevex import FevexConfigurationError, create_fevex, define_agent
from fevex.cli import CommandRegistry
from fevex.plugins import hookimpl, list_plugins, open_run_store, register_plugin, resolve_model
from fevex.plugins.discovery import add_plugin_commands
from fevex.testing import FakeModel

pytestmark = pytest.mark.usefixtures("fresh_plugins")

PROBE_MODULE = """\
from fevex.plugins import hookimpl
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel


@hookimpl(specname="fevex_register_models")
def provide_probe_models(register):
    register("probe", lambda model_name, **options: FakeModel({"output": "probe " + model_name}))


@hookimpl(specname="fevex_register_run_stores")
def provide_probe_stores(register):
    register("probe", lambda url, **options: InMemoryRunStore())
"""


@dataclass(frozen=True)
class Probe:
    """An installed plugin distribution ``fevex-probe`` whose entry point is ``probe``."""

    module: str


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Probe:
    module = f"fevex_probe_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(PROBE_MODULE)
    dist_info = tmp_path / "fevex_probe-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: fevex-probe\nVersion: 1.0\n")
    (dist_info / "entry_points.txt").write_text(f"[fevex]\nprobe = {module}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return Probe(module)


def load_only(monkeypatch: pytest.MonkeyPatch, selection: str) -> None:
    monkeypatch.delenv("FEVEX_DISABLE_PLUGIN_AUTOLOAD")
    monkeypatch.setenv("FEVEX_PLUGINS", selection)


def test_an_installed_plugin_with_specname_hooks_registers_through_pluggy(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_only(monkeypatch, "probe")

    app = create_fevex(agents=[define_agent(name="a", instructions="i", model="probe:tiny")])

    assert app.run_agent_sync("a", "x").output == "probe tiny"
    (listed,) = [p for p in list_plugins() if p["name"] == "probe"]
    assert listed["distribution"] == "fevex-probe"
    assert listed["version"] == "1.0"
    assert listed["models"] == ["probe"]
    assert listed["run_stores"] == ["probe"]
    assert open_run_store("probe://here") is not None


def test_a_plugin_registered_by_hand_with_specname_hooks_works() -> None:
    class Plugin:
        @staticmethod
        @hookimpl(specname="fevex_register_models")
        def acme_models(register: Any) -> None:
            register("acme", lambda model_name, **options: FakeModel({"output": model_name}))

    register_plugin(Plugin, name="acme")

    assert isinstance(resolve_model("acme:x"), FakeModel)


def test_command_hooks_are_called_through_pluggy_with_wrappers() -> None:
    class Plugin:
        @staticmethod
        @hookimpl(specname="fevex_register_commands", wrapper=True)
        def add_hello(cli: Any) -> Generator[None, None, None]:
            cli.add_command("hello", help="Say hello.")
            return (yield)

    register_plugin(Plugin, name="greet")
    parser = argparse.ArgumentParser()
    registry = CommandRegistry(parser.add_subparsers())

    add_plugin_commands(registry)

    assert parser.parse_args(["hello"]) is not None
    (greet,) = [p for p in list_plugins() if p["name"] == "greet"]
    assert greet["commands"] == ["hello"]


def test_an_unknown_fevex_plugins_entry_is_an_error_with_a_suggestion(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_only(monkeypatch, "prob, opnai")

    with pytest.raises(FevexConfigurationError) as caught:
        list_plugins()

    error = caught.value
    assert error.code == "UNKNOWN_PLUGIN"
    assert error.details["unknown"] == ["opnai", "prob"]
    assert "'opnai' is no installed plugin. Did you mean 'openai'?" in error.message
    assert "'prob' is no installed plugin. Did you mean 'probe'?" in error.message
    assert "'probe'" in error.message.partition("Installed plugins:")[2]


def test_fevex_plugins_may_name_the_core_which_always_loads(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_only(monkeypatch, "fevex")

    assert [p["name"] for p in list_plugins()] == ["fevex"]


def test_a_plugin_left_out_by_fevex_plugins_is_named_with_the_switch(
    probe: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_only(monkeypatch, "")

    with pytest.raises(FevexConfigurationError) as caught:
        resolve_model("probe:tiny")

    assert caught.value.code == "MISSING_PLUGIN"
    assert caught.value.message == (
        "No model provider 'probe': the fevex-probe plugin is installed, but "
        "FEVEX_PLUGINS='' leaves it out; add 'probe' to FEVEX_PLUGINS."
    )


def test_a_plugin_left_out_by_the_autoload_switch_is_named_with_the_switch(probe: Probe) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        open_run_store("probe://x")

    assert caught.value.code == "MISSING_PLUGIN"
    assert caught.value.message == (
        "No run store for scheme 'probe': the fevex-probe plugin is installed, but "
        "FEVEX_DISABLE_PLUGIN_AUTOLOAD turns plugin autoload off. Unset it, or pass the "
        f"module {probe.module} to fevex.plugins.register_plugin."
    )


@pytest.mark.parametrize(
    ("reference", "suggestion"),
    [("opnai:gpt-5", "openai"), ("deepsek:chat", "deepseek"), ("acm:x", "acme")],
)
def test_unknown_model_providers_get_a_suggestion(reference: str, suggestion: str) -> None:
    class Plugin:
        @staticmethod
        @hookimpl
        def fevex_register_models(register: Any) -> None:
            register("acme", lambda model_name, **options: FakeModel())

    register_plugin(Plugin, name="acme")

    with pytest.raises(FevexConfigurationError) as caught:
        resolve_model(reference)

    assert caught.value.code == "MISSING_PLUGIN"
    provider = reference.partition(":")[0]
    assert caught.value.message == (f"No model provider {provider!r}. Did you mean {suggestion!r}?")


@pytest.mark.parametrize(
    ("url", "suggestion"),
    [("sqlit:///runs.db", "sqlite"), ("memroy://", "memory"), ("postgress://h/db", "postgres")],
)
def test_unknown_store_schemes_get_a_suggestion(url: str, suggestion: str) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        open_run_store(url)

    assert caught.value.code == "MISSING_PLUGIN"
    assert caught.value.message.endswith(f"Did you mean {suggestion!r}?")


def test_a_name_like_no_other_lists_what_is_loaded() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        open_run_store("zzz://x")

    assert caught.value.message == (
        "No run store for scheme 'zzz'. Loaded plugins provide: 'memory'. Install the plugin "
        "distribution that provides it; `fevex plugins` lists what is loaded."
    )
