"""scripts/gpu_check.sh on an air-gapped GPU node: its dry run lists what it would install from the wheelhouse
and what it would run, each check with its budget, and runs nothing; the wheelhouse's installer picks only what
this Python lacks. The 2-GPU checks skip, saying why, where fewer GPUs are; their DDP run works on CPU, and the
server check's timing and memory reading work against a stand-in server."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_sweep.run.validate import gpu_count

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import gpu_wheels  # noqa: E402


def fake_wheelhouse(directory: Path, names: list[str]) -> Path:
    directory.mkdir()
    for name in names:
        (directory / f"{name.replace('-', '_')}-1.0-py3-none-any.whl").write_bytes(b"")
    return directory


def test_the_dry_run_lists_what_it_would_install_and_run_and_runs_nothing(tmp_path):
    lacking = [name for name, _ in gpu_wheels.missing_here()]
    wheels = fake_wheelhouse(tmp_path / "wheels", [name for name, _ in gpu_wheels.requirements()])
    out = tmp_path / "results"
    result = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--offline-wheels", str(wheels), "--out", str(out), "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    assert f"pip install --no-index --no-deps --find-links {wheels}" in text
    for name in lacking:
        assert f"would install {name} from" in text, text
    assert "would install trl" not in text  # installed here: the node's own copy is kept
    assert f"results would go to {out}" in text
    budgets = __import__("gpu_check").CHECK_BUDGETS
    assert (
        f"would run model (budget {budgets['model']} s)" in text
        and f"would run trl (budget {budgets['trl']} s)" in text
    )
    assert f"model.name_or_path={out}/model-qwen2.5-0.5b-random" in text
    if importlib.util.find_spec("unsloth") is None:
        assert "would skip unsloth: not installed here: unsloth" in text
    gpus = gpu_count()
    if gpus < 2:  # this machine's GPUs, as the plan counts them (no torch)
        visible = f"and {gpus} {'is' if gpus == 1 else 'are'} visible here"
        assert f"would skip trl-ddp: needs 2 GPUs (distributed=ddp distributed.nproc_per_node=2) {visible}" in text
        assert "would skip trl-server: needs 2 GPUs (trainer.use_vllm=true trainer.vllm_mode=server" in text
    assert not out.exists()  # nothing ran


def test_every_budget_covers_what_its_check_waits_for_and_all_fit_one_device_command():
    import gpu_check

    for name, waits in gpu_check.WAITS.items():
        assert gpu_check.CHECK_BUDGETS[name] >= sum(waits.values()), name
    # the generate CLI on an Unsloth run starts a vLLM engine of its own (its budget was 40 s)
    assert gpu_check.CHECK_BUDGETS["cli-unsloth"] > 90 + 20
    checks = gpu_check.budgets(["trl", "unsloth"], cli=True)
    assert sum(checks.values()) <= gpu_check.parse_args([]).budget <= 570 - 30  # 30 s left to install the wheels
    script = (ROOT / "scripts" / "gpu_check.sh").read_text()
    assert "TOTAL_S=570" in script  # within a lent device's 600 s a command
    # a machine with 2 GPUs: the 2-GPU checks add their own budgets, to the script's and to the shell's timeout
    every = gpu_check.budgets(gpu_check.DEFAULT_CHECKS, cli=True)
    extra = gpu_check.multi_gpu_seconds(gpu_check.DEFAULT_CHECKS)
    assert sum(every.values()) <= gpu_check.parse_args([]).budget + extra
    assert f"MULTI_GPU_S={extra} " in script
    assert (
        "cli-trl-ddp" not in every
        and extra == gpu_check.CHECK_BUDGETS["trl-ddp"] + gpu_check.CHECK_BUDGETS["trl-server"]
    )


def test_the_two_gpu_checks_skip_with_the_reason_where_fewer_gpus_are():
    import gpu_check

    run, skipped = gpu_check.select_backends(gpu_check.DEFAULT_CHECKS, dry_run=False, gpus=1)
    assert "trl" in run and "trl-ddp" not in run and "trl-server" not in run
    assert skipped["trl-ddp"] == "needs 2 GPUs (distributed=ddp distributed.nproc_per_node=2) and 1 is visible here"
    assert skipped["trl-server"].startswith(
        "needs 2 GPUs (trainer.use_vllm=true trainer.vllm_mode=server trainer.vllm_server.gpus=1)"
    )
    run, skipped = gpu_check.select_backends(["trl-ddp", "trl-server"], dry_run=False, gpus=2)
    assert run[0] == "trl-ddp"
    if importlib.util.find_spec("vllm") is None:
        assert skipped == {
            "trl-server": 'not installed here: vllm; pip install -e ".[gpu]" where the full stack can be installed'
        }
    # the CPU dry run: DDP as 2 gloo processes; the server needs a GPU
    run, skipped = gpu_check.select_backends(["trl-ddp", "trl-server"], dry_run=True, gpus=0)
    assert run == ["trl-ddp"] and skipped == {"trl-server": "needs a GPU; the dry run leaves it out"}


def test_the_server_check_times_the_start_and_sees_whether_the_stop_freed_the_gpu(tmp_path, monkeypatch):
    import gpu_check

    from grpo_sweep.backends.vllm_server import ServerSpec, VLLMServer, serving

    from .test_vllm_server import standin

    plain_start, plain_stop = VLLMServer.start, VLLMServer.stop
    monkeypatch.setattr(gpu_check, "FREE_WAIT_S", 2.0)
    held = {"bytes": 0}  # what the server's GPU 1 holds, as NVML would read it
    monkeypatch.setattr(gpu_check, "used_memory_reader", lambda gpu, device=None: (lambda: held["bytes"], "fake"))

    def start_and_hold(self):
        server = plain_start(self)
        held["bytes"] = 40 * 2**30
        return server

    def stop_and_free(self):
        plain_stop(self)
        held["bytes"] = 2**29

    spec = ServerSpec(model="tiny", gpus=(1,), startup_timeout_s=20, stop_grace_s=5)
    for stop, freed, after in ((plain_stop, False, 40.0), (stop_and_free, True, 0.5)):
        held["bytes"] = 0
        # watch_server wraps whatever start and stop are; monkeypatch puts the originals back afterwards
        monkeypatch.setattr(VLLMServer, "start", start_and_hold)
        monkeypatch.setattr(VLLMServer, "stop", stop)
        watched: dict = {}
        gpu_check.watch_server(watched)
        with serving(spec, tmp_path, command=standin("ok"), lock_dir=tmp_path / "locks"):
            pass
        assert watched["gpus"] == ["1"] and watched["before_gib"] == [0.0] and watched["start_to_healthy_s"] > 0
        assert (watched["memory_freed"], watched["after_stop_gib"]) == (freed, [after])


# A check that started a server the way backends/vllm_server.py does (a session of its own) and then hangs: the
# server ignores SIGTERM, like a vLLM engine stuck in CUDA, and holds a worker, like vLLM's engine core.
HANGING_CHECK = """
import subprocess, sys, time
server = subprocess.Popen([sys.executable, {standin!r}, "stubborn", "--port", "0", "--pid-file", {worker!r}],
                          start_new_session=True, stdout=subprocess.DEVNULL)
