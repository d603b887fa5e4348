"""What a user should do when a name no loaded plugin provides is asked for.

fevex's own plugins are known by name, so the error can name the distribution and the
command that installs it, for the way fevex itself was installed: from an index, the
core's extra (``pip install "fevex[sqlite]"``); from a checkout of the repository (a
directory install, editable or not, as the distribution's ``direct_url.json`` says), the
plugin's folders in that checkout, since an extra would look for the plugin on an index
where it may not be published. An installed plugin that the environment switches left
out is named with the switch, since installing it again would not help.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Literal
from urllib.parse import unquote, urlparse

from fevex._ground.names import did_you_mean
from fevex.errors import FevexConfigurationError

# The module's constants (the entry-point group, the two switches) are imported by name.
__all__ = [
    "PluginKind",
    "autoload_disabled",
    "install_command",
    "installed_entry_points",
    "missing_plugin",
    "unknown_selected_plugins",
]

PluginKind = Literal[
    "models", "run_stores", "tool_providers", "trace_exporters", "memory_stores", "record_stores"
]

ENTRY_POINT_GROUP = "fevex"
AUTOLOAD_SWITCH = "FEVEX_DISABLE_PLUGIN_AUTOLOAD"
SELECTION_SWITCH = "FEVEX_PLUGINS"

KIND_WORDS: dict[PluginKind, str] = {
    "models": "model provider",
    "run_stores": "run store for scheme",
    "tool_providers": "tool provider",
    "trace_exporters": "trace exporter",
    "memory_stores": "memory store for scheme",
    "record_stores": "record store for scheme",
}

# The names fevex's own plugins register, and the extra of the core that installs each:
# extra ``x`` brings the distribution ``fevex-x``, whose entry point is also named ``x``.
OFFICIAL_EXTRAS: dict[PluginKind, dict[str, str]] = {
    "models": {"openai": "openai", "deepseek": "deepseek"},
    "run_stores": {"sqlite": "sqlite", "postgresql": "postgres", "postgres": "postgres"},
    "tool_providers": {"mcp": "mcp", "openapi": "openapi"},
    "trace_exporters": {"opentelemetry": "opentelemetry"},
    "memory_stores": {"sqlite": "sqlite", "postgresql": "postgres", "postgres": "postgres"},
    "record_stores": {"sqlite": "sqlite", "postgresql": "postgres", "postgres": "postgres"},
}


def autoload_disabled() -> bool:
    return os.environ.get(AUTOLOAD_SWITCH, "").strip().lower() not in ("", "0", "false", "no")


def installed_entry_points() -> list[importlib.metadata.EntryPoint]:
    return list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


# The checkout folders each extra stands for (a plugin's own fevex dependencies included).
CHECKOUT_FOLDERS: dict[str, tuple[str, ...]] = {
    "deepseek": ("openai", "deepseek"),
    "http": ('"./packages/core[http]"',),
}


@functools.cache
def _checkout() -> tuple[Path, bool] | None:
    """The root of the checkout fevex was installed from, and whether editably; ``None``
    for any other install (an index, a wheel file, a VCS URL)."""
    try:
        text = importlib.metadata.distribution("fevex").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        described = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(described, dict) or not isinstance(described.get("dir_info"), dict):
        return None
    url = urlparse(str(described.get("url", "")))
    if url.scheme != "file":
        return None
    core = Path(unquote(url.path))
    if core.name != "core" or core.parent.name != "packages":
        return None
    return core.parent.parent, bool(described["dir_info"].get("editable"))


def install_command(extra: str) -> str:
    """The command that installs what the core's ``extra`` brings, for the way fevex was
    installed (see the module's docstring)."""
    checkout = _checkout()
    if checkout is None:
        return f'pip install "fevex[{extra}]"'
    root, editable = checkout
    prefix = "-e " if editable else ""
    folders = CHECKOUT_FOLDERS.get(extra, (extra,))
    listed = " ".join(
        prefix + (folder if folder.startswith('"') else f"./packages/{folder}")
        for folder in folders
    )
    return f"pip install {listed} (fevex was installed from the checkout at {root}; run it there)"


def _install_line(extra: str) -> str:
    return install_command(extra)


def _installed_but_left_out(
    kind: PluginKind, name: str, loaded: Collection[str]
) -> importlib.metadata.EntryPoint | None:
    """The installed, unloaded entry point that would provide ``name``: one named after it,
    or the entry point of the fevex plugin that registers it."""
    extra = OFFICIAL_EXTRAS[kind].get(name)
    for entry_point in installed_entry_points():
        if entry_point.name in loaded:
            continue
        distribution = entry_point.dist.name if entry_point.dist else None
        if entry_point.name == name or (extra is not None and distribution == f"fevex-{extra}"):
            return entry_point
    return None


def missing_plugin(
    kind: PluginKind, name: str, registered: Iterable[str], loaded: Collection[str]
) -> FevexConfigurationError:
    """The ``MISSING_PLUGIN`` error for ``name``, which no loaded plugin registered as a
    ``kind``; ``registered`` are the names that are, ``loaded`` the loaded plugins."""
    registered = sorted(registered)
    words = KIND_WORDS[kind]
    left_out = _installed_but_left_out(kind, name, loaded)
    extra = OFFICIAL_EXTRAS[kind].get(name)
    if left_out is not None:
        distribution = left_out.dist.name if left_out.dist else left_out.value
        if autoload_disabled():
            module, attribute = left_out.module, left_out.attr
            target = f"{module}.{attribute}" if attribute else f"the module {module}"
            hint = (
                f"the {distribution} plugin is installed, but {AUTOLOAD_SWITCH} turns plugin "
                f"autoload off. Unset it, or pass {target} to fevex.plugins.register_plugin"
            )
        else:
            selected = os.environ.get(SELECTION_SWITCH, "")
            hint = (
                f"the {distribution} plugin is installed, but {SELECTION_SWITCH}={selected!r} "
                f"leaves it out; add {left_out.name!r} to {SELECTION_SWITCH}"
            )
        message = f"No {words} {name!r}: {hint}."
    elif extra is not None:
        message = f"No {words} {name!r}; install the fevex-{extra} plugin: {_install_line(extra)}"
    else:
        known = set(registered) | set(OFFICIAL_EXTRAS[kind])
        suggestion = did_you_mean(name, known)
        message = f"No {words} {name!r}.{suggestion}"
        if not suggestion:
            available = ", ".join(repr(n) for n in registered) or "none"
            message += (
                f" Loaded plugins provide: {available}. Install the plugin distribution that "
                "provides it; `fevex plugins` lists what is loaded."
            )
    return FevexConfigurationError(
        "MISSING_PLUGIN",
        message,
        category="plugin",
        details={"kind": kind, "name": name},
    )


def unknown_selected_plugins(
    unknown: Iterable[str], installed: Iterable[str]
) -> FevexConfigurationError:
    """The ``UNKNOWN_PLUGIN`` error for ``FEVEX_PLUGINS`` entries no installed plugin has."""
    installed = sorted(installed)
    official = {extra for extras in OFFICIAL_EXTRAS.values() for extra in extras.values()}
    problems = []
    for name in sorted(unknown):
        if name in official:
            problems.append(f"{name!r} is not installed; install it with: {_install_line(name)}.")
        else:
            suggestion = did_you_mean(name, set(installed) | official)
            problems.append(f"{name!r} is no installed plugin.{suggestion}")
    available = ", ".join(repr(n) for n in installed) or "none"
    return FevexConfigurationError(
        "UNKNOWN_PLUGIN",
        f"{SELECTION_SWITCH} names plugins that cannot be loaded: {' '.join(problems)} "
        f"Installed plugins: {available}.",
        category="plugin",
        details={"unknown": sorted(unknown), "installed": installed},
    )
