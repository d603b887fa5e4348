"""Install hints name what works for the way fevex was installed: the core's extra after an
install from an index, the plugin's folders after an install from a checkout.

Each case runs in a fresh interpreter whose ``fevex`` distribution metadata is the one the
case describes (a dist-info directory placed before site-packages), as pip would leave it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
from fevex.plugins import install_hints
install_hints.installed_entry_points = list  # as where fevex-postgres is not installed
error = install_hints.missing_plugin("run_stores", "postgresql", registered=[], loaded=set())
print(error.message)
"""


def _hint_with_metadata(tmp_path: Path, direct_url: dict[str, object] | None) -> str:
    dist_info = tmp_path / "fevex-0.1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: fevex\nVersion: 0.1.0\n")
    if direct_url is not None:
        (dist_info / "direct_url.json").write_text(json.dumps(direct_url))
    env = {key: value for key, value in os.environ.items() if not key.startswith("FEVEX_")}
    env["PYTHONPATH"] = str(tmp_path)
    completed = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


def test_an_install_from_an_index_is_told_the_extra(tmp_path: Path) -> None:
    assert _hint_with_metadata(tmp_path, None).endswith('pip install "fevex[postgres]"')


def test_an_install_from_a_wheel_file_is_told_the_extra(tmp_path: Path) -> None:
    wheel = {"url": "file:///tmp/fevex-0.1.0-py3-none-any.whl", "archive_info": {}}
    assert _hint_with_metadata(tmp_path, wheel).endswith('pip install "fevex[postgres]"')


@pytest.mark.parametrize(("editable", "prefix"), [(True, "-e "), (False, "")])
def test_an_install_from_a_checkout_is_told_the_plugin_folder(
    tmp_path: Path, editable: bool, prefix: str
) -> None:
    checkout = {"url": (ROOT / "packages" / "core").as_uri(), "dir_info": {"editable": editable}}
    hint = _hint_with_metadata(tmp_path, checkout)
    assert "fevex[" not in hint
    assert hint.endswith(
        f"pip install {prefix}./packages/postgres (fevex was installed from the checkout at "
        f"{ROOT}; run it there)"
    )


def test_this_suites_editable_install_names_both_folders_deepseek_needs() -> None:
    from fevex.plugins.install_hints import install_command

    assert install_command("deepseek").startswith(
        "pip install -e ./packages/openai -e ./packages/deepseek (fevex was installed"
    )
