"""The gate (grpo_sweep/launching/gate.py): a grid with one bad job starts no run, whichever launcher or sweeper runs
it, and the refusal is one line naming the bad value.

Nothing trains here: if the gate let the grid through, the good job would start training and leave a
metrics.jsonl (or, under SLURM, a job script at the stand-in sbatch), which the tests look for.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from .conftest import FAST, ROOT, launch_here, run_launch
from .test_launchers import CPU_JOB, fake_sbatch, submit  # noqa: F401  (fake_sbatch: a fixture)

BAD = "trainer.num_generations=3"  # does not divide the generation batch (8 x 1 in FAST)
GRID = ["trainer.num_generations=4,3", *[o for o in FAST if not o.startswith("trainer.num_generations")]]
REFUSAL = (
    "grpo-sweep: job 1 (trainer.num_generations=3): trainer.num_generations=3 must divide the generation batch "
    "per_device_train_batch_size x steps_per_generation = 8 x 1 = 8; no run was started"
)
ENV = {"PYTHONPATH": str(ROOT)}


def left_on_disk(root: Path) -> list[str]:
    """Everything under ``root``: a refused launch leaves nothing (no multirun.yaml, no .submitit/)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def started_runs(root: Path) -> list[Path]:
    """What a started run leaves: Hydra's .hydra/ in its run dir, its log, training's metrics."""
    return [
        p
        for pattern in ("**/metrics.jsonl", "**/.hydra", "**/launch.log", "**/summary.json", "**/.submitit")
        for p in root.glob(pattern)
    ]


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
        [
            "hydra/sweeper=basic",
            "hydra/launcher=pool",
            "hydra.launcher.n_jobs=2",
        ],  # Hydra's sweeper: the launcher gates
    ],
    ids=["local", "local-batches", "pool", "submitit_local", "stock-launcher", "stock-sweeper-pool"],
)
def test_a_grid_with_one_bad_job_starts_no_run(tmp_path, launcher):
    out = launch_here(["-m", *launcher, *GRID], tmp_path)
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_refusal(out.stderr, REFUSAL)
    assert started_runs(tmp_path) == [], "a run started although another job of the grid was bad"
    if "hydra/sweeper=basic" not in launcher:  # Hydra's own sweeper writes its multirun.yaml before the launcher gates
        assert left_on_disk(tmp_path) == [], "a refused sweep left files"


def test_a_slurm_grid_with_one_bad_job_submits_nothing(tmp_path, fake_sbatch):  # noqa: F811
    env, scripts = fake_sbatch
    out, probe = submit(["-m", "hydra/launcher=slurm", *CPU_JOB, *GRID], tmp_path, env)
    assert probe["code"] == 1, out.stderr[-3000:]
    assert_one_line_refusal(out.stderr, REFUSAL)
    assert list(scripts.iterdir()) == []  # nothing reached sbatch
    assert started_runs(tmp_path) == []
    assert [p for p in left_on_disk(tmp_path) if p.split("/")[0] not in ("bin", "sbatch_scripts")] == [], (
        "a refused sweep left files"
    )  # the stand-in sbatch's own folders aside


def test_an_optuna_study_with_a_bad_base_config_starts_no_worker(tmp_path):
    out = run_launch(
        ["-m", "--config-dir", str(ROOT / "tests" / "conf"), "hparams_search=test_space", BAD],
        tmp_path,
        timeout=120,
        env=ENV,
    )
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_refusal(
        out.stderr,
        "grpo-sweep: trainer.num_generations=3 must divide the generation batch per_device_train_batch_size "
        "x steps_per_generation = 16 x 1 = 16; no worker was started",
    )
    assert not list(tmp_path.glob("grpo/studies/*/workers")) and started_runs(tmp_path) == []


@pytest.mark.skipif(importlib.util.find_spec("unsloth") is not None, reason="unsloth is installed here")
def test_an_optuna_space_with_a_choice_this_machine_cannot_train_starts_no_worker(tmp_path):
    """The workers train on this machine (local launcher): its checks apply to every group choice of the space."""
    out = run_launch(
        [
            "-m",
            "--config-dir",
            str(ROOT / "tests" / "conf"),
            "hparams_search=test_space",
            "+hydra.sweeper.params.backend={type:categorical,choices:[trl,unsloth]}",
        ],
        tmp_path,
        timeout=120,
        env=ENV,
    )
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_refusal(
        out.stderr,
        "grpo-sweep: hydra.sweeper.params: backend=unsloth is refused: backend.name=unsloth: the unsloth "
        "package is not installed (pip install -e '.[gpu]'); or use backend=trl; no worker was started",
    )
    assert started_runs(tmp_path) == []


