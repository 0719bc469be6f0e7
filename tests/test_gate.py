"""The gate (grpo_sweep/sweeps/gate.py): a grid with one bad job starts no run, whichever launcher or sweeper runs it,
and the refusal is one line naming the bad value.

Nothing trains here: if the gate let the grid through, the good job would start training and leave a
metrics.jsonl (or, under SLURM, a job script at the stand-in sbatch), which the tests look for.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from .conftest import FAST, ROOT, run_launch
from .test_launchers import CPU_JOB, fake_sbatch, submit  # noqa: F401  (fake_sbatch: a fixture)

BAD = "trainer.num_generations=3"  # does not divide the generation batch (8 x 1 in FAST)
GRID = ["trainer.num_generations=4,3", *[o for o in FAST if not o.startswith("trainer.num_generations")]]
REFUSAL = ("grpo-sweep: job 1 (trainer.num_generations=3): trainer.num_generations=3 must divide the generation batch "
           "per_device_train_batch_size x steps_per_generation = 8 x 1 = 8; no run was started")
ENV = {"PYTHONPATH": str(ROOT)}


def started_runs(root: Path) -> list[Path]:
    """What a started run leaves: Hydra's .hydra/ in its run dir, its log, training's metrics."""
    return [p for pattern in ("**/metrics.jsonl", "**/.hydra", "**/launch.log", "**/summary.json", "**/.submitit")
            for p in root.glob(pattern)]


def assert_one_line_refusal(stderr: str, line: str) -> None:
    lines = [entry for entry in stderr.splitlines() if entry.strip()]
    assert lines[-1] == line, stderr[-3000:]
    assert "Traceback" not in stderr and "HYDRA_FULL_ERROR" not in stderr, stderr[-3000:]


@pytest.mark.parametrize(
    "launcher",
    [
        [],  # hydra/launcher=local, the default
        ["hydra/launcher=local", "hydra.sweeper.max_batch_size=1"],  # the bad job in the second batch
        ["hydra/launcher=pool", "hydra.launcher.n_jobs=2"],
        ["hydra/launcher=submitit_local", "hydra.launcher.array_parallelism=2"],
        ["hydra/launcher=basic"],  # Hydra's own launcher: the grpo_basic sweeper gates the sweep
        ["hydra/sweeper=basic", "hydra/launcher=pool", "hydra.launcher.n_jobs=2"],  # Hydra's sweeper: the launcher gates
    ],
    ids=["local", "local-batches", "pool", "submitit_local", "stock-launcher", "stock-sweeper-pool"],
)
def test_a_grid_with_one_bad_job_starts_no_run(tmp_path, launcher):
    out = run_launch(["-m", *launcher, *GRID], tmp_path, timeout=120, env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_refusal(out.stderr, REFUSAL)
    assert started_runs(tmp_path) == [], "a run started although another job of the grid was bad"


def test_a_slurm_grid_with_one_bad_job_submits_nothing(tmp_path, fake_sbatch):  # noqa: F811
    env, scripts = fake_sbatch
    out, probe = submit(["-m", "hydra/launcher=slurm", *CPU_JOB, *GRID], tmp_path, env)
    assert probe["code"] == 1, out.stderr[-3000:]
    assert_one_line_refusal(out.stderr, REFUSAL)
    assert list(scripts.iterdir()) == []  # nothing reached sbatch
    assert started_runs(tmp_path) == []


def test_an_optuna_study_with_a_bad_base_config_starts_no_worker(tmp_path):
    out = run_launch(["-m", "--config-dir", str(ROOT / "tests" / "conf"), "hparams_search=test_space", BAD],
                     tmp_path, timeout=120, env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_refusal(
        out.stderr, "grpo-sweep: trainer.num_generations=3 must divide the generation batch per_device_train_batch_size "
                    "x steps_per_generation = 16 x 1 = 16; no worker was started")
    assert not list(tmp_path.glob("grpo/studies/*/workers")) and started_runs(tmp_path) == []


@pytest.mark.skipif(importlib.util.find_spec("unsloth") is not None, reason="unsloth is installed here")
def test_an_optuna_space_with_a_choice_this_machine_cannot_train_starts_no_worker(tmp_path):
    """The workers train on this machine (local launcher): its checks apply to every group choice of the space."""
    out = run_launch(["-m", "--config-dir", str(ROOT / "tests" / "conf"), "hparams_search=test_space",
                      "+hydra.sweeper.params.backend={type:categorical,choices:[trl,unsloth]}"],
                     tmp_path, timeout=120, env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_refusal(
        out.stderr, "grpo-sweep: hydra.sweeper.params: backend=unsloth is refused: backend.name=unsloth: the unsloth "
                    "package is not installed (pip install -e '.[gpu]'); or use backend=trl; no worker was started")
    assert started_runs(tmp_path) == []


@pytest.mark.skipif(importlib.util.find_spec("unsloth") is not None, reason="unsloth is installed here")
@pytest.mark.parametrize("args", [["backend=unsloth"], ["-m", "backend=trl,unsloth"],
                                  ["-m", "hydra/launcher=pool", "backend=trl,unsloth"]],
                         ids=["single-run", "local-grid", "pool-grid"])
def test_a_backend_this_machine_lacks_is_one_line_before_anything_runs(tmp_path, args):
    out = run_launch([*args, *FAST], tmp_path, timeout=120, env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    message = ("backend.name=unsloth: the unsloth package is not installed (pip install -e '.[gpu]'); or use "
               "backend=trl")
    line = f"grpo-sweep: {message}" if args[0] != "-m" else f"grpo-sweep: job 1 (backend=unsloth): {message}; no run was started"
    assert_one_line_refusal(out.stderr, line)
    assert started_runs(tmp_path) == []


@pytest.mark.skipif(importlib.util.find_spec("unsloth") is not None, reason="unsloth is installed here")
def test_a_run_refused_where_it_trains_is_a_failed_run_in_one_line(tmp_path):
    """Hydra's own sweeper and launcher: nothing gates the sweep with this machine's checks, so the run's own
    process refuses it (as a SLURM compute node would): a failed run with its reason, no traceback, no training."""
    out = run_launch(["-m", "hydra/sweeper=basic", "hydra/launcher=basic", "backend=unsloth"], tmp_path, timeout=120,
                     env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    message = "backend.name=unsloth: the unsloth package is not installed (pip install -e '.[gpu]'); or use backend=trl"
    [summary] = tmp_path.glob("grpo/multiruns/*/0/summary.json")
    assert json.loads(summary.read_text())["error"] == f"refused: {message}"
    assert f"refused: {message}" in out.stdout and "Traceback" not in out.stdout + out.stderr
    assert not list(tmp_path.glob("**/metrics.jsonl"))


def test_a_sweep_planned_by_the_sweeper_is_composed_once(monkeypatch, tmp_path):
    """grpo_basic plans the whole sweep before its first batch and hands the plan to the launcher, which then
    composes nothing again."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from grpo_sweep.sweeps import gate as gate_module
    from grpo_sweep.configstore import register_configs
    from hydra_plugins.grpo_sweep_launcher.launcher import GrpoBasicLauncher, GrpoBasicSweeper

    from .conftest import CONF

    register_configs()
    composed: list = []
    real = gate_module.compose_runs

    def counting(loader, master, jobs):
        composed.extend(list(j) for j in jobs)
        return real(loader, master, jobs)

    monkeypatch.setattr(gate_module, "compose_runs", counting)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        master = hydra_compose(config_name="config", overrides=[f"hydra.sweep.dir={tmp_path}"], return_hydra_config=True)
        context = type("HydraContext", (), {"config_loader": GlobalHydra.instance().config_loader()})()
        launcher = GrpoBasicLauncher()
        launcher.config, launcher.hydra_context = master, context
        # Hydra's plugin scan loads its plugin modules anew, so BasicSweeper.__init__'s super() would not
        # recognise this class object: set what __init__ and setup() set
        sweeper = object.__new__(GrpoBasicSweeper)
        sweeper.config, sweeper.launcher, sweeper.hydra_context, sweeper.batch_index = master, launcher, context, 0
        sweeper.overrides = GrpoBasicSweeper.split_arguments(OverridesParser.create().parse_overrides(["lora.r=8,16"]), 1)
        first = sweeper.get_job_batch()
        sweeper.validate_batch_is_legal(first)  # the first batch: the gate plans both
        assert composed == [["lora.r=8"], ["lora.r=16"]]
        dirs = launcher.plan(first, 0)
        second = sweeper.get_job_batch()
        sweeper.validate_batch_is_legal(second)
        dirs += launcher.plan(second, 1)
        assert composed == [["lora.r=8"], ["lora.r=16"]]  # nothing composed again
        assert dirs == [tmp_path / "0", tmp_path / "1"]
