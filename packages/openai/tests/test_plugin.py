"""The plugin: entry point, lazy SDK import, configuration from the environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from openai_loopback import TEST_API_KEY

import fevex_openai
from fevex.errors import FevexConfigurationError
from fevex.models import ModelGateway
from fevex.plugins import list_plugins, reset_plugins, resolve_model
from fevex_openai import OpenAIModel, OpenAIProvider, create_openai


@pytest.fixture
def fresh_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("FEVEX_PLUGINS", raising=False)
    monkeypatch.delenv("FEVEX_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    reset_plugins()
    yield
    reset_plugins()


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FEVEX_", "OPENAI_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
        check=False,
    )


def test_the_public_names_are_exactly_the_documented_ones() -> None:
    assert sorted(fevex_openai.__all__) == [
        "ClientSettings",
        "OPENAI_PROFILE",
        "OPENAI_STRICT_SUBSET",
        "OpenAIApi",
        "OpenAIModel",
        "OpenAIProvider",
        "ProviderProfile",
        "SchemaPolicy",
        "StrictSubset",
        "__version__",
        "check_base_url",
        "check_strict_schema",
        "create_openai",
    ]
    assert fevex_openai.__version__ == "0.1.0"


@pytest.mark.usefixtures("fresh_plugins")
def test_the_entry_point_registers_the_openai_models() -> None:
    [entry] = [plugin for plugin in list_plugins() if plugin["name"] == "openai"]
    assert entry["distribution"] == "fevex-openai"
    assert entry["models"] == ["openai"]


@pytest.mark.usefixtures("fresh_plugins")
def test_openai_model_names_resolve_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = resolve_model("openai:gpt-5-mini")
    assert isinstance(model, OpenAIModel)
    assert isinstance(model, ModelGateway)
    assert model.model_name == "gpt-5-mini"
    assert model.settings.api_key == TEST_API_KEY
    assert model.settings.base_url == "http://127.0.0.1:9/v1"
    assert (model.api, model.schema_policy, model.settings.max_retries) == (
        "responses",
        "strict",
        0,
    )


@pytest.mark.usefixtures("fresh_plugins")
def test_a_missing_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(FevexConfigurationError) as caught:
        resolve_model("openai:gpt-5-mini")
    assert caught.value.code == "INVALID_MODEL"
    assert "OPENAI_API_KEY" in caught.value.message


def test_create_openai_takes_explicit_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "from-the-environment")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    provider = create_openai(
        api_key=TEST_API_KEY,
        base_url="http://127.0.0.1:8000/v1",
        schema_policy="best-effort",
        api="chat",
    )
    assert isinstance(provider, OpenAIProvider)
    model = provider("local-llama")
    assert model.settings.api_key == TEST_API_KEY
    assert model.settings.base_url == "http://127.0.0.1:8000/v1"
    assert (model.api, model.schema_policy) == ("chat", "best-effort")


@pytest.mark.parametrize(
    ("arguments", "mentioned"),
    [
        ({"schema_policy": "loose"}, "schema_policy"),
        ({"api": "completions"}, "api"),
        ({"max_retries": -1}, "max_retries"),
    ],
)
def test_invalid_settings_are_configuration_errors(
    arguments: dict[str, object], mentioned: str
) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_openai(api_key=TEST_API_KEY, **arguments)  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_MODEL"
    assert mentioned in caught.value.message


def test_a_model_needs_a_name() -> None:
    with pytest.raises(FevexConfigurationError):
        create_openai(api_key=TEST_API_KEY)("  ")


def test_discovering_the_plugin_imports_no_sdk() -> None:
    code = (
        "import json, sys, fevex.plugins\n"
        "assert any(p['name'] == 'openai' for p in fevex.plugins.list_plugins())\n"
        "import fevex_openai\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in ('openai', 'httpx', 'httpx2', 'httpcore2'))))\n"
    )
    completed = run_python(code)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == []


def test_one_http_client_library_is_loaded() -> None:
    # The SDK runs on httpx2; fevex-openai brings no HTTP client of its own.
    code = (
        "import json, sys, asyncio\n"
        "from fevex_openai import create_openai\n"
        "create_openai(api_key='k', base_url='http://127.0.0.1:9/v1')('m')\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules}"
        " & {'httpx', 'httpx2', 'aiohttp', 'requests', 'urllib3'})))\n"
    )
    completed = run_python(code)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == ["httpx2"]


def test_a_missing_sdk_names_the_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['openai'] = None  # as if it were not installed\n"
        "from fevex_openai import create_openai\n"
        "try:\n"
        "    create_openai(api_key='k')('gpt-5-mini')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    completed = run_python(code)
    assert completed.returncode == 0, completed.stderr
    assert 'pip install "fevex[openai]"' in completed.stdout
