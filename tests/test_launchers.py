"""Launcher options, and what the SLURM launcher does on the login node (against a stand-in `sbatch`).

The stand-in records the job script submitit wrote and answers like sbatch; everything else is the real
submission path. The same path against a real controller is in test_slurm.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir

from .conftest import CONF, FAST, ROOT, launch_here

HEAVY = ("torch", "trl", "transformers", "unsloth", "peft", "datasets")
CPU_JOB = ["hydra.launcher.gpus_per_node=null", "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=2"]


def launcher_cfg(overrides: list[str]):
    from grpo_sweep.configstore import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides, return_hydra_config=True).hydra.launcher


def test_launcher_options_keep_slurm_keys_to_slurm():
    assert launcher_cfg([])._target_.endswith("BasicLauncher")
    local = launcher_cfg(["hydra/launcher=submitit_local"])
    assert local._target_ == "hydra_plugins.grpo_sweep_launcher.launcher.GrpoLocalLauncher"
    assert local.array_parallelism is None and local.timeout_min == 60  # the stock keys, plus the throttle
    pool = launcher_cfg(["hydra/launcher=pool"])
    assert (pool._target_, pool.n_jobs) == ("hydra_plugins.grpo_sweep_launcher.launcher.GrpoPoolLauncher", -1)
    slurm = launcher_cfg(["hydra/launcher=slurm"])
    assert slurm._target_ == "hydra_plugins.grpo_sweep_launcher.launcher.GrpoSlurmLauncher"
    assert (slurm.gpus_per_node, slurm.tasks_per_node, slurm.detach) == (1, 1, False)
    assert slurm.max_num_timeout > 0  # requeue on time limit: resume makes it safe
    site = launcher_cfg(["hydra/launcher=slurm_example_site"])
    assert (site.partition, site.account, site.gpus_per_node) == ("gpu", "my_lab", 1)
    assert site.setup and site.additional_parameters["mail-type"] == "FAIL"
    for bad in (
        ["hydra/launcher=submitit_local", "hydra.launcher.partition=gpu"],
        ["hydra/launcher=pool", "hydra.launcher.partition=gpu"],
        ["hydra/launcher=submitit_local", "hydra.launcher.detach=true"],
        ["hydra.launcher.partition=gpu"],
    ):
        with pytest.raises(Exception, match="partition|detach"):
            launcher_cfg(bad)


@pytest.fixture
def fake_sbatch(tmp_path):
    """An `sbatch` on PATH that keeps the script it is given and answers with a job id."""
    bin_dir, scripts = tmp_path / "bin", tmp_path / "sbatch_scripts"
    bin_dir.mkdir()
    scripts.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/bin/sh\ncp "$1" {scripts}/\necho "Submitted batch job 4242"\n')
    (bin_dir / "sbatch").chmod(0o755)
    # submitit's SLURM executor refuses to start without `srun` on PATH (a fresh machine has no SLURM at all);
    # only the job script, never run here, calls it
    (bin_dir / "srun").write_text('#!/bin/sh\necho "fake srun: not for running" >&2\nexit 1\n')
    (bin_dir / "srun").chmod(0o755)
    # the stand-in is the machine's whole SLURM: a real sinfo further down PATH (a machine running the local SLURM,
    # no GPUs) would answer for a cluster the test is not about; this one cannot say, so nothing is refused on it
    (bin_dir / "sinfo").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "sinfo").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}, scripts


def submit(args: list[str], cwd: Path, env: dict) -> tuple[subprocess.CompletedProcess, dict]:
    """`python launch.py ARGS` in a subprocess that then reports its exit code and the heavy modules it loaded."""
    probe = textwrap.dedent(
        f"""
        import json, runpy, sys
        sys.argv = ["launch.py", *{args!r}, "output_root={cwd}"]
        code = 0
        try:
            runpy.run_path({str(ROOT / "launch.py")!r}, run_name="__main__")
        except SystemExit as exc:
            code = exc.code
            if isinstance(code, str):  # as the interpreter does: the message to stderr, exit status 1
                print(code, file=sys.stderr)
                code = 1
        print("PROBE " + json.dumps({{"code": code, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("PROBE ")]
    assert lines, out.stdout[-2000:] + out.stderr[-3000:]
    return out, json.loads(lines[-1][len("PROBE ") :])


def test_detached_submit_is_light_and_writes_the_gpu_profile(tmp_path, fake_sbatch):
    env, scripts = fake_sbatch
    out, probe = submit(
        ["-m", "hydra/launcher=slurm_example_site", "hydra.launcher.detach=true", "reward_mix=format,correct"],
        tmp_path,
        env,
    )
    assert probe["code"] == 0, out.stderr[-3000:]
    assert probe["heavy"] == []  # a login node composes, validates and submits without torch & co.
    [sweep_dir] = list(tmp_path.glob("grpo/multiruns/*"))
    assert "Submitted 2 jobs: 4242_0, 4242_1" in out.stdout
    assert f"python -m grpo_sweep.sweeps.status {sweep_dir}" in out.stdout
    jobs = json.loads((sweep_dir / "jobs.json").read_text())["jobs"]
    assert [(j["num"], j["job_id"], Path(j["run_dir"]).name) for j in jobs] == [(0, "4242_0", "0"), (1, "4242_1", "1")]
    [script] = list(scripts.iterdir())
    text = script.read_text()
    for line in (
        "#SBATCH --partition=gpu",
        "#SBATCH --account=my_lab",
        "#SBATCH --qos=normal",
        "#SBATCH --constraint='a100|h100'",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=64GB",
        "#SBATCH --time=720",
        "#SBATCH --array=0-1%2",
        "#SBATCH --mail-type=FAIL",
        "#SBATCH --signal=USR2@120",
        "module load cuda/12.4",
    ):
        assert line in text, line


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["lora.r=16,0"], "grpo-sweep: job 1 (lora.r=0): lora.r=0: LoRA rank must be > 0"),
        (
            ["hydra.launcher.tasks_per_node=2", "lora.r=16"],
            "hydra.launcher.tasks_per_node=2, nodes=1: with distributed=none a run is one training process",
        ),
        (["lora.rr=3"], "lora.rr"),
    ],
)
def test_bad_value_fails_before_anything_is_submitted(tmp_path, fake_sbatch, overrides, message):
    env, scripts = fake_sbatch
    out = launch_here(["-m", "hydra/launcher=slurm", *CPU_JOB, *overrides], tmp_path, env)
    assert out.returncode == 1
    assert message in out.stderr, out.stderr[-2000:]
    assert list(scripts.iterdir()) == []  # nothing reached sbatch


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["hydra.launcher.tasks_per_node=4", "hydra.launcher.gpus_per_node=2"],
            "4 training processes per node but 2 GPUs per node: each training process needs a GPU of its own",
        ),
        (
            ["hydra.launcher.tasks_per_node=2", "trainer.per_device_train_batch_size=3", "trainer.num_generations=4"],
            "processes x per_device_train_batch_size x steps_per_generation = 2 x 3 x 1 = 6",
        ),
        (
            ["hydra.launcher.tasks_per_node=4", "hydra.launcher.nodes=3"],
            "hydra.launcher.nodes=3: the default partition has 2 node(s) that can take the job",
        ),
    ],
)
def test_a_multi_process_run_that_does_not_fit_is_refused_before_submission(tmp_path, fake_sbatch, overrides, message):
    """distributed=ddp on SLURM: the tasks are the run's processes; their arithmetic against the batch and the
    partition (a fake sinfo: two nodes of 4 GPUs) is refused in one line, and nothing reaches sbatch."""
    env, scripts = fake_sbatch
    sinfo = Path(env["PATH"].split(":", 1)[0]) / "sinfo"
    sinfo.write_text('#!/bin/sh\necho "gpu*|64|512000|gpu:a100:4|2"\n')
    sinfo.chmod(0o755)
    base = ["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=4", "distributed=ddp"]
    out = launch_here(["-m", *base, *overrides], tmp_path, env)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("grpo-sweep: ") and message in last, out.stderr[-2000:]
    assert list(scripts.iterdir()) == []


