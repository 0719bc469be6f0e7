"""Shared fixtures: compose the real configs, switched to tiny CPU settings, each test in its own dir."""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Unsloth is an optional GPU package: the README's install leaves it out, and CI adds its CPU fallback only for a
# later stage. Tested by find_spec, never by importing our backend: that module raises BackendError, not
# ImportError, when Unsloth is absent, so pytest.importorskip would fail rather than skip.
HAS_UNSLOTH = importlib.util.find_spec("unsloth") is not None

SWEEPERS = {
    "grid": "hydra_plugins.grpo_sweep_grid.sweeper.GrpoBasicSweeper",
    "seeds": "hydra_plugins.grpo_sweep_seeds.sweeper.GRPOSeedsSweeper",
    "optuna": "hydra_plugins.grpo_sweep_optuna.sweeper.GRPOOptunaSweeper",
    "pbt": "hydra_plugins.grpo_sweep_pbt.sweeper.GRPOPBTSweeper",
}


def declare_sweeper(sweep_dir: Path, strategy: str) -> None:
    """A made-up sweep's multirun.yaml as its sweeper writes it (the part that names the strategy that ran it)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / "multirun.yaml").write_text(f"hydra:\n  sweeper:\n    _target_: {SWEEPERS[strategy]}\n")


needs_unsloth = pytest.mark.skipif(
    not HAS_UNSLOTH,
    reason="unsloth is not importable (CPU install: docs/gpu.md 'On CPU'; put it on PYTHONPATH)",
)
CONF = ROOT / "conf"

# One tiny-model cache for the whole test session (and the subprocesses it starts).
os.environ.setdefault("GRPO_SWEEP_CACHE", str(Path(os.environ.get("TMPDIR", "/tmp")) / "grpo-sweep-test-cache"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# several torch processes share 2 cores in the tests: OpenMP spin-waits would slow each 30x
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The SLURM that scripts/slurm_local.sh starts, for the `slurm` tests (its clients need SLURM_CONF).
_LOCAL_SLURM_CONF = (
    Path(os.environ.get("SLURM_BASE", Path(os.environ.get("TMPDIR", "/tmp")) / "grpo-sweep-slurm")) / "etc/slurm.conf"
)
if _LOCAL_SLURM_CONF.exists():
    os.environ.setdefault("SLURM_CONF", str(_LOCAL_SLURM_CONF))

# Settings for a seconds-long real run in tests: the random tiny model (its warm start is built by the tests that
# are about it), short completions, few steps.
FAST = [
    "model.tiny.warm_start.steps=0",
    "trainer.max_steps=6",
    "trainer.save_steps=6",
    "trainer.num_generations=4",
    "trainer.per_device_train_batch_size=8",
    "trainer.max_completion_length=16",
    "trainer.eval.max_new_tokens=16",
    "data.arithmetic.n_train=64",
    "data.arithmetic.n_val=8",
    "data.arithmetic.n_test=8",
]


def compose(overrides: list[str] | None = None):
    """The real config from conf/, as launch.py would compose it: a fresh copy the test may change."""
    return copy.deepcopy(_composed(tuple(overrides or [])))


@functools.cache
def _composed(overrides: tuple[str, ...]):
    # Hydra takes ~0.3 s a composition and the suite asks for the same few hundred configs over and over; a copy
    # costs 0.01 s. conf/ does not change during a session and composing reads nothing else (no env interpolation
    # is resolved at compose time), so a cached composition is the one Hydra would make again.
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from grpo_sweep.configstore import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


@pytest.fixture
def cfg_factory():
    return compose


def run_launch(args: list[str], cwd: Path, timeout: int = 600, env: dict | None = None):
    """Run `python launch.py ARGS` in a subprocess, outputs under cwd."""
    import subprocess

    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args, f"output_root={cwd}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


def kill_pbt_driver_when(args: list[str], cwd: Path, ready, env: dict | None = None, within: float = 300) -> None:
    """Start `python launch.py ARGS` (a PBT named ``pbt``, ARGS with output_root=cwd) in a process group of its own, and
    kill the group with SIGKILL (the driver, and a pool's workers; SLURM's jobs are not in it) once
    ``ready(lineage)``. Its stderr is kept, and shown if it ends before it could be killed."""
    import signal
    import subprocess
    import time

    from grpo_sweep.search.pbt.lineage import Lineage
    from grpo_sweep.search.pbt.members import LINEAGE

    lineage_path = cwd / "grpo" / "pbt" / "pbt" / LINEAGE
    log = cwd / "killed-driver.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "launch.py"), *args],
            cwd=cwd,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, **(env or {})},
        )
    deadline = time.time() + within
    while time.time() < deadline and proc.poll() is None:
        if lineage_path.exists() and ready(Lineage.read(lineage_path)):
            break
        time.sleep(0.2)
    assert proc.poll() is None, f"the PBT ended before it could be killed: {log.read_text()[-3000:]}"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def launch_here(args: list[str], cwd: Path, env: dict | None = None):
    """`python launch.py ARGS` in this process: what it printed and its exit status, as run_launch returns them,
    without a new interpreter's ~8 s of start-up, torch/trl imports and exit. For launches whose own process is not
    what is tested: the gate's refusals, a run or a sweep of the in-process launcher. Whether a line reaches the
    terminal, what a launch imports, and launches that change process-wide state (the hub's offline switch, a
    process per run) stay with run_launch's subprocesses."""
    import contextlib
    import io
    import logging
    import runpy
    import signal
    import subprocess

    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    argv, saved_env, saved_cwd = sys.argv, dict(os.environ), os.getcwd()
    root = logging.getLogger()
    saved_logging = root.handlers[:], root.level
    stdout, stderr, code = io.StringIO(), io.StringIO(), 0
    command = [str(ROOT / "launch.py"), *args, f"output_root={cwd}"]
    sys.argv = list(command)
    os.environ.update(env or {})
    os.chdir(cwd)
    # a fresh interpreter's Ctrl-C handler: an earlier test of this worker may have left another (a finalizer of a
    # pool or a rank engine it started: SIG_IGN was seen after the slow stage's pool and study tests)
    saved_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                runpy.run_path(command[0], run_name="__main__")
            except SystemExit as exc:
                code = exc.code
                if isinstance(code, str):  # as the interpreter does: the message to stderr, exit status 1
                    print(code, file=sys.stderr)
                    code = 1
    finally:
        signal.signal(signal.SIGINT, saved_sigint)
        sys.argv = argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = None
        added = [handler for handler in root.handlers if handler not in saved_logging[0]]
        root.handlers[:], level = saved_logging
        root.setLevel(level)
        for handler in added:  # Hydra's console and log-file handlers of the launch's runs
            handler.close()
    return subprocess.CompletedProcess(command, code or 0, stdout.getvalue(), stderr.getvalue())


@pytest.fixture(scope="session")
def grid_sweep(tmp_path_factory):
    """One `-m` grid through the default launcher, read by the tests of what a sweep does and prints: a reward that
    raises or not (tests/failing_rewards.py) x two mixes, so runs 0 and 1 fail at their first step and runs 2 and 3
    train. Returns (what the launch printed and its exit status, the sweep directory)."""
    out_dir = tmp_path_factory.mktemp("grid")
    flaky = ["+reward_mix.flaky.fn=tests.failing_rewards.flaky", "+reward_mix.flaky.weight=0.5"]
    out = launch_here(
        [
            "-m",
            *flaky,
            "+reward_mix.flaky.params.fail=true,false",
            "reward_mix=format,correct",
            *FAST,
            "trainer.max_steps=2",
        ],
        out_dir,
    )
    [sweep_dir] = list(out_dir.glob("grpo/multiruns/*"))
    return out, sweep_dir
