"""hydra/launcher=slurm against a real SLURM controller (scripts/slurm_local.sh start): CPU-only jobs, tiny model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_sweep.launching.jobs import slurm_jobs
from grpo_sweep.run.resume import last_checkpoint
from grpo_sweep.sweeps.status import report

from .conftest import FAST, ROOT, kill_pbt_driver_when, run_launch


def _slurm_answers() -> bool:
    if not shutil.which("sbatch"):
        return False
    try:
        return subprocess.run(["sinfo", "-h"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        not _slurm_answers(),
        reason="needs a running SLURM controller: `sbatch` absent or `sinfo` gets no answer "
        "(start one with: bash scripts/slurm_local.sh start; export SLURM_CONF=...)",
    ),
]

# a CPU job on the 2-core test node; jobs find grpo_sweep and tests/ through PYTHONPATH (sbatch exports the env)
SLURM = [
    "hydra/launcher=slurm",
    "hydra.launcher.gpus_per_node=null",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=2",
    "hydra.launcher.timeout_min=20",
]
ENV = {"PYTHONPATH": str(ROOT)}


def _sweep_dir(root: Path) -> Path:
    [sweep_dir] = list(root.glob("grpo/multiruns/*"))
    return sweep_dir


def _jobs(sweep_dir: Path) -> list[dict]:
    return json.loads((sweep_dir / "jobs.json").read_text())["jobs"]


def _final_slurm_states(job_ids: list[str], timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    while True:
        states = slurm_jobs(job_ids)
        if len(states) == len(job_ids) and all(s in ("COMPLETED", "FAILED", "CANCELLED") for s, _ in states.values()):
            return states
        if time.time() > deadline:
            return states
        time.sleep(1)


def _wait_for(sweep_dir: Path, timeout: float = 600) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        text, finished = report(sweep_dir)
        if finished:
            return text
        time.sleep(2)
    raise AssertionError(f"sweep not finished after {timeout} s:\n{report(sweep_dir)[0]}")


def _steps(run_dir: Path) -> list[int]:
    return [
        json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"reward"' in line
    ]


def test_grid_of_four_jobs_completes_with_the_local_table(tmp_path):
    out = run_launch(["-m", *SLURM, "reward_mix=format,correct", "lora.r=16,32", *FAST], tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = _sweep_dir(tmp_path)
    summaries = [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/summary.json"))]
    assert [s["status"] for s in summaries] == ["completed"] * 4
    jobs = _jobs(sweep_dir)
    states = _final_slurm_states([j["job_id"] for j in jobs])
    assert {s for s, _ in states.values()} == {"COMPLETED"}, states
    table = (sweep_dir / "sweep_table.md").read_text()
    assert table in out.stdout and "reward_mix=correct lora.r=32" in table
    # the job script submitit wrote: one task, the CPUs asked for, USR2 before the time limit (requeue + resume)
    [script] = list((sweep_dir / ".submitit").glob("*/*_submission.sh"))[:1]
    text = script.read_text()
    for line in (
        "#SBATCH --cpus-per-task=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --mem=2GB",
        "#SBATCH --time=20",
        "#SBATCH --signal=USR2@120",
        "#SBATCH --array=0-3%4",
    ):
        assert line in text, line


def test_preempted_job_resumes_from_its_checkpoint_in_its_run_dir(tmp_path):
    """Two identical-length runs; run 0 gets SLURM's preemption signal mid-run, run 1 runs through."""
    # long enough that the signal lands mid-run on a fast machine too
    fast = [*FAST, "trainer.max_steps=30", "trainer.save_steps=4", "trainer.disable_tqdm=true"]
    out = run_launch(["-m", *SLURM, "hydra.launcher.detach=true", "lora.r=16,32", *fast], tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = _sweep_dir(tmp_path)
    job = _jobs(sweep_dir)[0]
    run_dir = Path(job["run_dir"])
    deadline = time.time() + 400
    while time.time() < deadline:
        if (run_dir / "checkpoints" / "checkpoint-4").exists() and len(_steps(run_dir)) >= 6:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(report(sweep_dir)[0])
    signalled = time.time()
    subprocess.run(["scancel", "--signal=USR2", job["job_id"]], check=True)

    _wait_for(sweep_dir)
    states = _final_slurm_states([j["job_id"] for j in _jobs(sweep_dir)])
    assert states[job["job_id"]] == ("COMPLETED", 1), states  # requeued once, then finished
    resumes = [json.loads(line) for line in (run_dir / "resumes.jsonl").read_text().splitlines()]
    assert len(resumes) == 1 and resumes[0]["from_step"] % 4 == 0 and 0 < resumes[0]["from_step"] < 30
    print(f"requeue -> resume: {resumes[0]['time'] - signalled:.1f} s after the signal")
    uninterrupted = Path(_jobs(sweep_dir)[1]["run_dir"])
    assert _steps(run_dir) == _steps(uninterrupted) == list(range(1, 31))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["resumed_from_steps"] == [resumes[0]["from_step"]]
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith(".")) == ["0", "1"]