def test_a_dry_run_shows_what_each_job_would_run_and_submits_nothing(tmp_path, fake_sbatch):
    env, scripts = fake_sbatch
    sinfo = Path(env["PATH"].split(":", 1)[0]) / "sinfo"
    sinfo.write_text('#!/bin/sh\necho "gpu*|64|512000|gpu:a100:8|2"\n')
    sinfo.chmod(0o755)
    server = [
        "trainer.use_vllm=true",
        "trainer.vllm_mode=server",
        "trainer.vllm_server.gpus=2",
        "trainer.vllm_server.tensor_parallel_size=2",
    ]
    out, probe = submit(
        [
            "-m",
            "hydra/launcher=slurm",
            "hydra.launcher.dry_run=true",
            "hydra.launcher.nodes=2",
            "hydra.launcher.tasks_per_node=6",
            "hydra.launcher.gpus_per_node=8",
            "distributed=ddp",
            *server,
            "trainer.per_device_train_batch_size=4",
            "trainer.num_generations=8",
            "lora.r=16,32",
        ],
        tmp_path,
        env,
    )
    assert probe["code"] == 0 and probe["heavy"] == [], out.stderr[-3000:]
    assert "dry run (slurm): 2 job(s), each nodes=2 tasks_per_node=6 gpus_per_node=8" in out.stdout
    job = next(line for line in out.stdout.splitlines() if line.startswith("job 1 ("))
    for part in (
        "12 process(es), distributed=ddp",
        "node 0: ranks 0-5 on GPUs 0-5; node 1: ranks 6-11 on GPUs 0-5",
        "vLLM server on node 0, GPUs 6-7 (tensor 2 x data 1)",
        "generation batch 12 x 4 x 1 = 48 = 6 groups of 8",
    ):
        assert part in job, job
    assert list(scripts.iterdir()) == [] and not list(tmp_path.glob("grpo/multiruns/*/jobs.json"))


