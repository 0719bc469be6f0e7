"""One run over several processes (distributed=ddp) without a scheduler: torchrun's engine starts the ranks, they
train one run, rank 0 writes it. (SLURM's tasks as ranks: tests/test_slurm.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_sweep.launching.submit import run_world
from grpo_sweep.run.distributed import check_world
from grpo_sweep.run.resume import last_checkpoint

from .conftest import FAST, ROOT, compose, launch_here, run_launch

# two processes of 4 prompts' completions each: the global batch of FAST's one process (8)
TWO = [
    "distributed=ddp",
    "distributed.nproc_per_node=2",
    "trainer.per_device_train_batch_size=4",
    "trainer.disable_tqdm=true",
]
ENV = {"PYTHONPATH": str(ROOT)}


def _train_rows(run_dir: Path) -> list[dict]:
    return [row for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines()) if "reward" in row]


def _rank_logs(run_dir: Path) -> str:
    return "".join(p.read_text() for p in sorted((run_dir / "ranks").glob("*/attempt_*/*/stderr.log")))


# the ranks are started by the same code whichever process launches the run; a pool worker and a submitit job as
# that process run with the slow tests (~25 s each)
@pytest.mark.parametrize(
    "launcher",
    [
        [],
        pytest.param(["-m", "hydra/launcher=pool", "hydra.launcher.n_jobs=1"], marks=pytest.mark.slow),
        pytest.param(["-m", "hydra/launcher=submitit_local", "hydra.launcher.cpus_per_task=2"], marks=pytest.mark.slow),
    ],
    ids=["single run", "pool worker", "submitit_local job"],
)
def test_two_processes_train_one_run_that_rank_0_writes(tmp_path, launcher):
    out = run_launch([*launcher, *FAST, *TWO], tmp_path, env=ENV)
    assert out.returncode == 0, out.stderr[-3000:]
    [run_dir] = list(tmp_path.glob("grpo/multiruns/*/0" if launcher else "grpo/runs/*"))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed", summary.get("error")
    assert summary["distributed"] == {"strategy": "ddp", "world_size": 2, "nodes": 1}
    assert summary["test_accuracy"] is not None and summary["val_accuracy"] is not None
    # one set of metrics: every step once (a second writer would repeat them)
    assert [row["step"] for row in _train_rows(run_dir)] == list(range(1, 7))
    logs = _rank_logs(run_dir)
    assert "rank 0 of 2 (local rank 0, 1 node)" in logs and "rank 1 of 2 (local rank 1, 1 node)" in logs
    # the launching process reports rank 0's summary
    assert ("| completed |" if launcher else "grpo-sweep: run finished") in out.stdout
    grpo = json.loads((run_dir / "grpo_config.json").read_text())
    assert grpo["ddp_find_unused_parameters"] is False and grpo["per_device_train_batch_size"] == 4
    # two processes held for the run's time: twice its device seconds
    timings = summary["timings_s"]
    assert summary["device_seconds"] == pytest.approx(
        2 * (timings["train"] + timings["save"] + timings["eval"]), abs=0.01
    )


# two processes that import torch and train (~20 s); who records a rank's failure, and how rank 0 names it, is
# tests/test_lifecycle.py's on stand-ins
@pytest.mark.slow
def test_a_rank_that_fails_fails_the_run_in_one_line(tmp_path):
    bomb = ["+reward_mix.bomb.fn=tests.failing_rewards.fails_on_rank", "+reward_mix.bomb.weight=0.5"]
    out = run_launch(["-m", *FAST, *TWO, *bomb], tmp_path, env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    [summary_path] = list(tmp_path.glob("grpo/multiruns/*/0/summary.json"))
    summary = json.loads(summary_path.read_text())
    assert summary["status"] == "failed"
    error = summary["error"]
    assert error.startswith("RankFailed: rank 1 of 2 failed: ") and "reward failed on rank 1" in error, error
    assert "\n" not in error and str(summary_path.parent / "ranks") in error


def _rank_error(attempt: Path, rank: int, error: Exception) -> str:
    """The error file torchrun's engine gives ``rank``, written as a rank's record() writes it."""
    from torch.distributed.elastic.multiprocessing.errors import record

    path = attempt / str(rank) / "error.json"
    path.parent.mkdir(parents=True)

    def fail():
        raise error

    with pytest.MonkeyPatch.context() as env:
        env.setenv("TORCHELASTIC_ERROR_FILE", str(path))
        with pytest.raises(type(error)):
            record(fail)()
    return str(path)


GLOO_LOST = RuntimeError(
    "[third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:34218"
)


@pytest.mark.parametrize(
    "errors, named",
    [
        # rank 1's reward raised; rank 0 lost it mid-collective, and the engine saw rank 0's exit first
        (
            {1: ValueError("reward failed on rank 1"), 0: GLOO_LOST},
            "rank 1 of 2 failed: ValueError: reward failed on rank 1",
        ),
        # rank 0's own error is the run's, whatever the others then report
        ({0: ValueError("evaluation failed"), 1: GLOO_LOST}, "rank 0 of 2 failed: ValueError: evaluation failed"),
        # nobody left an error of its own (the peer was killed): the rank the engine saw, as it said it
        ({0: GLOO_LOST}, "rank 0 of 2 failed: RuntimeError: [third_party"),
    ],
    ids=["a peer's error", "its own error", "only the report"],
)
def test_the_rank_a_failure_is_named_after_is_the_one_that_caused_it(tmp_path, errors, named):
    """The engine names the first exit it sees; a rank that only reports a vanished peer is not the cause."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from grpo_sweep.run.distributed import rank_failed

    attempt = tmp_path / "ranks" / "run_x" / "attempt_0"
    files = {rank: _rank_error(attempt, rank, error) for rank, error in errors.items()}  # in the order raised
    seen = list(errors)[-1]
    failure = ProcessFailure(local_rank=seen, pid=1, exitcode=1, error_file=files[seen])
    error = str(rank_failed(ChildFailedError("rank", {seen: failure}), 2, tmp_path / "ranks"))
    assert error.startswith(named) and error.endswith(f"(its log: {tmp_path / 'ranks'})") and "\n" not in error


