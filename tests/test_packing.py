"""Several runs on one GPU (hydra.launcher.runs_per_gpu=K), on CPU with stand-in GPU ids (CUDA_VISIBLE_DEVICES) and
stand-in GPU memory figures (hydra.launcher.gpu_memory_gb): the key's check, the memory plan and its refusal, the dry
run's placement, the pool's and submitit_local's slots, and what a run records of its neighbours. The packed SLURM
job against a real controller is in test_slurm.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from .conftest import FAST, ROOT, compose, launch_here, run_launch
from .test_gate import assert_one_line_refusal, started_runs
from .test_launchers import CPU_JOB, fake_sbatch  # noqa: F401  (fake_sbatch: a fixture)

GRID = ["reward_mix=format,correct", "lora.r=16,32"]


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "true", "two"])
def test_a_bad_runs_per_gpu_is_one_line_naming_it_and_starts_nothing(tmp_path, value):
    out = launch_here(["-m", "hydra/launcher=pool", f"hydra.launcher.runs_per_gpu={value}", *GRID], tmp_path)
    shown = {"true": "True", "two": "'two'"}.get(value, value)
    assert out.returncode == 1
    assert_one_line_refusal(
        out.stderr,
        f"grpo-sweep: hydra.launcher.runs_per_gpu={shown}: give a whole number of runs that share one GPU, 1 or "
        "more (1: a GPU per run); no run was started",
    )
    assert started_runs(tmp_path) == []


@pytest.mark.parametrize("launcher", [["hydra/launcher=submitit_local"], ["hydra/launcher=slurm", *CPU_JOB]])
def test_the_key_means_the_same_on_every_launcher(tmp_path, launcher, fake_sbatch):  # noqa: F811
    env, scripts = fake_sbatch
    out = launch_here(["-m", *launcher, "hydra.launcher.runs_per_gpu=0", *GRID], tmp_path, env=env)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith("grpo-sweep: hydra.launcher.runs_per_gpu=0: give a whole")
    out = launch_here(["-m", *launcher, "hydra.launcher.gpu_memory_gb=-8", *GRID], tmp_path, env=env)
    assert out.stderr.strip().splitlines()[-1].startswith("grpo-sweep: hydra.launcher.gpu_memory_gb=-8: give one GPU")
    assert list(scripts.iterdir()) == [] and started_runs(tmp_path) == []


def test_an_oversubscribed_plan_is_one_line_naming_the_run_its_estimate_and_the_largest_k_that_fits(tmp_path):
    # the tiny model's runs: ~1.03 GB each (the CUDA context's 1 GB, the rest its weights and activations); a
    # stand-in 2.5 GB GPU plans 2.375 GB: two runs fit, three do not
    args = ["-m", "hydra/launcher=pool", "hydra.launcher.runs_per_gpu=3", "hydra.launcher.gpu_memory_gb=2.5", *GRID]
    out = launch_here(args, tmp_path, env={"CUDA_VISIBLE_DEVICES": "7"})
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("grpo-sweep: hydra.launcher.runs_per_gpu=3 does not fit: job "), last
    assert " needs ~1.0 GB (weights 0.00, trained+optimizer 0.00, activations 0.0" in last
    assert (
        "and the 3 largest runs together ~3.1 GB > 2.4 GB usable of the GPU's 2.5 GB (hydra.launcher.gpu_memory_gb)"
        in last
    )
    assert last.endswith("at most 2 fit (hydra.launcher.runs_per_gpu=2); no run was started")
    assert "Traceback" not in out.stderr and started_runs(tmp_path) == []
    # one run alone does not fit: said so, not "at most 0"
    out = launch_here([*args[:3], "hydra.launcher.gpu_memory_gb=1", *GRID], tmp_path)
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .endswith("not even one run fits alone: lower its batch, completion length or vLLM share; no run was started")
    )


def test_the_estimate_reads_size_dtype_lora_optimizer_kv_cache_checkpointing_and_the_vllm_share():
    from grpo_sweep.launching.memory import KNOWN_MODELS, estimate, model_shape

    base = ["experiment=gsm8k_qwen0_5b"]
    gsm8k = estimate(compose(base), 80)
    # Qwen2.5-0.5B: 494 M parameters in bf16, ~0.92 GB; vLLM takes its 0.6 of the 80 GB GPU
    assert 0.9 < gsm8k.weights < 0.95 and gsm8k.vllm_share == 0.6 and gsm8k.generation == pytest.approx(48.0)
    # LoRA r=32 on the 7 projections of 24 layers: 17.6 M parameters x 16 bytes (weights, gradients, Adam's two)
    assert gsm8k.trained == pytest.approx(
        24 * 32 * (2 * (896 + 896) + 2 * (896 + 128) + 3 * (896 + 4864)) * 16 / 1024**3
    )
    assert estimate(compose([*base, "lora.r=16"]), 80).trained == pytest.approx(gsm8k.trained / 2)
    listed = compose([*base, "lora.target_modules=[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"])
    assert estimate(listed, 80).trained == pytest.approx(gsm8k.trained)
    assert estimate(compose([*base, "lora.target_modules=[q_proj]"]), 80).trained < gsm8k.trained / 10
    # half the GPU's memory: half the vLLM share in GB; without vLLM, transformers' KV cache instead
    assert estimate(compose(base), 40).generation == pytest.approx(24.0)
    hf = estimate(compose([*base, "backend.fast_inference=false"]), 80)
    kv = 2 * 20 * 16 * (512 + 1024) * 24 * 2 * 64 * 2 / 1024**3  # 2 x batch x tokens x layers x kv heads x dim x 2
    assert hf.vllm_share == 0 and hf.generation == pytest.approx(kv)
    # 4-bit weights are ~a quarter; checkpointing keeps one hidden state a layer
    four_bit = estimate(compose([*base, "model.load_in_4bit=true"]), 80)
    assert four_bit.weights < gsm8k.weights * 0.6
    plain = estimate(compose([*base, "backend.use_gradient_checkpointing=false"]), 80)
    assert plain.activations > gsm8k.activations * 1.5
    # TRL's colocated vLLM: its share, TRL's default 0.3 unless set
    trl = compose(
        ["experiment=gpu", "model=qwen2_5_7b_instruct", "trainer.use_vllm=true", "trainer.vllm_mode=colocate"]
    )
    assert estimate(trl, 80).vllm_share == 0.3 and 14 < estimate(trl, 80).weights < 15  # 7.6 B in bf16
    # the spelling of that share: trainer.vllm_gpu_memory_utilization, the planned share and the run's
    shared = compose(
        [
            "experiment=gpu",
            "model=qwen2_5_7b_instruct",
            "trainer.use_vllm=true",
            "trainer.vllm_gpu_memory_utilization=0.2",
        ]
    )
    assert estimate(shared, 80).vllm_share == 0.2 and estimate(shared, 80).generation == pytest.approx(16.0)
    assert model_shape(compose(["model=llama3_1_8b_instruct"])) == KNOWN_MODELS["meta-llama-3.1-8b"]


def test_a_model_of_unknown_size_is_refused_for_packing_naming_it(tmp_path):
    from grpo_sweep.launching.memory import Plan, estimate
    from grpo_sweep.run.validate import ConfigError

    cfg = compose(["model.name_or_path=someone/unheard-of-3b", "model.tiny=null"])
    with pytest.raises(ConfigError, match=r"^model.name_or_path=someone/unheard-of-3b: its size is unknown here"):
        estimate(cfg, 80)
    # planned against a GPU's memory, a run of unknown size is refused; with no memory to plan against (a CPU
    # machine, a SLURM profile without gpu_memory_gb) the plan is skipped and nothing is refused on its account
    with pytest.raises(ConfigError, match="its size is unknown here"):
        Plan(2, 80.0, "hydra.launcher.gpu_memory_gb").add("job 0", cfg)
    skipped = Plan(2, None, "")
    skipped.add("job 0", cfg)
    skipped.check()
    assert skipped.estimates == [("job 0", None)]
    assert (
        skipped.placement([("GPU 0", [0])])[1] == "  GPU 0: job 0: its model's size is unknown here; together ~0.00 GB"
    )
    # a local model folder's config.json is read as it is (gpu_check's random-weight model)
    folder = tmp_path / "model"
    folder.mkdir()
    shape = dict(
        vocab_size=1000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    (folder / "config.json").write_text(json.dumps(shape))
    assert estimate(compose([f"model.name_or_path={folder}", "model.tiny=null"]), 80).weights > 0


def test_the_dry_run_prints_which_runs_share_which_gpu_with_their_estimates(tmp_path, fake_sbatch):  # noqa: F811
    env, _ = fake_sbatch
    pool = ["-m", "hydra/launcher=pool", "hydra.launcher.dry_run=true", "hydra.launcher.gpu_memory_gb=80"]
    out = launch_here(
        [*pool, "hydra.launcher.runs_per_gpu=2", "lora.r=8,16,32,64,128"], tmp_path, env={"CUDA_VISIBLE_DEVICES": "7,9"}
    )
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "dry run (pool): 5 run(s) on 4 worker(s), 2 a GPU on GPUs 7, 9; nothing is started" in text
    assert "run 0 (lora.r=8): GPU 7 (slot 0)" in text and "run 1 (lora.r=16): GPU 9 (slot 0)" in text
    assert "run 2 (lora.r=32): GPU 7 (slot 1)" in text and "run 4 (lora.r=128): the first slot freed" in text
    assert "GPU memory plan: 2 run(s) a GPU, 80 GB a GPU (hydra.launcher.gpu_memory_gb), 95% of it planned" in text
    gpu7 = next(line for line in text.splitlines() if line.startswith("  GPU 7: "))
    assert "job 0 (lora.r=8) ~1.03 GB (weights" in gpu7 and "job 2 (lora.r=32) ~1.03 GB" in gpu7
    assert "  runs 4: each in the first GPU slot a finished run frees" in text
    assert started_runs(tmp_path) == []
    slurm = ["-m", "hydra/launcher=slurm", *CPU_JOB, "hydra.launcher.dry_run=true", "hydra.launcher.runs_per_gpu=2"]
    out = launch_here([*slurm, "hydra.launcher.gpu_memory_gb=80", *GRID], tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "dry run (slurm): 4 run(s) in 2 job(s) of up to 2 runs, each " in out.stdout
    assert "  SLURM job 0 (one GPU): job 0 (reward_mix=format lora.r=16) ~1.03 GB" in out.stdout
    assert "; job 3 (reward_mix=correct lora.r=32) ~1.03 GB" in out.stdout.split("SLURM job 1 (one GPU)")[1]


def test_k_equal_1_plans_nothing_and_runs_as_before(tmp_path):
    from grpo_sweep.launching import memory

    class Launcher:
        runs_per_gpu, gpu_memory_gb = 1, None

    assert memory.start_plan(Launcher(), trains_here=False) is None
    out = launch_here(["-m", "hydra/launcher=pool", "hydra.launcher.dry_run=true", *GRID], tmp_path)
    assert out.returncode == 0 and "GPU memory plan" not in out.stdout


def test_pool_and_submitit_local_slots_spread_runs_over_the_gpus_k_a_gpu(tmp_path):
    """Every GPU's first slot before any GPU's second; a slot held by a live process is not taken twice; a process
    that finds none waits for one (submitit_local), or fails saying so (a pool worker)."""
    from grpo_sweep.launching import pool
    from grpo_sweep.run.sharing import SHARE_ENV, from_env

    assert pool.slots(["7", "9"], 2) == [("7", 0), ("9", 0), ("7", 1), ("9", 1)]
    assert pool.pool_size(-1, 16, ["7", "9"], 2) == 4 and pool.pool_size(8, 16, ["7", "9"], 2) == 4
    assert pool.pool_size(-1, 16, ["7", "9"]) == 2 and pool.pool_size(-1, 3, ["7", "9"], 2) == 3
    code = (
        "import sys, time; from grpo_sweep.launching.pool import claim_gpu; "
        "print(claim_gpu(sys.argv[1], ['7', '9'], 2, wait_s=float(sys.argv[2])), flush=True); "
        "time.sleep(float(sys.argv[3]))"
    )
    locks = tmp_path / "locks"
    locks.mkdir()

    def holder(wait: float, hold: float) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-c", code, str(locks), str(wait), str(hold)], stdout=subprocess.PIPE, text=True, cwd=ROOT
        )

    holders = [holder(0, 30) for _ in range(4)]
    assert sorted(h.stdout.readline().strip() for h in holders) == ["7", "7", "9", "9"]
    late = holder(0, 0)  # every slot held: a pool worker fails saying so
    assert late.wait(timeout=30) == 1
    waiting = holder(30, 0)  # submitit_local's job waits for the first slot freed
    time.sleep(1.0)
    holders[0].kill()
    assert waiting.stdout.readline().strip() in ("7", "9") and waiting.wait(timeout=30) == 0
    for h in holders[1:]:
        h.kill()
        h.wait(timeout=30)
    os.environ.pop(SHARE_ENV, None)
    assert pool.claim_gpu(str(locks), ["7"], 2) == "7" and from_env().gpu == "7" and from_env().runs_per_gpu == 2
    os.environ.pop(SHARE_ENV)
    os.environ.pop("CUDA_VISIBLE_DEVICES")


def test_a_runs_share_of_the_gpu_splits_its_device_seconds_and_names_its_neighbours(tmp_path):
    from grpo_sweep.run.sharing import Share, gpu_share

    assert gpu_share(0, 10, []) == 1.0
    assert gpu_share(0, 10, [(0, 10)]) == 0.5  # two runs throughout: half each
    assert gpu_share(0, 10, [(5, 20)]) == pytest.approx(0.75)  # alone 5 s, then half of 5 s
    assert gpu_share(0, 10, [(0, 10), (0, 10), (0, 10)]) == 0.25
    share = Share(tmp_path, "7", 2)
    a, b, c = (tmp_path / n for n in "abc")
    share.begin(a, now=0.0)
    share.begin(b, now=5.0)
    share.end(a, now=10.0)
    share.begin(c, now=30.0)  # after a ended: no neighbour of a's
    record = share.record(a, since=0.0, until=10.0)
    assert record["neighbours"] == [str(b.resolve())] and record["share"] == pytest.approx(0.75)
    assert record["runs_per_gpu"] == 2 and record["gpu"] == "7"
    # b has not ended, and its process (this one) lives: running until now
    assert share.record(c, since=30.0, until=40.0)["neighbours"] == [str(b.resolve())]
    # a neighbour killed without its end (its process gone): named, and its time counted to its start only
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with open(share.path, "a") as ledger:
        ledger.write(json.dumps({"run_dir": str(tmp_path / "d"), "start": 31.0, "pid": int(dead.stdout)}) + "\n")
        ledger.write('{"run_dir": "half a li')  # a line a killed process left half written
    record = share.record(c, since=30.0, until=40.0)
    assert record["share"] == pytest.approx(0.5) and str((tmp_path / "d").resolve()) in record["neighbours"]


def test_a_run_out_of_memory_beside_others_says_its_estimate_in_one_line(tmp_path, monkeypatch):
    from grpo_sweep.run import sharing

    share = sharing.Share(tmp_path / "ledger", "7", 2)
    (tmp_path / "ledger").mkdir()
    (tmp_path / "ledger" / sharing.ESTIMATES).write_text(json.dumps({str((tmp_path / "run").resolve()): 21.5}))
    monkeypatch.setattr(sharing, "measured_peak_gb", lambda: 37.25)
    share.begin(tmp_path / "other", now=time.time() - 5)
    line = sharing.out_of_memory_line(share, tmp_path / "run", time.time() - 1)
    assert line == (
        "out of GPU memory on GPU 7, shared by up to 2 runs (1 trained beside it): the gate estimated 21.5 GB for it, "
        "it measured 37.2 GB (torch.cuda.max_memory_allocated); its neighbours go on. Lower "
        "hydra.launcher.runs_per_gpu, or the run's batch or vLLM share"
    )

    class OutOfMemoryError(RuntimeError):
        pass

    assert sharing.is_out_of_memory(OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert not sharing.is_out_of_memory(RuntimeError("shape mismatch"))


@pytest.mark.slow
def test_two_runs_sharing_a_stand_in_gpu_record_each_other_and_split_their_cost(tmp_path):
    """The pool with runs_per_gpu=2 on one stand-in GPU id: both runs train side by side, each names the other as its
    neighbour, their shares of the GPU sum to about its time, and their results are those of the runs alone."""
    args = ["-m", "hydra/launcher=pool", "lora.r=16,32", *FAST, "trainer.torch_threads=1"]
    (tmp_path / "packed").mkdir()
    (tmp_path / "alone").mkdir()
    out = run_launch([*args, "hydra.launcher.runs_per_gpu=2"], tmp_path / "packed", env={"CUDA_VISIBLE_DEVICES": "0"})
    assert out.returncode == 0, out.stderr[-3000:]
    alone = run_launch([*args, "hydra.launcher.n_jobs=1"], tmp_path / "alone")
    assert alone.returncode == 0, alone.stderr[-3000:]
    [packed_dir] = list((tmp_path / "packed").glob("grpo/multiruns/*"))
    [alone_dir] = list((tmp_path / "alone").glob("grpo/multiruns/*"))
    for n, other in (("0", "1"), ("1", "0")):
        summary = json.loads((packed_dir / n / "summary.json").read_text())
        sharing = summary["gpu_sharing"]
        assert sharing["runs_per_gpu"] == 2 and sharing["gpu"] == "0"
        assert sharing["neighbours"] == [str((packed_dir / other).resolve())]
        assert 0.4 < sharing["share"] < 1.0
        timed = sum(summary["timings_s"][k] for k in ("train", "save", "eval"))
        assert summary["device_seconds"] == pytest.approx(timed * sharing["share"], abs=0.01)
        single = json.loads((alone_dir / n / "summary.json").read_text())
        assert "gpu_sharing" not in single
        for key in ("steps", "reward", "val_accuracy", "test_accuracy", "train_rewards"):
            assert summary[key] == single[key], key
