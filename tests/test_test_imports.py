"""The tests import no third-party package that pyproject does not declare (scripts/check_test_imports.py, which
.ci/run runs right after the install)."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import check_test_imports  # noqa: E402


def test_every_package_the_tests_import_is_declared():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_test_imports.py")], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_finds_a_package_that_arrives_only_with_another(tmp_path):
    """A made-up repository: a test imports aiohttp directly and through a helper of scripts/; pyproject declares
    datasets only. An optional import, one the file skips without, and our own modules are not counted."""
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["datasets>=4"]\n[project.optional-dependencies]\ndev = ["pytest"]\n'
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "servers.py").write_text("import json\nfrom aiohttp import web\n")
    (tmp_path / "tests" / "test_x.py").write_text(
        "import pytest\nimport datasets\nimport grpo_sweep.run\nfrom scripts.servers import web\n"
        "try:\n    import wandb\nexcept ImportError:\n    wandb = None\n"
        "vllm = pytest.importorskip('vllm')\nimport vllm\n"
        "def test():\n    import aiohttp\n"
    )
    assert check_test_imports.undeclared(tmp_path) == [
        "scripts/servers.py:2 imports aiohttp (aiohttp)",
        "tests/test_x.py:12 imports aiohttp (aiohttp)",
    ]
