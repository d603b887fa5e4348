"""Plugin discovery and the typed wrappers that hide ``pm.hook``.

Entry points of the ``fevex`` group load once, on first use. ``FEVEX_PLUGINS=a,b`` loads
only the named entry points (a name no installed plugin has is an error);
``FEVEX_DISABLE_PLUGIN_AUTOLOAD=1`` loads none. The core's own registrations (the
``memory://`` store) are always present. Plugins are called through pluggy's hook callers,
so ``specname=``, wrappers and ordering work as pluggy documents them.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pluggy

from fevex.__about__ import __version__
from fevex.errors import FevexConfigurationError
from fevex.plugins import builtin, hookspecs
from fevex.plugins.commands import CommandRegistry
from fevex.plugins.install_hints import (
    ENTRY_POINT_GROUP,
    KIND_WORDS,
    SELECTION_SWITCH,
    PluginKind,
    autoload_disabled,
    installed_entry_points,
    missing_plugin,
    unknown_selected_plugins,
)

if TYPE_CHECKING:
    from fevex.knowledge.memory_store import MemoryStore
    from fevex.runtime.record_store import RecordStore
    from fevex.runtime.run_store import RunStore

__all__ = [
    "PluginKind",
    "add_plugin_commands",
    "get_plugin_manager",
    "list_plugins",
    "open_memory_store",
    "open_record_store",
    "open_run_store",
    "open_tool_provider",
    "open_trace_exporter",
    "plugin_factory",
    "register_plugin",
    "reset_plugins",
    "resolve_model",
]

KINDS: tuple[PluginKind, ...] = (
    "models",
    "run_stores",
    "tool_providers",
    "trace_exporters",
    "memory_stores",
    "record_stores",
)


@dataclass
class _PluginInfo:
    name: str
    distribution: str
    version: str
    registered: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    commands: list[str] = field(default_factory=list)


@dataclass
class _Plugins:
    manager: pluggy.PluginManager
    infos: dict[str, _PluginInfo]
    factories: dict[str, dict[str, Callable[..., Any]]]


_lock = threading.Lock()
_loaded: _Plugins | None = None


def _selected_entry_points() -> list[importlib.metadata.EntryPoint]:
    """The entry points to load: all, those ``FEVEX_PLUGINS`` names (each of which must be
    installed), or none when autoload is off."""
    if autoload_disabled():
        return []
    installed = installed_entry_points()
    selected = os.environ.get(SELECTION_SWITCH)
    if selected is None:
        return installed
    wanted = {name.strip() for name in selected.split(",") if name.strip()}
    # "fevex" is the core's own registrations, which always load.
    unknown = wanted - {entry_point.name for entry_point in installed} - {"fevex"}
    if unknown:
        raise unknown_selected_plugins(unknown, {entry_point.name for entry_point in installed})
    return [entry_point for entry_point in installed if entry_point.name in wanted]


def _load() -> _Plugins:
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    plugins = _Plugins(manager, {}, {kind: {} for kind in KINDS})
    _add(plugins, builtin, "fevex", "fevex", __version__)
    for entry_point in _selected_entry_points():
        if manager.has_plugin(entry_point.name):
            continue
        try:
            plugin = entry_point.load()
        except Exception as error:
            raise FevexConfigurationError(
                "PLUGIN_LOAD_FAILED",
                f"The fevex plugin {entry_point.name!r} could not be imported: "
                f"{type(error).__name__}: {error}. Fix or uninstall it, or leave it out "
                f"with {SELECTION_SWITCH}.",
                category="plugin",
            ) from error
        dist = entry_point.dist
        _add(
            plugins,
            plugin,
            entry_point.name,
            dist.name if dist else "unknown",
            dist.version if dist else "unknown",
        )
    return plugins


def _add(
    plugins: _Plugins, plugin: object, name: str | None, distribution: str, version: str
) -> None:
    """Register ``plugin`` and call its registration hooks through pluggy's hook callers.

    All or nothing: a plugin whose hooks are unknown or whose registrations are invalid or
    taken is unregistered again and leaves no registration behind.
    """
    manager = plugins.manager
    if not isinstance(plugin, Hashable):
        # pluggy keeps plugins in sets to call one plugin's hooks alone.
        raise FevexConfigurationError(
            "INVALID_PLUGIN",
            f"Plugin {name or plugin!r} is a {type(plugin).__name__}, which cannot be hashed; "
            "register a module, a class or an instance of a class.",
            category="plugin",
        )
    registered = manager.register(plugin, name=name)
    if registered is None:
        return
    info = _PluginInfo(registered, distribution, version)
    try:
        manager.check_pending()
        added = {kind: _call_registration_hook(plugins, plugin, info, kind) for kind in KINDS}
    except BaseException:
        manager.unregister(plugin)
        raise
    for kind, factories in added.items():
        plugins.factories[kind].update(factories)
        info.registered[kind].extend(factories)
    plugins.infos[registered] = info


def _only(manager: pluggy.PluginManager, hook_name: str, plugin: object) -> pluggy.HookCaller:
    """``hook_name``'s caller for ``plugin`` alone. pluggy still matches ``specname=``, runs
    wrappers and orders implementations; what the hook registers is known to be this
    plugin's."""
    others = [other for _, other in manager.list_name_plugin() if other is not plugin]
    return manager.subset_hook_caller(hook_name, remove_plugins=others)