def test_a_failed_run_does_not_stop_the_sweep(grid_sweep):
    """Two runs' reward raises: the other runs still train, the table shows the failures, the exit code is 1."""
    out, sweep_dir = grid_sweep
    assert out.returncode == 1, out.stderr[-3000:]
    summaries = [json.loads((sweep_dir / n / "summary.json").read_text()) for n in "0123"]
    for failed in summaries[:2]:
        assert failed["status"] == "failed" and "flaky reward exploded" in failed["error"]
    for done in summaries[2:]:
        assert done["status"] == "completed" and done["steps"] == 2
    # the reward guard names the reward and the sample (rewards/guard.py)
    for n in (0, 1):
        assert (
            f"run {n} failed: RewardFailure: reward 'flaky' raised RuntimeError: flaky reward exploded (fail=true) "
            "on sample 0"
        ) in out.stdout


def test_slurm_launcher_without_sbatch_says_so(tmp_path):
    empty = tmp_path / "empty_path"
    empty.mkdir()
    out = launch_here(["-m", "hydra/launcher=slurm", "lora.r=16,32"], tmp_path, {"PATH": str(empty)})
    assert out.returncode == 1
    assert "hydra/launcher=slurm: SLURM's sbatch is not on PATH here" in out.stderr


class _FakeJob:
    """Finishes after a few polls; counts how many of its kind run at once."""

    running = 0
    most = 0

    def __init__(self, num):
        self.job_id, self.polls = str(num), 3
        _FakeJob.running += 1
        _FakeJob.most = max(_FakeJob.most, _FakeJob.running)

    def done(self):
        self.polls -= 1
        if self.polls == 0:
            _FakeJob.running -= 1
        return self.polls <= 0