# two processes that import torch and train (~60 s on 2 cores)
@pytest.mark.slow
def test_a_killed_rank_fails_the_run_in_one_line(tmp_path):
    """A rank SIGKILLed (the OOM killer, a kill -9): the launch ends with one line naming the rank and the signal,
    not torchrun's report and Hydra's traceback, and the run's record names the failure."""
    kill = ["+reward_mix.kill.fn=tests.reward_plugins.killed_on_rank", "+reward_mix.kill.weight=0.5"]
    out = run_launch([*FAST, *TWO, *kill], tmp_path, env=ENV)
    assert out.returncode == 1, out.stderr[-3000:]
    [run_dir] = list(tmp_path.glob("grpo/runs/*"))
    line = f"rank 1 of 2 was killed (SIGKILL, exit code -9; its log: {run_dir / 'ranks'})"
    printed = [entry for entry in (out.stdout + out.stderr).splitlines() if entry.strip()]
    assert printed[-1] == f"grpo-sweep: {line}", printed[-30:]
    # what the run itself printed before (rank 0's lines) is all there is besides
    assert [entry for entry in printed[:-1] if not entry.startswith("[rank0]:")] == [], printed
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["error"]) == ("failed", f"RankFailed: {line}")


TORCHRUN_REFUSAL = (
    "grpo-sweep: launch.py was started as one of 2 processes (torchrun, accelerate launch); it starts "
    "a run's processes itself: python launch.py distributed=ddp distributed.nproc_per_node=2"
)


