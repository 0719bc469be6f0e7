"""An Optuna study on a real PostgreSQL server (``bash scripts/postgres_local.sh start``; .ci/run starts it beside
SLURM): 8 worker processes share it, one is SIGKILLed in its first trial, Optuna's heartbeat fails that trial, and the
study makes exactly its budget of trials. The URL's password comes through the environment and reaches no file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from grpo_sweep.search.optuna.config import WORKER_MARKER

from .conftest import FAST, ROOT

pytestmark = pytest.mark.slurm

WORKERS, TRIALS = 8, 16
# a kill in the first wave of trials is failed by the second wave's asks (each trial takes longer than GRACE here)
HEARTBEAT, GRACE = 2, 12


def kill_once(completions, marker: str = "", **kwargs):
    """A reward that kills its process with SIGKILL (``kill -9``, nothing runs after it) the first time any process
    calls it, after writing the time into ``marker``; 0 for every completion after that."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return [0.0 for _ in completions]
    os.write(fd, repr(time.time()).encode())
    os.close(fd)
    os.kill(os.getpid(), signal.SIGKILL)


def postgres_url() -> str:
    """The URL scripts/postgres_local.sh wrote, or skip saying why."""
    pytest.importorskip("psycopg2", reason="psycopg2 is not installed (pip install psycopg2-binary)")
    url = os.environ.get("GRPO_SWEEP_POSTGRES_URL")
    base = Path(os.environ.get("PG_BASE", Path(os.environ.get("TMPDIR", "/tmp")) / "grpo-sweep-postgres"))
    if not url and (base / "url").exists():
        url = (base / "url").read_text().strip()
    if not url:
        pytest.skip("no PostgreSQL server: start one with `bash scripts/postgres_local.sh start`")
    import sqlalchemy

    try:
        sqlalchemy.create_engine(url).connect().close()
    except Exception as exc:
        pytest.skip(f"the PostgreSQL server of scripts/postgres_local.sh does not answer: {str(exc).splitlines()[0]}")
    return url


def test_eight_workers_on_postgres_one_killed_its_trial_failed_by_heartbeat_the_budget_exact(tmp_path):
    import optuna

    from grpo_sweep.search.optuna.storage import open_storage

    url = postgres_url()
    password = __import__("sqlalchemy").engine.make_url(url).password
    study_name = f"pg_{int(time.time() * 1000)}"  # the server keeps the studies of earlier runs
    marker = tmp_path / "killed"
    started = time.time()
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "launch.py"),
            "-m",
            "hparams_search=lr",
            *FAST,
            "trainer.max_steps=2",
            "hydra/launcher=submitit_local",
            f"hydra.launcher.array_parallelism={WORKERS}",
            f"hydra.sweeper.n_workers={WORKERS}",
            f"hydra.sweeper.n_trials={TRIALS}",
            f"hydra.sweeper.study_name={study_name}",
            "hydra.sweeper.storage=${oc.env:OPTUNA_STORAGE}",
            "hydra.sweeper.sampler.name=random",
            "hydra.sweeper.pruner.name=none",
            f"hydra.sweeper.heartbeat_interval={HEARTBEAT}",
            f"hydra.sweeper.grace_period={GRACE}",
            "+reward_mix.killer.fn=tests.test_search_postgres.kill_once",
            "+reward_mix.killer.weight=0.5",
            f"+reward_mix.killer.params.marker={marker}",
            f"output_root={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "OPTUNA_STORAGE": url},
    )
    seconds = time.time() - started
    assert out.returncode == 0, out.stderr[-3000:]

    trials = optuna.load_study(study_name=study_name, storage=open_storage(url)).trials
    assert sorted(t.number for t in trials) == list(range(TRIALS))  # the budget, exactly: none lost, none extra
    states = [t.state.name for t in trials]
    assert states.count("FAIL") == 1 and states.count("COMPLETE") == TRIALS - 1, states
    # the killed worker's trial: failed by the heartbeat (no error of its own) once GRACE had passed, by a live
    # worker asking for its next trial (Optuna fails stale trials there)
    [killed] = [t for t in trials if t.state.name == "FAIL"]
    assert "error" not in killed.user_attrs
    killed_at = datetime.fromtimestamp(float(marker.read_text()))
    failed_after = (killed.datetime_complete - killed_at).total_seconds()
    # (its last heartbeat came up to HEARTBEAT before the kill: Optuna counts GRACE from that beat)
    assert failed_after >= GRACE - HEARTBEAT, failed_after

    study_dir = tmp_path / "grpo" / "studies" / study_name
    # one worker never came back to say it was done: the killed one
    ends = [json.loads(p.read_text())["state"] for p in study_dir.glob(f"workers/*/{WORKER_MARKER}")]
    assert sorted(ends) == ["done"] * (len(ends) - 1) + ["running"], ends
    workers = {json.loads(p.read_text())["trial"]["worker"] for p in study_dir.glob("trials/*/seed*/summary.json")}
    assert len(workers) > 1, workers
    # the password reached no file: every one holds the setting's interpolation, not its value
    holding = [str(p) for p in tmp_path.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert holding == []
    assert password not in out.stdout + out.stderr
    print(
        f"\npostgres study: {TRIALS} trials ({states.count('COMPLETE')} complete, 1 failed by heartbeat "
        f"{failed_after:.1f} s after the kill), {len(workers)} of {WORKERS} workers trained, {seconds:.0f} s"
    )
