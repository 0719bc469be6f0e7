"""Hub models and datasets are resolved on the launching machine (grpo_sweep/launching/hub.py, called by the gate): a
hub id that is neither cached nor reachable is one line before anything runs or is queued; a model in the HF cache
trains with the hub out of reach.

"The hub out of reach" is HF_ENDPOINT pointed at a closed local port: every request is refused at once, on any
machine, with or without a network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FAST, ROOT, compose, run_launch
from .test_gate import assert_one_line_refusal, started_runs

NO_HUB = "http://127.0.0.1:9"  # the discard port: nothing listens there


def hub_env(tmp_path: Path, offline: bool = False) -> dict:
    env = {
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": NO_HUB,
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1" if offline else "0",
    }
    return env


QWEN_REFUSAL = (
    "grpo-sweep: model.name_or_path='Qwen/Qwen2.5-0.5B-Instruct' is not in the HF cache and {where}: run this launch "
    "once on a machine that reaches the hub (it fetches 'Qwen/Qwen2.5-0.5B-Instruct' into the HF cache the nodes "
    "share, $HF_HOME), or use model.name_or_path=<local dir>"
)


@pytest.mark.parametrize("offline", [False, True], ids=["hub-unreachable", "HF_HUB_OFFLINE"])
def test_a_hub_model_neither_cached_nor_reachable_is_one_line_before_anything_runs(tmp_path, offline):
    out = run_launch(
        ["model=qwen2_5_0_5b_instruct", "model.dtype=float32"], tmp_path, timeout=120, env=hub_env(tmp_path, offline)
    )
    assert out.returncode == 1, out.stderr[-3000:]
    where = "HF_HUB_OFFLINE is set" if offline else "the hub cannot be reached from this machine"
    assert_one_line_refusal(out.stderr, QWEN_REFUSAL.format(where=where))
    assert started_runs(tmp_path) == []


def test_a_grid_naming_an_unreachable_hub_model_queues_nothing(tmp_path):
    out = run_launch(
        [
            "-m",
            "hydra/launcher=pool",
            "hydra.launcher.n_jobs=2",
            "model=qwen2_5_0_5b_instruct",
            "model.dtype=float32",
            "lora.r=8,16",
        ],
        tmp_path,
        timeout=120,
        env=hub_env(tmp_path),
    )
    assert out.returncode == 1, out.stderr[-3000:]
    lines = [entry for entry in out.stderr.splitlines() if entry.strip()]
    assert lines[-1].startswith(
        "grpo-sweep: job 0 (lora.r=8): model.name_or_path='Qwen/Qwen2.5-0.5B-Instruct' is not in the HF cache"
    ), out.stderr[-3000:]
    assert lines[-1].endswith("; no run was started") and "Traceback" not in out.stderr
    assert started_runs(tmp_path) == []


def test_a_hub_dataset_neither_cached_nor_reachable_is_one_line(tmp_path):
    out = run_launch(["data=gsm8k", "reward_mix=format"], tmp_path, timeout=120, env=hub_env(tmp_path))
    assert out.returncode == 1, out.stderr[-3000:]
    lines = [entry for entry in out.stderr.splitlines() if entry.strip()]
    assert lines[-1].startswith(
        "grpo-sweep: data.path='openai/gsm8k' (subset 'main') is not in the datasets cache "
        "and the hub cannot be reached"
    ), out.stderr[-3000:]
    assert lines[-1].endswith("or use data.source=file data.path=<local dir or file>")
    assert "Traceback" not in out.stderr and started_runs(tmp_path) == []


def test_hub_ids_are_the_models_and_datasets_not_built_or_on_disk(tmp_path):
    from grpo_sweep.launching.hub import hub_ids

    assert hub_ids(compose()) == []  # the tiny model, the built-in task
    assert hub_ids(compose(["model=qwen2_5_0_5b_instruct", "data=gsm8k"])) == [
        ("model", "Qwen/Qwen2.5-0.5B-Instruct", None),
        ("dataset", "openai/gsm8k", "main"),
    ]
    local = compose(["model=qwen2_5_0_5b_instruct", f"model.name_or_path={tmp_path}"])
    assert hub_ids(local) == []


def place_in_hub_cache(model_dir: Path, hf_home: Path, repo_id: str) -> Path:
    """The layout huggingface_hub writes: blobs behind snapshots/<commit>/, refs/main naming the commit."""
    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / commit
    shutil.copytree(model_dir, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    return snapshot


# a training run in a process of its own (the hub's offline switch is process-wide), ~12 s: with the slow tests; the
# refusals of a model neither cached nor reachable stay in the default run
@pytest.mark.slow
def test_a_model_in_the_hf_cache_trains_with_the_hub_out_of_reach(tmp_path):
    from grpo_sweep.backends.trl_backend import model_source

    cfg = compose(FAST)
    built = Path(model_source(cfg.model, cfg.data))  # the tiny model FAST trains, as a directory
    place_in_hub_cache(built, tmp_path / "hf", "grpo-sweep-test/tiny-llama")
    # the job's environment as the gate leaves it: what it reads is HF_HUB_OFFLINE=1 from the launching process
    probe = (
        f"import os, runpy, sys\nsys.argv = [{str(ROOT / 'launch.py')!r}, *sys.argv[1:]]\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "finally:\n    print('HF_HUB_OFFLINE', os.environ.get('HF_HUB_OFFLINE'), file=sys.stderr)\n"
    )
    args = [
        *FAST,
        "model.name_or_path=grpo-sweep-test/tiny-llama",
        "model.tiny=null",
        "model.dtype=float32",
        f"output_root={tmp_path / 'out'}",
    ]
    out = subprocess.run(
        [sys.executable, "-c", probe, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **hub_env(tmp_path)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "HF_HUB_OFFLINE 1" in out.stderr
    assert list((tmp_path / "out").glob("**/summary.json")), out.stderr[-3000:]