def _call_registration_hook(
    plugins: _Plugins, plugin: object, info: _PluginInfo, kind: PluginKind
) -> dict[str, Callable[..., Any]]:
    taken = plugins.factories[kind]
    added: dict[str, Callable[..., Any]] = {}

    def register(name: str, factory: Callable[..., Any]) -> None:
        if not isinstance(name, str) or not name or not callable(factory):
            raise FevexConfigurationError(
                "INVALID_PLUGIN",
                f"Plugin {info.name} registered an invalid {KIND_WORDS[kind]} {name!r}.",
                category="plugin",
            )
        if name in taken or name in added:
            raise FevexConfigurationError(
                "PLUGIN_CONFLICT",
                f"Plugin {info.name} registered {KIND_WORDS[kind]} {name!r}, which "
                "another registration already claimed.",
                category="plugin",
            )
        added[name] = factory

    _only(plugins.manager, f"fevex_register_{kind}", plugin)(register=register)
    return added


def _plugins() -> _Plugins:
    global _loaded
    loaded = _loaded
    if loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = _load()
            loaded = _loaded
    return loaded


def get_plugin_manager() -> pluggy.PluginManager:
    """The loaded plugin manager (loading entry points on first use)."""
    return _plugins().manager


def register_plugin(plugin: object, name: str | None = None) -> None:
    """Register a plugin object (a module or instance with hook implementations) by hand."""
    plugins = _plugins()
    with _lock:
        _add(plugins, plugin, name, "unknown", "unknown")


def add_plugin_commands(cli: CommandRegistry) -> None:
    """Call every plugin's ``fevex_register_commands(cli)`` hook, setting
    ``cli.plugin_name`` to the plugin whose hook runs, then record every command in
    ``cli.added`` (the core's own, added before, too) for :func:`list_plugins`."""
    manager = get_plugin_manager()
    for name, plugin in manager.list_name_plugin():
        cli.plugin_name = name
        _only(manager, "fevex_register_commands", plugin)(cli=cli)
    for plugin_name, command in cli.added:
        _record_command(plugin_name, command)


def reset_plugins() -> None:
    """Forget loaded plugins so the next use discovers them again (for tests)."""
    global _loaded
    with _lock:
        _loaded = None


def plugin_factory(kind: PluginKind, name: str) -> Callable[..., Any]:
    """The factory a plugin registered, or what to install as a configuration error."""
    plugins = _plugins()
    factory = plugins.factories[kind].get(name)
    if factory is None:
        raise _missing(plugins, kind, name)
    return factory


def _missing(plugins: _Plugins, kind: PluginKind, name: str) -> FevexConfigurationError:
    return missing_plugin(kind, name, plugins.factories[kind], set(plugins.infos))


