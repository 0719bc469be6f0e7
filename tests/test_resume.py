"""A run continues in its own directory after a kill: from its last complete checkpoint, every step logged once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from grpo_sweep.run.resume import ResumeError, check_same_run, last_checkpoint, remember_config, trim_metrics
from grpo_sweep.sweeps.status import report

from .conftest import FAST, ROOT, compose, run_launch


def _checkpoint(run_dir, step, complete=True):
    path = run_dir / "checkpoints" / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}) if complete else '{"global_st')


def test_last_checkpoint_skips_a_save_cut_short(tmp_path):
    assert last_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, 4)
    _checkpoint(tmp_path, 8)
    _checkpoint(tmp_path, 12, complete=False)  # killed while saving
    assert last_checkpoint(tmp_path) == (tmp_path / "checkpoints" / "checkpoint-8", 8)


def test_trim_metrics_keeps_each_step_up_to_the_checkpoint(tmp_path):
    rows = [{"step": s, "reward": 0.1 * s} for s in range(1, 11)] + [{"step": 10, "train_runtime": 3.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 11, "rew')
    assert trim_metrics(tmp_path, 6) == 5  # steps 7-10 and the end-of-training row (the cut line goes too)
    kept = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in kept] == [1, 2, 3, 4, 5, 6]


def test_a_run_dir_refuses_another_config(tmp_path):
    remember_config(tmp_path, compose(["lora.r=16"]))
    check_same_run(tmp_path, compose(["lora.r=16", f"output_root={tmp_path}"]))  # where outputs go may move
    with pytest.raises(ResumeError, match=r"lora.r: 16 -> 32"):
        check_same_run(tmp_path, compose(["lora.r=32"]))


def test_status_of_a_local_sweep_from_its_run_dirs(tmp_path):
    for num, summary in (
        ("0", {"status": "completed", "objective": 0.5, "overrides": ["lora.r=16"]}),
        (
            "1",
            {
                "status": "failed",
                "error": "RuntimeError: boom",
                "traceback": "line a\nline b",
                "overrides": ["lora.r=32"],
            },
        ),
        ("2", None),
    ):
        (tmp_path / num / ".hydra").mkdir(parents=True)
        (tmp_path / num / ".hydra" / "config.yaml").write_text("{}")
        if summary:
            (tmp_path / num / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "2" / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    text, finished = report(tmp_path)
    assert not finished
    assert text.splitlines()[0] == f"Sweep {tmp_path}: 3 runs: 0 pending, 1 running, 0 requeued, 1 done, 1 failed"
    assert "run 1 failed:\n  RuntimeError: boom\n  line a\n  line b" in text
    assert [line.split()[2] for line in text.splitlines()[2:5]] == ["done", "failed", "running"]


def test_status_reports_a_half_written_summary_and_the_other_runs(tmp_path):
    for num, text in (
        ("0", json.dumps({"status": "completed", "objective": 0.5, "overrides": ["lora.r=16"]})),
        ("1", '{"status": "comp'),
    ):
        (tmp_path / num / ".hydra").mkdir(parents=True)
        (tmp_path / num / ".hydra" / "config.yaml").write_text("{}")
        (tmp_path / num / "summary.json").write_text(text)
    text, _ = report(tmp_path)
    assert "0 requeued, 1 done, 0 failed, 1 unreadable" in text.splitlines()[0]
    assert "summary.json" in text.split("run 1 unreadable", 1)[1].splitlines()[1]


@pytest.mark.slow
def test_a_killed_run_resumes_in_its_dir_with_every_step_once(tmp_path):
    """SIGKILL mid-run, then the same command with the same run dir: it continues from the checkpoint."""
    run_dir = tmp_path / "run"
    args = [
        *FAST,
        "trainer.max_steps=30",
        "trainer.save_steps=3",
        "trainer.disable_tqdm=true",
        f"hydra.run.dir={run_dir}",
    ]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "launch.py"), *args, f"output_root={tmp_path}"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if last_checkpoint(run_dir) and (run_dir / "metrics.jsonl").read_text().count('"reward"') >= 4:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (run_dir / "summary.json").exists()

    out = run_launch(args, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    [resumed_from] = summary["resumed_from_steps"]
    assert summary["steps"] == 30 and resumed_from % 3 == 0 and 0 < resumed_from < 30
    steps = [
        json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"reward"' in line
    ]
    assert steps == list(range(1, 31))

    again = run_launch(args, tmp_path)  # a finished run is not trained again
    assert again.returncode == 0 and "already completed; not training it again" in again.stdout