def test_a_launch_started_as_one_of_several_processes_is_refused_with_the_spelling_that_works(tmp_path):
    """What each process torchrun starts sees (WORLD_SIZE): refused before it trains. torchrun itself: below."""
    out = launch_here(["distributed=ddp", *FAST], tmp_path, {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"})
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == TORCHRUN_REFUSAL, out.stderr[-3000:]
    assert not list(tmp_path.glob("**/metrics.jsonl"))


# two processes that each import torch and trl (~8 s); the refusal's logic is the test above
@pytest.mark.slow
def test_launch_under_torchrun_is_refused_with_the_spelling_that_works(tmp_path):
    """Under torchrun every process would be a run of its own (its own run directory, summary, checkpoints)."""
    # torchrun stops the other processes at its first look after one fails (every 0.1 s by default): with 5 s, the
    # process that reaches the refusal later still prints it, however unevenly the two start up
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "--monitor-interval=5",
            str(ROOT / "launch.py"),
            "distributed=ddp",
            f"output_root={tmp_path}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **ENV},
    )
    assert out.returncode != 0
    assert (out.stdout + out.stderr).count(TORCHRUN_REFUSAL) == 2, out.stderr[-3000:]
    assert not list(tmp_path.glob("**/metrics.jsonl"))


def test_the_engines_signal_handlers_do_not_outlive_the_run(tmp_path, monkeypatch):
    """torchrun's engine installs its own Ctrl-C handler and leaves it; the next run of the process (a sweep's) must
    get the user's Ctrl-C as a KeyboardInterrupt again."""
    import signal
    from types import SimpleNamespace

    import torch.distributed.launcher.api as api

    from grpo_sweep.run import distributed

    def engine(config, entry):
        def start(*args):
            signal.signal(signal.SIGINT, lambda *a: None)  # what start_processes does (its _terminate_process_handler)
            signal.signal(signal.SIGTERM, lambda *a: None)
            return {0: "rank 0's record"}

        return start

    monkeypatch.setattr(api, "elastic_launch", engine)
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    got = distributed.launch_here(compose([*FAST, *TWO]), SimpleNamespace(run_dir=tmp_path), 2, lambda *a, **k: None)
    assert got == "rank 0's record"
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_the_world_of_a_slurm_job_is_its_tasks_on_its_nodes():
    ddp = compose(["distributed=ddp"])
    assert run_world({"tasks_per_node": 4, "nodes": 2, "gpus_per_node": 4}, "slurm", ddp) == (8, 2, 4)
    assert run_world({"tasks_per_node": 2, "gpus_per_node": None}, "slurm", ddp) == (2, 1, 0)
    assert run_world({}, "local", compose(["distributed=ddp", "distributed.nproc_per_node=3"])) == (3, 1, None)
    # what one process per device cannot do, two can: 2 x 4 completions make groups of 8
    eight = compose(["distributed=ddp", "trainer.per_device_train_batch_size=4", "trainer.num_generations=8"])
    check_world(eight, 2, 1, 2)
    with pytest.raises(ValueError, match="steps_per_generation = 4 x 1 = 4"):
        check_world(eight, 1)


@pytest.mark.slow
def test_a_killed_two_process_run_resumes_both_ranks_from_one_checkpoint(tmp_path):
    """SIGKILL to the whole process group mid-run (a node lost), then the same command again: both ranks continue from
    the newest checkpoint, and every step is in metrics.jsonl once."""
    run_dir = tmp_path / "run"
    args = [
        sys.executable,
        str(ROOT / "launch.py"),
        *FAST,
        *TWO,
        "trainer.max_steps=30",
        "trainer.save_steps=4",
        f"hydra.run.dir={run_dir}",
    ]
    env = {**os.environ, **ENV}
    first = subprocess.Popen(
        args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 300
    # a checkpoint directory appears before its save ends; the kill must come after one whose save finished
    while (last_checkpoint(run_dir) or (None, 0))[1] < 8:
        assert first.poll() is None and time.time() < deadline, "the first attempt ended before its second checkpoint"
        time.sleep(0.2)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert not (run_dir / "summary.json").exists()
    # the kill may cut a later save short: the resume takes the newest one that finished
    _, newest = last_checkpoint(run_dir)

    again = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    [resumed] = summary["resumed_from_steps"]
    assert summary["status"] == "completed" and resumed == newest >= 8
    assert [row["step"] for row in _train_rows(run_dir)] == list(range(1, 31))
    logs = _rank_logs(run_dir)
    assert "rank 0 of 2 (local rank 0, 1 node) on" in logs and f"resuming at step {resumed}" in logs
    assert logs.count(f"resuming at step {resumed}") == 2  # both ranks


@pytest.mark.slow
def test_a_two_process_run_is_one_wandb_run(tmp_path):
    from .wandb_offline import offline_run_dirs, read_offline_run

    env = {**ENV, "WANDB_API_KEY": "", "WANDB_MODE": "", "NETRC": str(tmp_path / "no-netrc")}
    out = run_launch(["logger=wandb", *FAST, *TWO], tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    [run_dir] = list(tmp_path.glob("grpo/runs/*"))
    [offline] = offline_run_dirs(run_dir)  # rank 1 opened none
    run = read_offline_run(offline)
    assert run.config["distributed"]["strategy"] == "ddp" and run.exit_code == 0
    steps = sorted({row["_step"] for row in run.history if "train/reward" in row})
    assert len(steps) == 6, steps
    assert run.summary["world_size"] == 2