def test_submitit_local_starts_at_most_array_parallelism_runs_at_once(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from grpo_sweep.launching import submit

    monkeypatch.setattr(submit.time, "sleep", lambda s: None)
    executor = SimpleNamespace(submit=lambda fn, overrides, key, num, job_id: _FakeJob(num))
    params = [([f"trainer.seed={i}"], "hydra.sweep.dir", i, f"job_id_for_{i}") for i in range(7)]
    jobs = submit._start_throttled(executor, None, params, 2, tmp_path, [tmp_path / str(i) for i in range(7)])
    assert [j.job_id for j in jobs] == [str(i) for i in range(7)]
    assert _FakeJob.most == 2
    recorded = json.loads((tmp_path / "jobs.json").read_text())["jobs"]
    assert [j["num"] for j in recorded] == list(range(7))  # each run recorded as it starts

    launcher = SimpleNamespace(_EXECUTOR="local", array_parallelism=None, params={"cpus_per_task": 1})
    assert submit.local_parallelism(launcher) == os.cpu_count()
    launcher.params["cpus_per_task"] = 64 * (os.cpu_count() or 1)
    assert submit.local_parallelism(launcher) == 1
    launcher.array_parallelism = 0
    with pytest.raises(submit.SubmitError, match="hydra.launcher.array_parallelism=0"):
        submit.local_parallelism(launcher)
    assert submit.local_parallelism(SimpleNamespace(_EXECUTOR="slurm")) is None


def _rewards(sweep_dir: Path) -> dict:
    return {
        d.name: [row.get("reward") for row in map(json.loads, (d / "metrics.jsonl").read_text().splitlines())]
        for d in sorted(sweep_dir.iterdir())
        if (d / "metrics.jsonl").exists()
    }


@pytest.mark.slow
def test_pool_runs_several_runs_per_worker_with_the_same_results(tmp_path):
    """hydra/launcher=pool: 2 workers for 3 runs, so one worker runs 2 and pays the imports once; the results are
    those of the default launcher, step by step, and no progress bars interleave."""
    from .conftest import run_launch

    grid = ["-m", "trainer.seed=1,2,3", *FAST, "trainer.max_steps=3", "trainer.save_steps=3"]
    for name in ("pool", "local"):
        (tmp_path / name).mkdir()
    pool = run_launch([*grid, "hydra/launcher=pool", "hydra.launcher.n_jobs=2"], tmp_path / "pool")
    assert pool.returncode == 0, pool.stderr[-3000:]
    local = run_launch(grid, tmp_path / "local")
    assert local.returncode == 0, local.stderr[-3000:]
    [pool_dir], [local_dir] = (list((tmp_path / n).glob("grpo/multiruns/*")) for n in ("pool", "local"))
    assert _rewards(pool_dir) == _rewards(local_dir) and len(_rewards(pool_dir)) == 3
    startups = sorted(json.loads((pool_dir / n / "summary.json").read_text())["timings_s"]["startup"] for n in "012")
    assert startups[0] < 2.0 < startups[-1]  # a reused worker starts its next run without importing again
    assert json.loads((pool_dir / "0" / "summary.json").read_text())["device"]["torch"] == "cpu"
    assert "it/s" not in pool.stdout + pool.stderr
    assert "| 2   | trainer.seed=3 | completed" in pool.stdout


def worker_gpu(rendezvous: str):
    """Run in a pool worker: which process, pinned to which GPU. Each call waits until two workers have checked in,
    so that two calls are always answered by both workers, however unevenly they started."""
    import time

    folder = Path(rendezvous)
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES")


def test_pool_pins_each_worker_to_its_own_gpu(tmp_path, monkeypatch):
    """One worker per GPU, each with its own CUDA_VISIBLE_DEVICES (set before torch could be imported); a worker
    that dies frees its GPU for the worker that replaces it. Fake GPU ids: the pinning needs no GPU."""
    from joblib.externals.loky import get_reusable_executor
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    from grpo_sweep.launching import pool

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7,9")
    assert pool.visible_gpus() == ["7", "9"]
    assert pool.pool_size(-1, 16, ["7", "9"]) == 2 and pool.pool_size(8, 16, ["7", "9"]) == 2
    assert pool.pool_size(-1, 1, ["7", "9"]) == 1 and pool.pool_size(3, 16, []) == 3
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert pool.visible_gpus() == []

    def answers() -> dict:
        rendezvous = Path(tempfile.mkdtemp(dir=tmp_path))
        return dict(executor.map(worker_gpu, [str(rendezvous)] * 2))

    locks = tmp_path / "locks"
    locks.mkdir()
    executor = get_reusable_executor(
        max_workers=2, kill_workers=True, initializer=pool.claim_gpu, initargs=(str(locks), ["7", "9"])
    )
    assert sorted(answers().values()) == ["7", "9"]  # two workers, two GPUs, no GPU twice
    with pytest.raises(TerminatedWorkerError):
        executor.submit(os._exit, 137).result()  # a worker dies: its lock goes with it
    executor = get_reusable_executor(
        max_workers=2, kill_workers=True, initializer=pool.claim_gpu, initargs=(str(locks), ["7", "9"])
    )
    assert sorted(answers().values()) == ["7", "9"]
    executor.shutdown(kill_workers=True)


def test_compose_runs_matches_hydra_composing_every_run():
    """gate.compose_runs composes once per set of config groups and sets the plain values after: same configs."""
    import itertools

    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from grpo_sweep.configstore import register_configs
    from grpo_sweep.launching.gate import compose_runs

    register_configs()
    grid = [
        ["reward_mix=format", "reward_mix=correct"],
        ["lora.r=8", "lora.r=16"],
        ["trainer.seed=1", "trainer.seed=${trainer.max_steps}"],
        ["+reward_mix.x.weight=1"],
    ]
    batch = [list(run) for run in itertools.product(*grid)]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration(
            "config", ["hydra/launcher=slurm", "hydra.sweep.subdir=${hydra.job.override_dirname}"], RunMode.MULTIRUN
        )
        composes = []
        compose = loader.load_sweep_config
        loader.load_sweep_config = lambda m, o: composes.append(o) or compose(m, o)

        # a config holds until the next one is drawn: take what is compared as it comes
        def job(cfg):
            return OmegaConf.to_container(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]), resolve=True)

        def seen(cfg):
            return (OmegaConf.to_container(cfg), job(cfg), cfg.hydra.sweep.dir, cfg.hydra.sweep.subdir)

        got = [seen(cfg) for cfg in compose_runs(loader, master, batch)]
        loader.load_sweep_config = compose
        want = [seen(loader.load_sweep_config(master, run)) for run in batch]
    assert len(composes) == 2  # one per reward_mix; lora.r and trainer.seed are set on the composed config
    assert got == want  # the job's values, hydra.overrides and override_dirname, the run dir