def test_detached_sweep_with_a_failing_run_reports_it_while_the_other_finishes(tmp_path):
    flaky = ["+reward_mix.flaky.fn=tests.failing_rewards.flaky", "+reward_mix.flaky.weight=0.5"]
    out = run_launch(
        ["-m", *SLURM, "hydra.launcher.detach=true", *flaky, "+reward_mix.flaky.params.fail=false,true", *FAST],
        tmp_path,
        env=ENV,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = _sweep_dir(tmp_path)
    ids = [j["job_id"] for j in _jobs(sweep_dir)]
    assert f"Submitted 2 jobs: {', '.join(ids)}" in out.stdout and str(sweep_dir) in out.stdout

    first = subprocess.run(
        [sys.executable, "-m", "grpo_sweep.sweeps.status", str(sweep_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **ENV},
    )
    # it did not wait for the jobs: they are still queued or running when it returns
    assert first.returncode == 0 and "All runs ended" not in first.stdout
    assert any(state in first.stdout for state in ("pending", "running"))

    text = _wait_for(sweep_dir)
    assert "1 done, 1 failed" in text
    assert (
        "run 1 failed:\n  RewardFailure: reward 'flaky' raised RuntimeError: flaky reward exploded (fail=true)" in text
    )
    assert "All runs ended." in text and (sweep_dir / "sweep_table.md").exists()
    assert {s for s, _ in _final_slurm_states(ids).values()} == {"COMPLETED"}  # the run failed, not the job


def test_a_job_cancelled_mid_run_is_a_failed_run_and_the_sweep_goes_on(tmp_path):
    """The stock launcher stops waiting at the first job without a result; this one records it and waits on."""
    # run 0 is long enough to be cancelled mid-run on a fast machine too; run 1 finishes
    fast = [*FAST, "trainer.disable_tqdm=true", "trainer.max_steps=400,4", "trainer.save_steps=400"]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "launch.py"), "-m", *SLURM, *fast, f"output_root={tmp_path}"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **ENV},
    )
    deadline = time.time() + 300
    while time.time() < deadline and not list(tmp_path.glob("grpo/multiruns/*/0/metrics.jsonl")):
        time.sleep(0.5)
    sweep_dir = _sweep_dir(tmp_path)
    subprocess.run(["scancel", _jobs(sweep_dir)[0]["job_id"]], check=True)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 1, stderr[-3000:]
    cancelled = json.loads((sweep_dir / "0" / "summary.json").read_text())
    assert cancelled["status"] == "failed" and "ended without a result" in cancelled["error"]
    assert "CANCELLED" in cancelled["error"]
    assert json.loads((sweep_dir / "1" / "summary.json").read_text())["status"] == "completed"
    assert "run 0 failed: job" in stdout and "| completed |" in stdout


