"""Plugin discovery and the typed wrappers that hide ``pm.hook``.

Entry points of the ``fevex`` group load once, on first use. ``FEVEX_PLUGINS=a,b`` loads
only the named entry points; ``FEVEX_DISABLE_PLUGIN_AUTOLOAD=1`` loads none. The core's own
registrations (the ``memory://`` store) are always present.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pluggy

from fevex.__about__ import __version__
from fevex.errors import FevexConfigurationError
from fevex.plugins import builtin, hookspecs

if TYPE_CHECKING:
    from fevex.runtime.run_store import RunStore

__all__ = [
    "PluginKind",
    "get_plugin_manager",
    "list_plugins",
    "open_run_store",
    "open_tool_provider",
    "open_trace_exporter",
    "plugin_factory",
    "register_plugin",
    "reset_plugins",
    "resolve_model",
]

PluginKind = Literal["models", "run_stores", "tool_providers", "trace_exporters"]
KINDS: tuple[PluginKind, ...] = ("models", "run_stores", "tool_providers", "trace_exporters")
ENTRY_POINT_GROUP = "fevex"

_KIND_WORDS = {
    "models": "model provider",
    "run_stores": "run store for scheme",
    "tool_providers": "tool provider",
    "trace_exporters": "trace exporter",
}
# The extra that brings the official plugin for a name, for the install hint.
_EXTRAS = {
    "openai": "openai",
    "deepseek": "deepseek",
    "mcp": "mcp",
    "openapi": "openapi",
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "opentelemetry": "opentelemetry",
}


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


def _autoload_disabled() -> bool:
    return os.environ.get("FEVEX_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() not in (
        "",
        "0",
        "false",
        "no",
    )


def _load() -> _Plugins:
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    infos = {"fevex": _PluginInfo("fevex", "fevex", __version__)}
    manager.register(builtin, name="fevex")
    if not _autoload_disabled():
        selected = os.environ.get("FEVEX_PLUGINS")
        wanted = None if selected is None else {n.strip() for n in selected.split(",") if n.strip()}
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if (wanted is not None and entry_point.name not in wanted) or manager.has_plugin(
                entry_point.name
            ):
                continue
            try:
                plugin = entry_point.load()
            except Exception as error:
                raise FevexConfigurationError(
                    "PLUGIN_LOAD_FAILED",
                    f"The fevex plugin {entry_point.name!r} could not be imported: "
                    f"{type(error).__name__}: {error}. Fix or uninstall it, or leave it out "
                    "with FEVEX_PLUGINS.",
                    category="plugin",
                ) from error
            manager.register(plugin, name=entry_point.name)
            dist = entry_point.dist
            infos[entry_point.name] = _PluginInfo(
                entry_point.name,
                dist.name if dist else "unknown",
                dist.version if dist else "unknown",
            )
    manager.check_pending()
    plugins = _Plugins(manager, infos, {kind: {} for kind in KINDS})
    for name, plugin in manager.list_name_plugin():
        _collect(plugins, name, plugin)
    return plugins


def _collect(plugins: _Plugins, plugin_name: str, plugin: object) -> None:
    info = plugins.infos.setdefault(plugin_name, _PluginInfo(plugin_name, "unknown", "unknown"))
    for kind in KINDS:
        hook = getattr(plugin, f"fevex_register_{kind}", None)
        if hook is None:
            continue

        def register(name: str, factory: Callable[..., Any], kind: str = kind) -> None:
            if not isinstance(name, str) or not name or not callable(factory):
                raise FevexConfigurationError(
                    "INVALID_PLUGIN",
                    f"Plugin {plugin_name} registered an invalid {_KIND_WORDS[kind]} {name!r}.",
                    category="plugin",
                )
            if name in plugins.factories[kind]:
                raise FevexConfigurationError(
                    "PLUGIN_CONFLICT",
                    f"Plugin {plugin_name} registered {_KIND_WORDS[kind]} {name!r}, which "
                    "another plugin already registered.",
                    category="plugin",
                )
            plugins.factories[kind][name] = factory
            info.registered[kind].append(name)

        hook(register=register)


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
        registered = plugins.manager.register(plugin, name=name)
        if registered is None:
            return
        plugins.manager.check_pending()
        _collect(plugins, registered, plugin)


def reset_plugins() -> None:
    """Forget loaded plugins so the next use discovers them again (for tests)."""
    global _loaded
    with _lock:
        _loaded = None


def plugin_factory(kind: PluginKind, name: str) -> Callable[..., Any]:
    """The factory a plugin registered, or the install hint as a configuration error."""
    factory = _plugins().factories[kind].get(name)
    if factory is None:
        raise missing_plugin(kind, name)
    return factory


def missing_plugin(kind: PluginKind, name: str) -> FevexConfigurationError:
    extra = _EXTRAS.get(name)
    hint = f'pip install "fevex[{extra}]"' if extra else "pip install the plugin that provides it"
    return FevexConfigurationError(
        "MISSING_PLUGIN",
        f"No {_KIND_WORDS[kind]} {name!r}; install it with: {hint}",
        category="plugin",
        details={"kind": kind, "name": name},
    )


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
    scheme, separator, _ = url.partition(":")
    if not separator or not scheme:
        # The URL is not repeated: it may carry a password.
        raise FevexConfigurationError(
            "INVALID_CONFIG", "A run store URL needs a scheme, like 'memory://' or 'sqlite:///'."
        )
    factories = _plugins().factories["run_stores"]
    base = scheme.partition("+")[0]
    factory = factories.get(scheme) or factories.get(base)
    if factory is None:
        raise missing_plugin("run_stores", base)
    store: RunStore = factory(url, **options)
    return store


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


def record_command(plugin_name: str, command: str) -> None:
    info = _plugins().infos.get(plugin_name)
    if info is not None and command not in info.commands:
        info.commands.append(command)