@pytest.mark.slow
def test_pool_survives_a_run_that_kills_its_worker(tmp_path):
    """A run kills its worker process (as the OOM killer would): it is recorded as failed, every other run
    completes, the table shows it, and the exit code says a run failed."""
    from .conftest import run_launch

    killer = ["+reward_mix.k.fn=tests.failing_rewards.killer", "+reward_mix.k.weight=0.5"]
    out = run_launch(
        [
            "-m",
            "hydra/launcher=pool",
            "hydra.launcher.n_jobs=2",
            *killer,
            "+reward_mix.k.params.kill=false,true,false,false",
            *FAST,
            "trainer.max_steps=2",
        ],
        tmp_path,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 1, out.stderr[-3000:]
    [sweep_dir] = list(tmp_path.glob("grpo/multiruns/*"))
    status = {n: json.loads((sweep_dir / n / "summary.json").read_text())["status"] for n in "0123"}
    assert status == {"0": "completed", "1": "failed", "2": "completed", "3": "completed"}
    assert "run 1 failed: its worker process died (EXIT(137)) while it ran, and again when it ran alone" in out.stdout


def test_a_slurm_request_no_node_can_meet_is_refused_naming_the_key():
    from grpo_sweep.launching.submit import SubmitError, check_partition_fit, parse_sinfo

    sinfo = "debug*|2|20800|(null)\ngpu|64|512000+|gpu:a100:4(S:0-1)\n"
    local = parse_sinfo(sinfo, None)
    assert [(n.cpus, n.mem_mb, n.gpus) for n in local] == [(2, 20800, 0)]
    assert [(n.cpus, n.gpus) for n in parse_sinfo(sinfo, "gpu")] == [(64, 4)]
    for params, message in (
        (
            {"gpus_per_node": 1, "cpus_per_task": 1, "mem_gb": 2},
            "hydra.launcher.gpus_per_node=1: no node of the default partition",
        ),
        ({"gpus_per_node": None, "cpus_per_task": 8, "mem_gb": 2}, "set hydra.launcher.cpus_per_task=2"),
        ({"gpus_per_node": None, "cpus_per_task": 1, "mem_gb": 32}, "set hydra.launcher.mem_gb=20"),
    ):
        with pytest.raises(SubmitError, match=message):
            check_partition_fit(params, local)
    check_partition_fit({"gpus_per_node": None, "cpus_per_task": 1, "mem_gb": 2}, local)
    check_partition_fit(
        {"gpus_per_node": 1, "cpus_per_task": 8, "mem_gb": 64, "partition": "gpu"}, parse_sinfo(sinfo, "gpu")
    )
    check_partition_fit({"gpus_per_node": 8}, [])  # sinfo did not answer: sbatch decides


def test_a_launcher_on_the_command_line_of_a_single_run_asks_for_m(tmp_path):
    """Hydra starts a launcher only for -m: `python launch.py hydra/launcher=slurm ...` would train here."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), "hydra/launcher=slurm", "distributed=ddp", f"output_root={tmp_path}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == (
        "grpo-sweep: hydra/launcher=slurm starts the runs of a sweep (-m); add -m to run this one there "
        "(python launch.py -m hydra/launcher=slurm ...), or drop hydra/launcher to train it here"
    )
    assert not list(tmp_path.glob("grpo/runs/*/metrics.jsonl"))


def test_a_multi_process_run_on_a_gpu_pool_is_refused_before_any_worker_starts(tmp_path):
    """The pool pins each worker to one GPU (here two stand-in GPU ids): a DDP run's processes would share it."""
    out = launch_here(
        ["-m", "hydra/launcher=pool", "distributed=ddp", "distributed.nproc_per_node=2"],
        tmp_path,
        {"CUDA_VISIBLE_DEVICES": "0,1"},
    )
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert "distributed=ddp with hydra/launcher=pool: the pool pins each worker to one GPU" in last, out.stderr[-2000:]
    assert last.endswith("no run was started") and not list(tmp_path.glob("**/metrics.jsonl"))
