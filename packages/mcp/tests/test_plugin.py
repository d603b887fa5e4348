"""The installed plugin: found through its entry point, and cheap to discover."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fevex_mcp
from fevex.plugins import list_plugins
from fevex.plugins.discovery import plugin_factory

SDK_MODULES = {"mcp", "mcp_types", "httpx2"}


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
        "import fevex_mcp.plugin",
        "import fevex_mcp; fevex_mcp.create_mcp_tool_provider",
        "import fevex.plugins; assert fevex.plugins.list_plugins()",
    ],
)
def test_discovering_the_plugin_imports_no_sdk(code: str) -> None:
    loaded = modules_loaded_by(code)
    assert "fevex" in loaded
    assert SDK_MODULES.isdisjoint(loaded)


def test_creating_a_provider_loads_the_sdk() -> None:
    code = "import fevex_mcp; fevex_mcp.create_mcp_tool_provider('http://127.0.0.1/mcp')"
    assert modules_loaded_by(code) >= SDK_MODULES


def test_a_missing_sdk_names_the_install() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import fevex_mcp\n"
        "try:\n"
        "    fevex_mcp.create_mcp_tool_provider('http://127.0.0.1/mcp')\n"
        "except ImportError as error:\n"
        "    print('refused:', error)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert "refused: " in completed.stdout
    assert 'pip install "fevex[mcp]"' in completed.stdout


@pytest.mark.usefixtures("fresh_plugins")
def test_the_entry_point_registers_the_mcp_tool_provider() -> None:
    (registered,) = [plugin for plugin in list_plugins() if plugin["name"] == "mcp"]
    assert registered["distribution"] == "fevex-mcp"
    assert registered["version"] == fevex_mcp.__version__ == "0.1.0"
    assert registered["tool_providers"] == ["mcp"]
    assert registered["models"] == registered["run_stores"] == []
    factory = plugin_factory("tool_providers", "mcp")
    assert factory is fevex_mcp.create_mcp_tool_provider
    provider = factory(url="http://127.0.0.1/mcp", headers={"X-Team": "docs"})
    assert provider.url == "http://127.0.0.1/mcp"


def test_the_public_names() -> None:
    assert sorted(fevex_mcp.__all__) == [
        "DEFAULT_ELICITATION_TIMEOUT",
        "ElicitationAction",
        "ElicitationHandler",
        "ElicitationRequest",
        "ElicitationResponse",
        "FileTokenStore",
        "Headers",
        "HeadersSource",
        "InMemoryTokenStore",
        "MCPOAuth",
        "MCPRoot",
        "MCPSampling",
        "MCPToolProvider",
        "OAuthRedirect",
        "TokenEndpointAuthMethod",
        "TokenStore",
        "__version__",
        "create_mcp_tool_provider",
        "terminal_redirect",
    ]


def test_the_readme_documents_every_code_and_only_those() -> None:
    from fevex_mcp import errors

    raised = {
        value
        for name, value in vars(errors).items()
        if name.isupper() and isinstance(value, str) and value.startswith("MCP_")
    }
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    section = readme[readme.index("## Error codes") : readme.index("## Tests")]
    documented = set(re.findall(r"^\| `(MCP_[A-Z_]+)` \|", section, flags=re.MULTILINE))
    assert raised == documented