def resolve_model(reference: str, **options: Any) -> Any:
    """Build the model named ``provider:model`` with the provider's plugin."""
    provider, separator, model_name = reference.partition(":")
    if not separator or not provider or not model_name:
        raise FevexConfigurationError(
            "INVALID_MODEL", f"Model reference {reference!r} must look like 'provider:model'."
        )
    return plugin_factory("models", provider)(model_name, **options)


def open_run_store(url: str, **options: Any) -> RunStore:
    """Open the run store for ``url`` with the plugin registered for its scheme.

    ``postgresql+psycopg://...`` is looked up as ``postgresql+psycopg``, then ``postgresql``.
    """
    store: RunStore = run_store_factory(url)(url, **options)
    return store


def run_store_factory(url: str) -> Callable[..., RunStore]:
    """The factory that opens run stores of ``url``'s scheme (see :func:`open_run_store`),
    found without opening one: ``INVALID_CONFIG`` for a URL without a scheme,
    ``MISSING_PLUGIN`` for a scheme no loaded plugin serves."""
    return _store_factory("run_stores", "A run store", url)


def _store_factory(group: PluginKind, what: str, url: str) -> Callable[..., Any]:
    """The factory of ``group`` (``run_stores``, ...) registered for ``url``'s scheme, or
    for its base (``postgresql+psycopg`` is looked up, then ``postgresql``)."""
    scheme, separator, _ = url.partition(":")
    if not separator or not scheme:
        # The URL is not repeated: it may carry a password.
        raise FevexConfigurationError(
            "INVALID_CONFIG", f"{what} URL needs a scheme, like 'memory://' or 'sqlite:///'."
        )
    plugins = _plugins()
    factories = plugins.factories[group]
    base = scheme.partition("+")[0]
    factory = factories.get(scheme) or factories.get(base)
    if factory is None:
        raise _missing(plugins, group, base)
    return factory


def open_memory_store(url: str, **options: Any) -> MemoryStore:
    """Open the memory store for ``url`` with the plugin registered for its scheme
    (``sqlite:///memory.db``, ``postgresql://...``, ``memory://``)."""
    factory = _store_factory("memory_stores", "A memory store", url)
    store: MemoryStore = factory(url, **options)
    return store


def open_record_store(url: str, **options: Any) -> RecordStore:
    """Open the record store for ``url`` with the plugin registered for its scheme
    (``sqlite:///runs.db``, ``postgresql://...``, ``memory://``), looked up as
    :func:`open_run_store` looks run stores up."""
    store: RecordStore = record_store_factory(url)(url, **options)
    return store


def record_store_factory(url: str) -> Callable[..., RecordStore]:
    """The factory that opens record stores of ``url``'s scheme, found without opening one:
    ``INVALID_CONFIG`` for a URL without a scheme, ``MISSING_PLUGIN`` for a scheme no loaded
    plugin serves."""
    return _store_factory("record_stores", "A record store", url)


def open_tool_provider(name: str, **options: Any) -> Any:
    """Build the tool provider a plugin registered under ``name`` (``"mcp"``, ...)."""
    return plugin_factory("tool_providers", name)(**options)


def open_trace_exporter(name: str, **options: Any) -> Any:
    """Build the trace exporter a plugin registered under ``name``."""
    return plugin_factory("trace_exporters", name)(**options)


def list_plugins() -> list[dict[str, Any]]:
    """Every loaded plugin with its distribution, version and what it registered."""
    result = []
    for info in _plugins().infos.values():
        entry: dict[str, Any] = {
            "name": info.name,
            "distribution": info.distribution,
            "version": info.version,
        }
        entry.update({kind: list(names) for kind, names in info.registered.items()})
        entry["commands"] = list(info.commands)
        result.append(entry)
    return result


def _record_command(plugin_name: str, command: str) -> None:
    info = _plugins().infos.get(plugin_name)
    if info is not None and command not in info.commands:
        info.commands.append(command)
