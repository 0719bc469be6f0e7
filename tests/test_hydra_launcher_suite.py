"""Hydra's own launcher test suite (hydra.test_utils.launcher_common_tests.LauncherTestSuite, the one every Hydra
launcher plugin passes) against grpo-sweep's launchers: local (grpo_basic), pool (grpo_pool) and submitit_local.

The suite brings its own apps (hydra.test_utils' configs and task functions); grpo-sweep's launchers refuse any app
but grpo-sweep in one line (what the last tests here check), so the suite runs with the gate set aside by the
``gate_set_aside`` fixture: each batch's run directories numbered as the gate numbers them, nothing checked. What the
suite then tests is the launcher around the gate: each job's config, overrides, working directory, return value and
batches, as Hydra's stock launchers give them. grpo-sweep's own app through these launchers: tests/test_launchers.py.

IntegrationTestSuite is left out: it starts its apps in subprocesses, where no fixture can set the gate aside.
The pool starts worker processes (~20 s for its part) and submitit_local a Python process per job (~45 s): their
parts are the slow stage's; the local launcher's takes ~10 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.test_utils.launcher_common_tests import BatchedSweeperTestSuite, LauncherTestSuite, sweep_2_jobs

from grpo_sweep.launching import gate

LAUNCHERS = [
    pytest.param("grpo_basic", [], id="local"),
    pytest.param("grpo_pool", ["hydra.launcher.n_jobs=2"], id="pool", marks=pytest.mark.slow),
    pytest.param("submitit_local", ["hydra.launcher.timeout_min=2"], id="submitit_local", marks=pytest.mark.slow),
]


@pytest.fixture
def gate_set_aside(monkeypatch, hydra_restore_singletons):
    """grpo-sweep's launchers with their gate set aside for Hydra's test apps: each batch's run directories as the
    gate numbers them, nothing checked. Also makes hydra/launcher=submitit_local grpo-sweep's (register_configs, as
    launch.py does) inside the suite's save and restore of Hydra's global state, and records that the batches went
    through grpo-sweep's launchers."""
    from hydra.version import _UNSPECIFIED_, VersionBase

    from grpo_sweep.configstore import register_configs

    # Hydra's version base as a fresh process has it (the suite's apps name none): a grpo-sweep launch earlier in
    # this process set it to 1.3, where a job no longer changes its working directory (restored after the test)
    monkeypatch.setattr(VersionBase.instance(), "version_base", _UNSPECIFIED_)
    register_configs()
    planned: list[int] = []

    def plan(launcher, job_overrides, initial_job_idx) -> list[Path]:
        loader = launcher.hydra_context.config_loader
        cfgs = gate.compose_runs(loader, launcher.config, job_overrides)
        dirs = [gate.numbered_run_dir(cfg, num) for num, cfg in enumerate(cfgs, start=initial_job_idx)]
        planned.extend(range(initial_job_idx, initial_job_idx + len(dirs)))
        return dirs

    monkeypatch.setattr(gate.GatedLauncher, "plan", plan)
    return planned


@pytest.mark.usefixtures("gate_set_aside")
@pytest.mark.parametrize("launcher_name, overrides", LAUNCHERS)
class TestGrpoLaunchers(LauncherTestSuite):
    def test_the_jobs_went_through_grpo_sweeps_launcher(
        self, hydra_sweep_runner, launcher_name, overrides, tmpdir, gate_set_aside
    ):
        sweep_2_jobs(
            hydra_sweep_runner, ["hydra/launcher=" + launcher_name, *overrides], self.get_task_function(), tmpdir
        )
        assert gate_set_aside == [0, 1]


# the suite's own sweeper in batches of 2 (its test extends the list it is given: one test in the class)
BATCHED = [
    pytest.param(*p.values[:1], [*p.values[1], "hydra.sweeper.max_batch_size=2"], id=p.id, marks=p.marks)
    for p in LAUNCHERS
]


@pytest.mark.usefixtures("gate_set_aside")
@pytest.mark.parametrize("launcher_name, overrides", BATCHED)
class TestGrpoLaunchersBatched(BatchedSweeperTestSuite):
    pass


@pytest.mark.parametrize("launcher", ["grpo_basic", "grpo_pool", "grpo_submitit_local", "grpo_submitit_slurm"])
def test_another_app_is_told_what_the_launchers_are(launcher, hydra_sweep_runner, hydra_restore_singletons, tmp_path):
    """Hydra offers grpo-sweep's launchers to every app in the environment: another app gets one line saying what
    they are, not the gate's "a bug: please report"."""
    sweep = hydra_sweep_runner(
        calling_file=None,
        calling_module="hydra.test_utils.a_module",
        task_function=lambda cfg: 1,
        config_path="configs",
        config_name="compose.yaml",
        overrides=[f"hydra/launcher={launcher}", "foo=1,2"],
        temp_dir=tmp_path,
    )
    with pytest.raises(SystemExit) as stopped:
        with sweep:
            pass
    line = str(stopped.value.code)
    assert line.startswith(f"grpo-sweep: hydra/launcher={launcher} runs grpo-sweep's runs"), line
    assert "\n" not in line and "bug" not in line, line
    assert not list(tmp_path.rglob(".hydra")), "a refused sweep started a job"  # multirun.yaml: the app's sweeper's
