"""A sweep of many SLURM jobs: the status command's summary line and bounded detail from one sacct call, and a
re-run of the sweep that queues only the runs that did not finish (issue 15; timings: bench/submit_scale.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from grpo_sweep.launching.jobs import array_tasks
from grpo_sweep.sweeps.status import SHOWN, report

from .test_launchers import CPU_JOB, submit


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """sbatch (keeps each script, answers with a new job id each call), srun, and sacct (logs its calls and
    answers from a state file the test writes)."""
    bin_dir, scripts = tmp_path / "bin", tmp_path / "sbatch_scripts"
    bin_dir.mkdir()
    scripts.mkdir()
    counter, states, calls = tmp_path / "next_id", tmp_path / "sacct_states", tmp_path / "sacct_calls"
    counter.write_text("4242")
    tools = {
        "sbatch": f'#!/bin/sh\nid=$(cat {counter})\necho $((id + 1)) > {counter}\ncp "$1" {scripts}/$id.sh\n'
        'echo "Submitted batch job $id"\n',
        "srun": "#!/bin/sh\nexit 1\n",
        "sacct": f'#!/bin/sh\necho "$*" >> {calls}\ncat {states} 2>/dev/null\n',
    }
    for name, text in tools.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    monkeypatch.setenv("PATH", path)
    return {"PATH": path}, scripts, states, calls


def test_pending_array_tasks_are_expanded():
    assert array_tasks("4242_[5-7,12%64]") == ["4242_5", "4242_6", "4242_7", "4242_12"]
    assert array_tasks("4242_3") == ["4242_3"] and array_tasks("77") == ["77"]


def test_status_of_many_jobs_is_a_summary_line_then_the_runs_not_done_from_one_sacct_call(tmp_path, fake_slurm):
    _, _, states, calls = fake_slurm
    n = SHOWN + 70
    jobs, lines = [], []
    for num in range(n):
        run = tmp_path / str(num)
        run.mkdir()
        job_id = f"4242_{num}"
        jobs.append({"num": num, "job_id": job_id, "run_dir": str(run), "overrides": [f"trainer.seed={num}"]})
        if num < n - 12:  # done
            (run / "summary.json").write_text(json.dumps({"status": "completed", "objective": 0.5}))
            lines.append(f"{job_id}|COMPLETED")
        elif num < n - 10:  # failed, with its error
            (run / "summary.json").write_text(json.dumps({"status": "failed", "error": f"RuntimeError: boom {num}"}))
            lines.append(f"{job_id}|FAILED")
        elif num == n - 10:  # its job died without a result
            lines.append(f"{job_id}|CANCELLED by 0")
        elif num < n - 6:
            (run / "metrics.jsonl").write_text('{"step": 3}\n')
            lines.append(f"{job_id}|RUNNING")
        elif num == n - 6:
            lines += [f"{job_id}|REQUEUED", f"{job_id}|PENDING"]
    lines.append(f"4242_[{n - 5}-{n - 1}%64]|PENDING")  # how sacct shows an array's pending tasks
    states.write_text("\n".join(lines) + "\n")
    (tmp_path / "jobs.json").write_text(json.dumps({"sweep_dir": str(tmp_path), "jobs": jobs}))

    text, finished = report(tmp_path)
    assert not finished
    out = text.splitlines()
    assert out[0] == f"Sweep {tmp_path}: {n} runs: 5 pending, 3 running, 1 requeued, {n - 12} done, 3 failed"
    assert len(calls.read_text().splitlines()) == 1  # one sacct call for every job
    rows = [line.split() for line in out[2:] if re.match(r"\d+ +4242_", line)]
    assert sorted(int(r[0]) for r in rows) == list(range(n - 12, n))  # only the runs not done
    assert {r[2] for r in rows} == {"failed", "running", "requeued", "pending"}
    assert f"done runs not listed (all {n}: --all)" in text
    assert f"run {n - 11} failed:\n  RuntimeError: boom {n - 11}" in text
    assert f"SLURM job 4242_{n - 10} is CANCELLED" in text

    everything, _ = report(tmp_path, show_all=True)
    assert len([line for line in everything.splitlines() if re.match(r"\d+ +4242_", line)]) == n


@pytest.mark.slow
def test_rerunning_a_sweep_queues_only_the_runs_that_did_not_finish(tmp_path, fake_slurm):
    env, scripts, states, calls = fake_slurm
    sweep = [
        "-m",
        "hydra/launcher=slurm",
        *CPU_JOB,
        "hydra.launcher.detach=true",
        "reward_mix=format,correct",
        "lora.r=16,32",
    ]
    out, probe = submit(sweep, tmp_path, env)
    assert probe["code"] == 0, out.stderr[-3000:]
    [sweep_dir] = list(tmp_path.glob("grpo/multiruns/*"))
    runs = {j["num"]: Path(j["run_dir"]) for j in json.loads((sweep_dir / "jobs.json").read_text())["jobs"]}
    runs[0].mkdir()
    (runs[0] / "summary.json").write_text(json.dumps({"status": "completed", "objective": 0.7}))
    runs[1].mkdir()
    (runs[1] / "summary.json").write_text(json.dumps({"status": "failed", "error": "RuntimeError: boom"}))
    # run 2 still running; run 3's job was cancelled before it wrote anything
    states.write_text("4242_0|COMPLETED\n4242_1|FAILED\n4242_2|RUNNING\n4242_3|CANCELLED by 0\n")

    out, probe = submit([*sweep, f"hydra.sweep.dir={sweep_dir}"], tmp_path, env)
    assert probe["code"] == 0 and probe["heavy"] == [], out.stderr[-3000:]
    assert "not queued again: 1 already completed; 1 still queued or running: 2 (4242_2 RUNNING)" in out.stdout
    assert "Submitted 2 jobs: 4243_0, 4243_1" in out.stdout
    [second] = [s for s in scripts.iterdir() if s.name == "4243.sh"]
    assert "#SBATCH --array=0-1%" in second.read_text()  # two tasks: runs 1 and 3
    jobs = {j["num"]: j["job_id"] for j in json.loads((sweep_dir / "jobs.json").read_text())["jobs"]}
    assert jobs == {0: "4242_0", 1: "4243_0", 2: "4242_2", 3: "4243_1"}
    assert len(calls.read_text().splitlines()) == 1

    # everything finished or live: nothing is queued, and sbatch is not called
    states.write_text("4242_2|RUNNING\n4243_0|RUNNING\n4243_1|PENDING\n")
    out, probe = submit([*sweep, f"hydra.sweep.dir={sweep_dir}"], tmp_path, env)
    assert probe["code"] == 0, out.stderr[-3000:]
    assert "Submitted 0 jobs: none" in out.stdout
    assert sorted(s.name for s in scripts.iterdir()) == ["4242.sh", "4243.sh"]


def test_last_step_reads_the_end_of_a_long_metrics_file(tmp_path):
    from grpo_sweep.reading.results import last_step

    rows = [json.dumps({"step": s, "reward": 0.5, "pad": "x" * 100}) for s in range(1, 2001)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(rows) + "\n" + '{"step": 20')  # a last line cut by a kill
    assert last_step(tmp_path) == 2000
    # a tail with no step in it (one long row without one): the whole file is read
    (tmp_path / "metrics.jsonl").write_text(rows[0] + "\n" + json.dumps({"note": "y" * 40000}) + "\n")
    assert last_step(tmp_path) == 1
    assert last_step(tmp_path / "absent") is None