@pytest.mark.skipif(importlib.util.find_spec("unsloth") is not None, reason="unsloth is installed here")
@pytest.mark.parametrize(
    "args",
    [["backend=unsloth"], ["-m", "backend=trl,unsloth"], ["-m", "hydra/launcher=pool", "backend=trl,unsloth"]],
    ids=["single-run", "local-grid", "pool-grid"],
)
def test_a_backend_this_machine_lacks_is_one_line_before_anything_runs(tmp_path, args):
    out = run_launch([*args, *FAST], tmp_path, timeout=120, env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    message = "backend.name=unsloth: the unsloth package is not installed (pip install -e '.[gpu]'); or use backend=trl"
    line = (
        f"grpo-sweep: {message}"
        if args[0] != "-m"
        else f"grpo-sweep: job 1 (backend=unsloth): {message}; no run was started"
    )
    assert_one_line_refusal(out.stderr, line)
    assert started_runs(tmp_path) == []


@pytest.mark.skipif(importlib.util.find_spec("unsloth") is not None, reason="unsloth is installed here")
def test_a_run_refused_where_it_trains_is_a_failed_run_in_one_line(tmp_path):
    """Hydra's own sweeper and launcher: nothing gates the sweep with this machine's checks, so the run's own
    process refuses it (as a SLURM compute node would): a failed run with its reason, no traceback, no training."""
    out = run_launch(
        ["-m", "hydra/sweeper=basic", "hydra/launcher=basic", "backend=unsloth"], tmp_path, timeout=120, env=ENV
    )
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

    from grpo_sweep.configstore import register_configs
    from grpo_sweep.launching import gate as gate_module
    from hydra_plugins.grpo_sweep_grid.sweeper import GrpoBasicSweeper
    from hydra_plugins.grpo_sweep_launcher.launcher import GrpoBasicLauncher

    from .conftest import CONF

    register_configs()
    composed: list = []
    real = gate_module.compose_runs

    def counting(loader, master, jobs):
        composed.extend(list(j) for j in jobs)
        return real(loader, master, jobs)

    monkeypatch.setattr(gate_module, "compose_runs", counting)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        master = hydra_compose(
            config_name="config", overrides=[f"hydra.sweep.dir={tmp_path}"], return_hydra_config=True
        )
        context = type("HydraContext", (), {"config_loader": GlobalHydra.instance().config_loader()})()
        launcher = GrpoBasicLauncher()
        launcher.config, launcher.hydra_context = master, context
        # Hydra's plugin scan loads its plugin modules anew, so BasicSweeper.__init__'s super() would not
        # recognise this class object: set what __init__ and setup() set
        sweeper = object.__new__(GrpoBasicSweeper)
        sweeper.config, sweeper.launcher, sweeper.hydra_context, sweeper.batch_index = master, launcher, context, 0
        sweeper.params, sweeper.max_batch_size = {}, 1
        sweeper.plan_sweep(["lora.r=8,16"])  # before the first batch: the gate plans both
        assert composed == [["lora.r=8"], ["lora.r=16"]]
        sweeper.overrides = GrpoBasicSweeper.split_arguments(
            OverridesParser.create().parse_overrides(["lora.r=8,16"]), 1
        )
        first = sweeper.get_job_batch()
        sweeper.validate_batch_is_legal(first)
        dirs = launcher.plan(first, 0)
        second = sweeper.get_job_batch()
        sweeper.validate_batch_is_legal(second)
        dirs += launcher.plan(second, 1)
        assert composed == [["lora.r=8"], ["lora.r=16"]]  # nothing composed again
        assert dirs == [tmp_path / "0", tmp_path / "1"]


# -- one vLLM engine per process ------------------------------------------------------------------------------

VLLM = ["backend=unsloth", "backend.fast_inference=true"]
VLLM_REFUSAL = (
    "backend=unsloth backend.fast_inference=true starts a vLLM engine that its process cannot free "
    "(vllm-project/vllm#21073), and {how}, so the next run there would run out of GPU memory; {fix}, or "
    "set backend.fast_inference=false"
)
ONE_PROCESS_PER_RUN = "hydra/launcher=submitit_local or hydra/launcher=slurm (a process per run)"


def fake_unsloth(tmp_path) -> dict:
    """An `unsloth` package that fails when imported: the machine check finds it, and the gate must not import it."""
    package = tmp_path / "fake" / "unsloth"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the gate imported unsloth')\n")
    return {"PYTHONPATH": f"{ROOT}:{package.parent}"}


@pytest.mark.parametrize(
    "launcher", [["hydra/launcher=local"], ["hydra/launcher=pool", "hydra.launcher.n_jobs=2"]], ids=["local", "pool"]
)
def test_a_grid_of_vllm_runs_on_a_launcher_that_shares_processes_is_one_line(tmp_path, launcher):
    out = run_launch(["-m", *launcher, *VLLM, "reward_mix=format,correct"], tmp_path, timeout=120, env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    name = launcher[0].split("=")[1]
    how = f"hydra/launcher={name} trains more than one of the sweep's 2 runs in a process"
    message = VLLM_REFUSAL.format(how=how, fix=f"use {ONE_PROCESS_PER_RUN}")
    assert_one_line_refusal(out.stderr, f"grpo-sweep: job 0 (reward_mix=format): {message}; no run was started")
    assert started_runs(tmp_path) == []


def test_an_optuna_study_of_vllm_runs_starts_no_worker(tmp_path):
    out = run_launch(
        ["-m", "--config-dir", str(ROOT / "tests" / "conf"), "hparams_search=test_space", *VLLM],
        tmp_path,
        timeout=120,
        env=ENV,
    )
    assert out.returncode == 1, out.stderr[-3000:]
    how = (
        "an Optuna worker trains its trials one after another in one process (hydra.sweeper.n_trials=6, "
        "seeds_per_trial=1)"
    )
    message = VLLM_REFUSAL.format(
        how=how, fix=f"search with a grid (-m without hparams_search) on {ONE_PROCESS_PER_RUN}"
    )
    assert_one_line_refusal(out.stderr, f"grpo-sweep: {message}; no worker was started")
    assert not list(tmp_path.glob("grpo/studies/*/workers")) and started_runs(tmp_path) == []


def test_an_optuna_space_that_turns_vllm_on_starts_no_worker(tmp_path):
    """The base config trains without vLLM; a choice of the space turns it on (the machine check finds an
    unsloth package, which must not be imported)."""
    conf = tmp_path / "conf" / "hparams_search"
    conf.mkdir(parents=True)
    (conf / "vllm_or_not.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /hydra/sweeper: grpo_optuna\nhydra:\n  sweeper:\n"
        "    n_trials: 4\n"
        "    params:\n      backend.fast_inference: {type: categorical, choices: [false, true]}\n"
    )
    out = run_launch(
        ["-m", "--config-dir", str(conf.parent), "hparams_search=vllm_or_not", "backend=unsloth"],
        tmp_path,
        timeout=120,
        env=fake_unsloth(tmp_path),
    )
    assert out.returncode == 1, out.stderr[-3000:]
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(
        "grpo-sweep: hydra.sweeper.params: backend.fast_inference=true is refused: "
        "backend=unsloth backend.fast_inference=true starts a vLLM engine"
    ), out.stderr[-3000:]
    assert "n_trials=4" in lines[-1] and lines[-1].endswith("; no worker was started")
    assert "Traceback" not in out.stderr and started_runs(tmp_path) == []


def plan_vllm_grid(monkeypatch, tmp_path, launcher_name: str, launcher, jobs: list[list[str]]):
    """The gate's plan of ``jobs`` (each with VLLM) for ``launcher``, on a machine that has a GPU and unsloth."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from grpo_sweep.configstore import register_configs
    from grpo_sweep.launching.gate import plan_runs
    from grpo_sweep.run import validate as validation

    from .conftest import CONF

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "unsloth" else real(name, *a))
    monkeypatch.setattr(validation, "gpu_available", lambda: True)
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        master = hydra_compose(
            config_name="config",
            return_hydra_config=True,
            overrides=[f"hydra.sweep.dir={tmp_path}", f"hydra/launcher={launcher_name}"],
        )
        launcher.config = master
        launcher.hydra_context = type("HydraContext", (), {"config_loader": GlobalHydra.instance().config_loader()})()
        return plan_runs(launcher, [[*VLLM, *job] for job in jobs], 0)


GRID_OF_TWO = [["reward_mix=format"], ["reward_mix=correct"]]


def test_submitit_local_plans_a_grid_of_vllm_runs_one_process_each(monkeypatch, tmp_path):
    import sys

    from hydra_plugins.grpo_sweep_launcher.launcher import GrpoLocalLauncher

    dirs = plan_vllm_grid(monkeypatch, tmp_path, "submitit_local", GrpoLocalLauncher(), GRID_OF_TWO)
    assert dirs == [tmp_path / "0", tmp_path / "1"]
    assert "unsloth" not in sys.modules and "vllm" not in sys.modules


@pytest.mark.parametrize("launcher_name", ["local", "pool"])
def test_a_launcher_that_shares_processes_plans_one_vllm_run_and_refuses_two(monkeypatch, tmp_path, launcher_name):
    from grpo_sweep.launching.gate import Refused
    from hydra_plugins.grpo_sweep_launcher.launcher import GrpoBasicLauncher, GrpoPoolLauncher

    make = {"local": GrpoBasicLauncher, "pool": lambda: GrpoPoolLauncher(n_jobs=2)}[launcher_name]
    assert plan_vllm_grid(monkeypatch, tmp_path, launcher_name, make(), GRID_OF_TWO[:1]) == [tmp_path / "0"]
    with pytest.raises(
        Refused,
        match=rf"^grpo-sweep: job 0 \(reward_mix=format\): backend=unsloth .* and hydra/launcher="
        rf"{launcher_name} trains more than one of the sweep's 2 runs in a process",
    ):
        plan_vllm_grid(monkeypatch, tmp_path, launcher_name, make(), GRID_OF_TWO)


def test_a_later_batch_in_the_same_process_counts_the_runs_before_it(monkeypatch, tmp_path):
    """Hydra's own sweeper hands a local launcher one batch at a time: the second batch's run would share the
    process with the first's, so it is refused (the first batch ran, the second starts nothing)."""
    from grpo_sweep.launching.gate import Refused, plan_runs
    from hydra_plugins.grpo_sweep_launcher.launcher import GrpoBasicLauncher

    launcher = GrpoBasicLauncher()
    assert plan_vllm_grid(monkeypatch, tmp_path, "local", launcher, GRID_OF_TWO[:1]) == [tmp_path / "0"]
    with pytest.raises(
        Refused, match=r"^grpo-sweep: job 1 \(.*reward_mix=correct\): .* the sweep's 2 runs in a process"
    ):
        plan_runs(launcher, [[*VLLM, "reward_mix=correct"]], 1)


def test_which_launchers_give_each_run_its_own_process():
    from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher

    from grpo_sweep.adapters.hydra import BasicLauncher
    from grpo_sweep.launching.gate import process_per_run
    from hydra_plugins.grpo_sweep_launcher.launcher import (
        GrpoBasicLauncher,
        GrpoLocalLauncher,
        GrpoPoolLauncher,
        GrpoSlurmLauncher,
    )

    own = {
        cls.__name__: process_per_run(object.__new__(cls))
        for cls in (
            GrpoLocalLauncher,
            GrpoSlurmLauncher,
            LocalLauncher,
            SlurmLauncher,
            GrpoBasicLauncher,
            GrpoPoolLauncher,
            BasicLauncher,
            JoblibLauncher,
        )
    }
    assert own == {
        "GrpoLocalLauncher": True,
        "GrpoSlurmLauncher": True,
        "LocalLauncher": True,
        "SlurmLauncher": True,
        "GrpoBasicLauncher": False,
        "GrpoPoolLauncher": False,
        "BasicLauncher": False,
        "JoblibLauncher": False,
    }


def test_a_gate_that_raises_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    """Anything the gate raises that is not a refusal (a bug, a file it could not read) ends the launch in one line
    naming the run and the error, for a single run and a sweep; HYDRA_FULL_ERROR=1 shows the trace."""
    from grpo_sweep.launching import gate, preflight

    def broken(cfg, run_dir, trains_here):
        raise KeyError("a bug")

    monkeypatch.setattr(gate, "check_run", broken)
    monkeypatch.setattr(preflight, "check_run", broken)
    bug = "KeyError: 'a bug' (a bug: please report; HYDRA_FULL_ERROR=1 shows the trace)"
    for args, line in [
        ([], f"grpo-sweep: the gate failed: {bug}"),
        (["-m", "lora.r=8,16"], f"grpo-sweep: the gate failed on job 0 (lora.r=8): {bug}; no run was started"),
    ]:
        out = launch_here(args, tmp_path)
        assert out.returncode == 1, out.stderr[-3000:]
        assert [entry for entry in (out.stdout + out.stderr).splitlines() if entry.strip()] == [line], out.stderr[
            -3000:
        ]
        assert left_on_disk(tmp_path) == []
    with pytest.raises(KeyError, match="a bug"):  # out of the launch: the interpreter prints its trace
        launch_here(["-m", "lora.r=8,16"], tmp_path, env={"HYDRA_FULL_ERROR": "1"})
