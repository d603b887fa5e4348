"""Plugin discovery, typed wrappers, install hints and the ``fevex plugins`` command."""

from __future__ import annotations

import json
from typing import Any

import pluggy
import pytest

from fevex import FevexConfigurationError, create_fevex, define_agent
from fevex.cli import main
from fevex.plugins import (
    hookimpl,
    list_plugins,
    open_run_store,
    register_plugin,
    resolve_model,
)
from fevex.runtime import InMemoryRunStore
from fevex.testing import FakeModel

pytestmark = [pytest.mark.usefixtures("fresh_plugins"), pytest.mark.anyio]


class Plugin:
    """A hand-made plugin object: its attributes are its hook implementations."""

    def __init__(self, **attributes: Any) -> None:
        self.__dict__.update(attributes)


class AcmeStore(InMemoryRunStore):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url


def acme_plugin() -> Any:
    opened: list[Any] = []

    def create_model(model_name: str, **options: Any) -> FakeModel:
        return FakeModel({"output": f"acme {model_name} {options}"})

    def open_store(url: str, **options: Any) -> AcmeStore:
        store = AcmeStore(url)
        opened.append(store)
        return store

    @hookimpl
    def fevex_register_models(register: Any) -> None:
        register("acme", create_model)

    @hookimpl
    def fevex_register_run_stores(register: Any) -> None:
        register("acme", open_store)

    return Plugin(
        fevex_register_models=fevex_register_models,
        fevex_register_run_stores=fevex_register_run_stores,
        opened=opened,
    )


def test_the_core_registers_the_memory_store() -> None:
    (core,) = [p for p in list_plugins() if p["name"] == "fevex"]
    assert core["distribution"] == "fevex"
    assert core["run_stores"] == ["memory"]
    assert isinstance(open_run_store("memory://"), InMemoryRunStore)


def test_registered_providers_and_stores_are_used_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = acme_plugin()
    register_plugin(plugin, name="acme")
    assert resolve_model("acme:tiny", temperature=0).stream is not None
    monkeypatch.setenv("FEVEX_RUN_STORE", "acme://somewhere")
    app = create_fevex(agents=[define_agent(name="a", instructions="i", model="acme:tiny")])
    assert app.run_agent_sync("a", "x").output == "acme tiny {}"
    (store,) = plugin.opened
    assert app.run_store is store
    assert store.url == "acme://somewhere"
    (listed,) = [p for p in list_plugins() if p["name"] == "acme"]
    assert listed["models"] == ["acme"]
    assert listed["run_stores"] == ["acme"]


async def test_closing_the_app_closes_the_models_it_built() -> None:
    closed: list[str] = []

    class Closable(FakeModel):
        async def aclose(self) -> None:
            closed.append("plugin model")

    @hookimpl
    def fevex_register_models(register: Any) -> None:
        register("closable", lambda name, **options: Closable())

    register_plugin(Plugin(fevex_register_models=fevex_register_models))
    mine = Closable()
    app = create_fevex(
        models={"mine": mine},
        agents=[
            define_agent(name="a", instructions="i", model="closable:x"),
            define_agent(name="b", instructions="i", model="mine"),
        ],
    )
    await app.close()
    assert closed == ["plugin model"]


def test_store_schemes_with_a_driver_suffix_fall_back_to_the_base_scheme() -> None:
    register_plugin(acme_plugin(), name="acme")
    store = open_run_store("acme+fast://x")
    assert isinstance(store, AcmeStore)
    assert store.url == "acme+fast://x"


def test_malformed_references_are_refused_before_any_plugin_lookup() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        resolve_model("no-colon")
    assert caught.value.code == "INVALID_MODEL"
    with pytest.raises(FevexConfigurationError) as caught:
        open_run_store("no scheme")
    assert caught.value.code == "INVALID_CONFIG"


def test_two_plugins_cannot_claim_one_name() -> None:
    register_plugin(acme_plugin(), name="acme")
    copy = acme_plugin()
    with pytest.raises(FevexConfigurationError) as caught:
        register_plugin(copy, name="acme-copy")
    assert caught.value.code == "PLUGIN_CONFLICT"
    # All or nothing: the refused plugin left no registration and is not loaded.
    assert "acme-copy" not in {p["name"] for p in list_plugins()}
    open_run_store("acme://x")
    assert copy.opened == []


def test_a_plugin_object_must_be_hashable() -> None:
    class Unhashable(Plugin):
        __hash__ = None  # type: ignore[assignment]

    with pytest.raises(FevexConfigurationError) as caught:
        register_plugin(Unhashable(), name="odd")
    assert caught.value.code == "INVALID_PLUGIN"
    assert "odd" not in {p["name"] for p in list_plugins()}


def test_unknown_hooks_are_rejected() -> None:
    @hookimpl
    def fevex_register_everything(register: Any) -> None:
        raise AssertionError("never called")

    with pytest.raises(pluggy.PluginValidationError):
        register_plugin(Plugin(fevex_register_everything=fevex_register_everything))


def test_autoload_switches_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from fevex.plugins import discovery

    loaded: list[str] = []

    class EntryPoint:
        def __init__(self, name: str) -> None:
            self.name = name
            self.dist = None

        def load(self) -> Any:
            loaded.append(self.name)
            return Plugin()

    monkeypatch.setattr(
        discovery.importlib.metadata,
        "entry_points",
        lambda group: [EntryPoint("one"), EntryPoint("two")] if group == "fevex" else [],
    )
    monkeypatch.delenv("FEVEX_DISABLE_PLUGIN_AUTOLOAD")
    monkeypatch.setenv("FEVEX_PLUGINS", "two")
    assert [p["name"] for p in list_plugins()] == ["fevex", "two"]
    assert loaded == ["two"]

    discovery.reset_plugins()
    monkeypatch.setenv("FEVEX_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert [p["name"] for p in list_plugins()] == ["fevex"]
    assert loaded == ["two"]


def test_the_plugins_command_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    register_plugin(acme_plugin(), name="acme")
    assert main(["plugins"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {p["name"] for p in listed} == {"fevex", "acme"}
    core = next(p for p in listed if p["name"] == "fevex")
    assert set(core) == {
        "name",
        "distribution",
        "version",
        "models",
        "run_stores",
        "tool_providers",
        "trace_exporters",
        "memory_stores",
        "record_stores",
        "commands",
    }
    assert core["commands"] == ["plugins", "version", "recover", "worker", "eval", "serve"]


def test_plugins_add_commands(capsys: pytest.CaptureFixture[str]) -> None:
    def hello(args: Any) -> int:
        print(f"hello {args.who}")
        return 3

    @hookimpl
    def fevex_register_commands(cli: Any) -> None:
        parser = cli.add_command("hello", help="Say hello.")
        parser.add_argument("--who", default="world")
        parser.set_defaults(handler=hello)

    register_plugin(Plugin(fevex_register_commands=fevex_register_commands), "greet")
    assert main(["hello", "--who", "fevex"]) == 3
    assert capsys.readouterr().out == "hello fevex\n"
    (greet,) = [p for p in list_plugins() if p["name"] == "greet"]
    assert greet["commands"] == ["hello"]