open({server_pid!r}, "w").write(str(server.pid))
print("check started its server", flush=True)
time.sleep(600)
"""


def test_a_check_that_runs_out_of_time_leaves_no_process_behind(tmp_path):
    import gpu_check

    from .test_vllm_server import STANDIN, alive

    worker, server_pid = tmp_path / "worker.pid", tmp_path / "server.pid"
    script = HANGING_CHECK.format(standin=str(STANDIN), worker=str(worker), server_pid=str(server_pid))
    started = time.monotonic()
    code, output = gpu_check.run_process(
        [sys.executable, "-c", script], dict(os.environ), 2.0, tmp_path / "check.log", floor_s=0.0, grace_s=1.0
    )
    assert code is None and "check started its server" in output
    assert time.monotonic() - started < 2.0 + 1.0 + 5.0
    pids = [int(server_pid.read_text()), int(worker.read_text())]
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in pids), "a process of the timed-out check is still running"


# two gloo processes train for real (~50 s on 2 cores); the two-process run itself is test_distributed.py's, the
# check's plan and skips are the tests above
@pytest.mark.slow
def test_the_cpu_dry_run_trains_the_ddp_check_as_two_processes(tmp_path):
    out = tmp_path / "check"
    result = subprocess.run(
        [
            sys.executable,
            "scripts/gpu_check.py",
            "--cpu-dry-run",
            "--backends",
            "trl-ddp,trl-server",
            "--skip-cli",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "skipping backend=trl-server: needs a GPU; the dry run leaves it out" in result.stdout
    ddp, server = json.loads((out / "gpu_check.json").read_text())["results"]
    assert (ddp["status"], ddp["steps"], ddp["processes"]) == ("completed", 2, 2), ddp
    assert ddp["train_tokens_per_s"] > 0 and ddp["peak_gpu_memory_gib_per_gpu"] is None  # CPU: no GPU numbers
    summary = json.loads((out / "run-trl-ddp" / "summary.json").read_text())
    assert summary["distributed"]["world_size"] == 2
    assert (out / "run-trl-ddp" / "grpo_config.json").is_file()  # written once, by rank 0
    assert server["status"] == "skipped"


def test_the_packing_check_is_planned_with_its_budget_and_kept_out_of_the_default_checks():
    import gpu_check

    assert "packing" not in gpu_check.DEFAULT_CHECKS  # the 9.5 minutes of a lent device are the other checks'
    assert gpu_check.CHECK_BUDGETS["packing"] >= sum(gpu_check.WAITS["packing"].values())
    assert gpu_check.budgets(["packing"], cli=True) == {
        "model": gpu_check.CHECK_BUDGETS["model"],
        "packing": gpu_check.CHECK_BUDGETS["packing"],
    }  # no generate CLI on a sweep
    sweep = gpu_check.packing_overrides(Path("/m"), 4, Path("/s"), dry_run=True)
    assert sweep[:4] == [
        "-m",
        "hydra/launcher=pool",
        "hydra.launcher.runs_per_gpu=4",
        "hydra.launcher.gpu_memory_gb=80",
    ]
    assert "trainer.seed=1,2,3,4" in sweep and "hydra.sweep.dir=/s" in sweep
    assert not any(
        o.startswith("hydra.launcher.gpu_memory_gb")
        for o in gpu_check.packing_overrides(Path("/m"), 2, Path("/s"), False)
    )


# 1 + 2 + 4 runs of the tiny Qwen2 (151,936-token vocabulary) through the pool on 2 cores: minutes
@pytest.mark.slow
def test_the_cpu_dry_run_packs_1_2_and_4_runs_on_a_stand_in_gpu(tmp_path):
    out = tmp_path / "check"
    result = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--cpu-dry-run", "--backends", "packing", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    [packing] = json.loads((out / "gpu_check.json").read_text())["results"]
    assert packing["status"] == "completed", packing
    for k in ("1", "2", "4"):
        measured = packing["per_k"][k]
        assert measured["completed"] == int(k) and measured["runs_per_gpu_hour"] > 0 and measured["step_time_s"] > 0
        assert measured["neighbours"] == [int(k) - 1] * int(k)  # every run saw the others of its sweep
        assert measured["plan_gib"] > 1.0 * int(k) and measured["peak_gpu_memory_gib"] is None  # CPU: no GPU numbers
    # the table's row: each K's runs an hour
    assert re.search(r"^packing runs/GPU-h K=1,2,4 +[\d.]+/[\d.]+/[\d.]+ ", result.stdout, re.M), result.stdout


def test_the_installer_takes_only_what_this_python_lacks(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_wheels, "installed", lambda name: None if name in ("hydra-core", "nvidia-ml-py") else "1")
    wheels = fake_wheelhouse(tmp_path / "wheels", ["hydra-core"])
    assert gpu_wheels.plan(wheels) == [
        ("hydra-core", wheels / "hydra_core-1.0-py3-none-any.whl"),
        ("nvidia-ml-py", None),
    ]
    assert gpu_wheels.install(wheels) == 1  # a wheel the node needs is not there: said, nothing installed


def test_the_wheel_list_names_neither_torch_nor_transformers():
    names = {name for name, _ in gpu_wheels.requirements()}
    assert not names & {"torch", "transformers", "tokenizers", "safetensors", "huggingface-hub", "numpy"}
    assert {"trl", "peft", "accelerate", "datasets", "hydra-core"} <= names
