"""scripts/gpu_check.sh on an air-gapped GPU node: its dry run lists what it would install from the wheelhouse
and what it would run, each check with its budget, and runs nothing; the wheelhouse's installer picks only what
this Python lacks."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import gpu_wheels  # noqa: E402


def fake_wheelhouse(directory: Path, names: list[str]) -> Path:
    directory.mkdir()
    for name in names:
        (directory / f"{name.replace('-', '_')}-1.0-py3-none-any.whl").write_bytes(b"")
    return directory


def test_the_dry_run_lists_what_it_would_install_and_run_and_runs_nothing(tmp_path):
    lacking = [name for name, _ in gpu_wheels.missing_here()]
    wheels = fake_wheelhouse(tmp_path / "wheels", [name for name, _ in gpu_wheels.requirements()])
    out = tmp_path / "results"
    result = subprocess.run(["bash", "scripts/gpu_check.sh", "--offline-wheels", str(wheels), "--out", str(out), "--dry-run"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHON": sys.executable})
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    assert f"pip install --no-index --no-deps --find-links {wheels}" in text
    for name in lacking:
        assert f"would install {name} from" in text, text
    assert "would install trl" not in text  # installed here: the node's own copy is kept
    assert f"results would go to {out}" in text
    assert "would run model (budget 60 s)" in text and "would run trl (budget 150 s)" in text
    assert f"model.name_or_path={out}/model-qwen2.5-0.5b-random" in text
    if importlib.util.find_spec("unsloth") is None:
        assert "would skip unsloth: not installed here: unsloth" in text
    assert not out.exists()  # nothing ran


def test_the_checks_fit_in_nine_minutes_with_the_install():
    import gpu_check

    checks = gpu_check.budgets(["trl", "unsloth"], cli=True)
    assert sum(checks.values()) <= gpu_check.parse_args([]).budget <= 540 - 30  # 30 s left to install the wheels
    assert "TOTAL_S=540" in (ROOT / "scripts" / "gpu_check.sh").read_text()


def test_the_installer_takes_only_what_this_python_lacks(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_wheels, "installed", lambda name: None if name in ("hydra-core", "nvidia-ml-py") else "1")
    wheels = fake_wheelhouse(tmp_path / "wheels", ["hydra-core"])
    assert gpu_wheels.plan(wheels) == [("hydra-core", wheels / "hydra_core-1.0-py3-none-any.whl"),
                                       ("nvidia-ml-py", None)]
    assert gpu_wheels.install(wheels) == 1  # a wheel the node needs is not there: said, nothing installed


def test_the_wheel_list_names_neither_torch_nor_transformers():
    names = {name for name, _ in gpu_wheels.requirements()}
    assert not names & {"torch", "transformers", "tokenizers", "safetensors", "huggingface-hub", "numpy"}
    assert {"trl", "peft", "accelerate", "datasets", "hydra-core"} <= names
