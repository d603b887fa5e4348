"""The ``deepseek`` plugin: entry point, settings from the environment, lazy SDK import."""

import json
import os
import subprocess
import sys
from typing import Any

import pytest

import fevex_deepseek
from fevex.errors import FevexConfigurationError
from fevex.plugins import list_plugins, resolve_model
from fevex_deepseek import DeepSeekModel, create_deepseek


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FEVEX_", "DEEPSEEK_"))}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_public_face_is_exactly_the_documented_names() -> None:
    assert sorted(fevex_deepseek.__all__) == [
        "DEEPSEEK_PROFILE",
        "DEEPSEEK_STRICT_SUBSET",
        "DEFAULT_BASE_URL",
        "DeepSeekModel",
        "DeepSeekProvider",
        "SchemaPolicy",
        "__version__",
        "create_deepseek",
    ]


@pytest.mark.usefixtures("fresh_plugins")
def test_the_entry_point_resolves_deepseek_models_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-from-env")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", "http://127.0.0.1:9/")

    model = resolve_model("deepseek:deepseek-v4-flash")

    assert isinstance(model, DeepSeekModel)
    assert model.model_name == "deepseek-v4-flash"
    assert model.settings.api_key == "sk-from-env"
    assert model.settings.base_url == "http://127.0.0.1:9/"
    assert model.settings.strict_tools_base_url == "http://127.0.0.1:9/beta"
    assert model.schema_policy == "strict"
    (plugin,) = [p for p in list_plugins() if p["name"] == "deepseek"]
    assert plugin["distribution"] == "fevex-deepseek"
    assert plugin["version"] == fevex_deepseek.__version__
    assert plugin["models"] == ["deepseek"]


@pytest.mark.usefixtures("fresh_plugins")
def test_resolve_model_options_reach_create_deepseek() -> None:
    model = resolve_model("deepseek:deepseek-v4-pro", api_key="sk-x", schema_policy="best-effort")

    assert model.schema_policy == "best-effort"
    assert model.settings.base_url == "https://api.deepseek.com"
    assert model.settings.strict_tools_base_url == "https://api.deepseek.com/beta"


def test_a_missing_api_key_is_a_configuration_error_naming_the_variable() -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_deepseek()

    assert caught.value.code == "INVALID_MODEL"
    assert "DEEPSEEK_API_KEY" in caught.value.message


@pytest.mark.parametrize(
    ("options", "code"),
    [({"schema_policy": "lenient"}, "INVALID_MODEL"), ({"max_retries": -1}, "INVALID_MODEL")],
)
def test_invalid_settings_are_refused(options: dict[str, Any], code: str) -> None:
    with pytest.raises(FevexConfigurationError) as caught:
        create_deepseek(api_key="sk-x", **options)

    assert caught.value.code == code


def test_no_representation_shows_the_key() -> None:
    provider = create_deepseek(api_key="sk-very-secret")

    assert "sk-very-secret" not in repr(provider)
    assert "sk-very-secret" not in repr(provider("deepseek-v4-flash"))


def test_plugin_discovery_imports_neither_the_sdk_nor_an_http_client() -> None:
    completed = _python(
        "import json, sys\n"
        "import fevex_deepseek, fevex_deepseek.plugin\n"
        "from fevex.plugins import list_plugins\n"
        "assert any(p['name'] == 'deepseek' for p in list_plugins())\n"
        "print(json.dumps(sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in {'openai', 'httpx', 'httpx2', 'httpcore', 'httpcore2'})))"
    )

    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == []


def test_a_model_runs_on_httpx2_alone() -> None:
    completed = _python(
        "import json, sys\n"
        "from fevex_deepseek import create_deepseek\n"
        "create_deepseek(api_key='sk-x')('deepseek-v4-flash')\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'httpx', 'httpx2'})))"
    )

    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == ["httpx2"]


def test_without_the_sdk_building_a_model_names_the_install() -> None:
    completed = _python(
        "import sys\n"
        "sys.modules['openai'] = None  # as if it were not installed\n"
        "from fevex_deepseek import create_deepseek\n"
        "provider = create_deepseek(api_key='sk-x')\n"
        "try:\n"
        "    provider('deepseek-v4-flash')\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )

    assert completed.returncode == 0, completed.stderr
    assert 'pip install "fevex[deepseek]"' in completed.stdout