def test_optuna_study_with_slurm_workers(tmp_path):
    """Two worker jobs on the real controller pull trials from one SQLite study until the budget is spent."""
    from .test_search import STUDY_ARGS, study_trials

    out = run_launch(
        [*STUDY_ARGS, *SLURM, "hydra.sweeper.n_workers=2"],
        tmp_path,
        env=ENV,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    study_dir = tmp_path / "grpo" / "studies" / "test_space"
    trials = study_trials(study_dir)
    assert len(trials) == 6
    assert "COMPLETE" in {t.state.name for t in trials}
    workers = {json.loads(p.read_text())["trial"]["worker"] for p in study_dir.glob("trials/*/seed*/summary.json")}
    assert workers == {0, 1}
    assert "Optuna study 'test_space': 6 trials" in out.stdout


def test_a_request_no_node_can_meet_is_one_line_and_the_local_profile_fits(tmp_path):
    """The README's SLURM grid on the local node (CPUs only): refused naming gpus_per_node, nothing submitted;
    hydra/launcher=slurm_local is the profile that fits it."""
    out = run_launch(["-m", "hydra/launcher=slurm", "reward_mix=format,correct", *FAST], tmp_path, env=ENV)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert "hydra.launcher.gpus_per_node=1: no node of" in last and "hydra/launcher=slurm_local" in last, last
    assert not list(tmp_path.glob("grpo/multiruns/*/jobs.json"))
    from hydra import compose, initialize_config_dir

    from grpo_sweep.configstore import register_configs
    from grpo_sweep.launching.submit import check_partition_fit, slurm_nodes

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", ["hydra/launcher=slurm_local"], return_hydra_config=True)
    assert slurm_nodes(None)  # the local node answers
    check_partition_fit(dict(cfg.hydra.launcher), slurm_nodes(None))  # the profile fits it: nothing raised


def test_pending_array_tasks_are_seen_and_a_rerun_queues_only_what_did_not_finish(tmp_path):
    """sacct shows an array's pending tasks as one line (`<id>_[0-2%3]`), and nothing for `-j <id>_1` while
    pending: status counts them, and a re-run of the sweep neither queues them again nor the completed run."""
    held = [
        *SLURM,
        "hydra.launcher.detach=true",
        "+hydra.launcher.additional_parameters.hold=true",
        "trainer.seed=1,2,3",
    ]
    out = run_launch(["-m", *held], tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = _sweep_dir(tmp_path)
    jobs = _jobs(sweep_dir)
    array = jobs[0]["job_id"].split("_")[0]
    try:
        # sacct reads slurmdbd, which can lag the submission by a moment on a freshly started SLURM
        deadline = time.time() + 30
        while (
            not (states := {s for s, _ in slurm_jobs([j["job_id"] for j in jobs]).values()}) and time.time() < deadline
        ):
            time.sleep(1)
        assert states == {"PENDING"}
        assert (
            report(sweep_dir)[0].splitlines()[0].endswith("3 runs: 3 pending, 0 running, 0 requeued, 0 done, 0 failed")
        )
        Path(jobs[0]["run_dir"]).mkdir(parents=True)
        (Path(jobs[0]["run_dir"]) / "summary.json").write_text(json.dumps({"status": "completed", "objective": 0.5}))
        again = run_launch(["-m", *held, f"hydra.sweep.dir={sweep_dir}"], tmp_path, env=ENV)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "Submitted 0 jobs: none" in again.stdout
        assert "not queued again: 1 already completed; 2 still queued or running" in again.stdout
    finally:
        subprocess.run(["scancel", array], check=False)
    deadline = time.time() + 30
    while {s for s, _ in slurm_jobs([j["job_id"] for j in jobs[1:]]).values()} != {"CANCELLED"}:
        assert time.time() < deadline, slurm_jobs([j["job_id"] for j in jobs])
        time.sleep(1)
    after_cancel = run_launch(["-m", *held, f"hydra.sweep.dir={sweep_dir}"], tmp_path, env=ENV)
    try:
        assert "Submitted 2 jobs" in after_cancel.stdout, after_cancel.stdout[-2000:]
    finally:
        for job in _jobs(sweep_dir):
            if job["job_id"] and not job["job_id"].startswith(f"{array}_"):
                subprocess.run(["scancel", job["job_id"].split("_")[0]], check=False)


def test_a_two_task_job_trains_one_run_and_a_requeue_resumes_both_ranks(tmp_path):
    """distributed=ddp with tasks_per_node=2: SLURM starts the two processes of one run (gloo, one CPU each).
    `scontrol requeue` mid-run stops both; the job runs again and both ranks resume from the newest checkpoint."""
    ddp = ["hydra.launcher.tasks_per_node=2", "distributed=ddp", "trainer.per_device_train_batch_size=4"]
    # long enough to outlast SLURM's KillWait after the requeue (submitit ignores the SIGTERM; SIGKILL follows)
    fast = [*FAST, "trainer.max_steps=100", "trainer.save_steps=4", "trainer.disable_tqdm=true"]
    out = run_launch(["-m", *SLURM, "hydra.launcher.detach=true", *ddp, *fast], tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = _sweep_dir(tmp_path)
    [job] = _jobs(sweep_dir)
    run_dir = Path(job["run_dir"])
    deadline = time.time() + 400
    # a checkpoint directory appears before its save ends: wait for one whose save finished
    while (last_checkpoint(run_dir) or (None, 0))[1] < 8:
        assert time.time() < deadline, report(sweep_dir)[0]
        time.sleep(0.3)
    subprocess.run(["scontrol", "requeue", job["job_id"]], check=True)

    _wait_for(sweep_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed", summary.get("error")
    assert summary["distributed"] == {"strategy": "ddp", "world_size": 2, "nodes": 1}
    [resumed] = summary["resumed_from_steps"]
    assert 8 <= resumed < 100 and resumed % 4 == 0
    assert _steps(run_dir) == list(range(1, 101))  # no step lost, none repeated
    logs = "".join(p.read_text() for p in (sweep_dir / ".submitit").glob("*/*_log.*"))
    for rank in (0, 1):
        assert f"rank {rank} of 2 (local rank {rank}, 1 node) on" in logs
    assert logs.count(f"resuming at step {resumed}") == 2, logs[-3000:]
    # the job script asked SLURM for two tasks of one CPU on one node
    [script] = list((sweep_dir / ".submitit").glob("*/*_submission.sh"))
    assert "#SBATCH --ntasks-per-node=2" in script.read_text()


def test_a_failing_task_of_a_two_task_run_is_the_runs_error(tmp_path):
    """Rank 1's reward raises: rank 0 only sees its peer gone at the next collective, and records rank 1's error."""
    bomb = ["+reward_mix.bomb.fn=tests.failing_rewards.fails_on_rank", "+reward_mix.bomb.weight=0.5"]
    out = run_launch(
        [
            "-m",
            *SLURM,
            "hydra.launcher.tasks_per_node=2",
            "distributed=ddp",
            "trainer.per_device_train_batch_size=4",
            *FAST,
            *bomb,
        ],
        tmp_path,
        env=ENV,
    )
    assert out.returncode == 1, out.stderr[-3000:]
    [job] = _jobs(_sweep_dir(tmp_path))
    summary = json.loads((Path(job["run_dir"]) / "summary.json").read_text())
    assert summary["status"] == "failed"
    assert summary["error"].startswith(
        "rank 1 of 2 failed: RewardFailure: reward 'bomb' raised RuntimeError: reward failed on rank 1"
    ), summary["error"]


@pytest.mark.parametrize("explore, synchronous", [("perturb", True), ("pb2", True), ("perturb", False)])
def test_pbt_runs_a_job_a_member_and_round_on_slurm(tmp_path, explore, synchronous):
    """hparams_search=pbt on SLURM: each member's round a job, the take-over between rounds, the best member tested;
    with either explore, and asynchronous (each member's round submitted as its last one ended)."""
    args = [
        "-m",
        "hparams_search=pbt",
        *SLURM,
        *FAST,
        "hydra.sweeper.population=2",
        "hydra.sweeper.rounds=2",
        f"hydra.sweeper.explore={explore}",
        "hydra.sweeper.head_to_head_seeds=0",
        "trainer.eval.k=0",
        f"hydra.sweeper.synchronous={str(synchronous).lower()}",
    ]
    out = run_launch(args, tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = tmp_path / "grpo" / "pbt" / "pbt"
    rows = [json.loads(line) for line in (sweep_dir / "pbt.jsonl").read_text().splitlines()]
    # one vocabulary, synchronous or not: each member's round reported once, trained by this driver
    reports = [(r["member"], r["round"]) for r in rows if r["event"] == "report"]
    assert sorted(reports) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(r["trained"] for r in rows if r["event"] == "report")
    if synchronous:  # the barrier: round 1's decisions after both its reports
        first_decision = min(i for i, r in enumerate(rows) if r["event"] == "decide")
        assert all(i < first_decision for i, r in enumerate(rows) if r["event"] == "report" and r["round"] == 0)
    assert [r["event"] for r in rows].count("test") == 1 and (sweep_dir / "conf/reward_mix/best_schedule.yaml").exists()
    assert len(_jobs(sweep_dir)) >= 1  # the submitting launcher recorded its jobs


def test_an_asynchronous_pbt_whose_driver_is_killed_continues_on_slurm_with_no_job_twice(tmp_path):
    """synchronous=false on SLURM, the driver killed with SIGKILL while its members' jobs run on: the same command
    reports what finished meanwhile from disk, waits for a job still running instead of submitting it again, and
    finishes. One SLURM job per reported round, plus the best member's test: nothing was submitted twice."""
    args = [
        "-m",
        "hparams_search=pbt",
        *SLURM,
        *FAST,
        "hydra.sweeper.population=2",
        "hydra.sweeper.rounds=3",
        "hydra.sweeper.synchronous=false",
        "hydra.sweeper.head_to_head_seeds=0",
        "trainer.eval.k=0",
    ]
    sweep_dir = tmp_path / "grpo" / "pbt" / "pbt"
    lineage_path = sweep_dir / "pbt.jsonl"
    # the driver only: its SLURM jobs run on
    at = [*args, f"output_root={tmp_path}"]
    kill_pbt_driver_when(at, tmp_path, lambda lineage: len(lineage.reports) >= 2, env=ENV, within=400)
    out = run_launch(args, tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in lineage_path.read_text().splitlines()]
    done = [r for r in rows if r["event"] == "report"]
    assert {(r["member"], r["round"]) for r in done} == {(m, r) for m in range(2) for r in range(3)}
    assert [r["event"] for r in rows].count("test") == 1
    submitted = [d for d in (sweep_dir / ".submitit").iterdir() if d.is_dir() and d.name[0].isdigit()]
    assert len(submitted) == len(done) + 1, (sorted(d.name for d in submitted), done)


def test_a_detached_seeds_sweep_submits_each_next_round_from_a_job_after_the_last(tmp_path):
    """hydra/sweeper=seeds, detached: the command submits the first round and a driver job that waits for it
    (--dependency=afterany); that job runs the same command, which submits the next round and its own follow-up,
    until nothing is open; the last one writes the table."""
    sweep_dir = tmp_path / "sweep"
    args = [
        "-m",
        "hydra/sweeper=seeds",
        "reward_mix=correct,format_correct",
        "hydra.sweeper.min_seeds=2",
        "hydra.sweeper.max_seeds=3",
        f"hydra.sweep.dir={sweep_dir}",
        *SLURM,
        "hydra.launcher.detach=true",
        "trainer.max_steps=10",
        "trainer.save_steps=10",
        "trainer.disable_tqdm=true",
    ]
    out = run_launch(args, tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "The next round is decided by job" in out.stdout and not (sweep_dir / "sweep_table.md").exists()
    deadline = time.time() + 600
    while time.time() < deadline and not (sweep_dir / "sweep_table.md").exists():
        time.sleep(2)
    table = (sweep_dir / "sweep_table.md").read_text()
    logs = sorted(sweep_dir.glob("driver-*.log"))
    assert len(logs) >= 1, "no driver job ran"
    runs = sorted(p.parent.relative_to(sweep_dir).as_posix() for p in sweep_dir.glob("*/seed*/summary.json"))
    assert {"0/seed1", "0/seed2", "1/seed1", "1/seed2"} <= set(runs)
    assert ("reached max_seeds=3" in table and len(runs) == 6) or ("decided after 2 seeds" in table and len(runs) == 4)


def _rewards(run_dir: Path) -> list:
    return [
        (row["step"], row["reward"], row.get("loss"))
        for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
        if "reward" in row
    ]


def test_a_packed_grid_runs_two_runs_a_job_each_as_an_unpacked_run_would(tmp_path):
    """The issue's grid, runs_per_gpu=2: 4 runs in 2 jobs (one GPU each on a cluster; CPUs here), each run in its own
    directory, jobs.json and status one run a line, each run's training the same as the same run in a job of its own."""
    grid = ["reward_mix=format,correct", "lora.r=16,32", *FAST, "trainer.torch_threads=1"]
    (tmp_path / "packed").mkdir()
    (tmp_path / "alone").mkdir()
    out = run_launch(["-m", *SLURM, "hydra.launcher.runs_per_gpu=2", *grid], tmp_path / "packed", env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "4 runs in 2 jobs of one GPU each, 2 runs a job (hydra.launcher.runs_per_gpu)" in out.stderr + out.stdout
    sweep_dir = _sweep_dir(tmp_path / "packed")
    jobs = _jobs(sweep_dir)
    assert [j["num"] for j in jobs] == [0, 1, 2, 3] and [j["packed_with"] for j in jobs] == [[1], [0], [3], [2]]
    assert jobs[0]["job_id"] == jobs[1]["job_id"] != jobs[2]["job_id"] == jobs[3]["job_id"]
    states = _final_slurm_states(sorted({j["job_id"] for j in jobs}))
    assert {s for s, _ in states.values()} == {"COMPLETED"}, states
    text, finished = report(sweep_dir)
    assert finished and all(f"| {n} " in text for n in range(4))
    alone = run_launch(["-m", *SLURM, *grid], tmp_path / "alone", env=ENV)
    assert alone.returncode == 0, alone.stderr[-3000:]
    alone_dir = _sweep_dir(tmp_path / "alone")
    for n in "0123":
        packed = json.loads((sweep_dir / n / "summary.json").read_text())
        single = json.loads((alone_dir / n / "summary.json").read_text())
        assert packed["status"] == single["status"] == "completed"
        neighbour = {"0": "1", "1": "0", "2": "3", "3": "2"}[n]
        assert packed["gpu_sharing"]["neighbours"] == [str((sweep_dir / neighbour).resolve())]
        assert packed["gpu_sharing"]["gpu"] == f"slurm-{jobs[int(n)]['job_id']}" and "gpu_sharing" not in single
        assert _rewards(sweep_dir / n) == _rewards(alone_dir / n)
        for key in ("steps", "val_accuracy", "test_accuracy", "train_rewards"):
            assert packed[key] == single[key], key


def test_a_requeued_packed_job_resumes_both_its_runs_and_a_killed_neighbour_fails_alone(tmp_path):
    """Job 0 holds runs 0 and 1: `scontrol requeue` mid-run stops both, and the job runs again with each run resuming
    from its own checkpoint. Job 1's run 2 kills its own process (as the OOM killer would): run 2 fails in one line,
    its neighbour run 3 completes."""
    killer = ["+reward_mix.k.fn=tests.failing_rewards.killer", "+reward_mix.k.weight=0.5"]
    fast = [*FAST, "trainer.max_steps=100", "trainer.save_steps=4", "trainer.disable_tqdm=true"]
    runs = ["+reward_mix.k.params.kill=false,false,true,false", "trainer.torch_threads=1"]
    out = run_launch(
        ["-m", *SLURM, "hydra.launcher.detach=true", "hydra.launcher.runs_per_gpu=2", *killer, *runs, *fast],
        tmp_path,
        env=ENV,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    sweep_dir = _sweep_dir(tmp_path)
    jobs = _jobs(sweep_dir)
    deadline = time.time() + 400
    while min((last_checkpoint(sweep_dir / n) or (None, 0))[1] for n in "01") < 8:
        assert time.time() < deadline, report(sweep_dir)[0]
        time.sleep(0.3)
    subprocess.run(["scontrol", "requeue", jobs[0]["job_id"]], check=True)

    _wait_for(sweep_dir)
    for n in "01":
        summary = json.loads((sweep_dir / n / "summary.json").read_text())
        assert summary["status"] == "completed", summary.get("error")
        [resumed] = summary["resumed_from_steps"]
        assert 8 <= resumed < 100 and resumed % 4 == 0
        assert _steps(sweep_dir / n) == list(range(1, 101))  # no step lost, none repeated
    killed = json.loads((sweep_dir / "2" / "summary.json").read_text())
    assert killed["status"] == "failed"
    assert killed["error"].startswith("its process in a packed job died (exit status 137) without a result; the other")
    assert json.loads((sweep_dir / "3" / "summary.json").read_text())["status"] == "completed"
    text, _ = report(sweep_dir)
    assert "its process in a packed job died" in text
