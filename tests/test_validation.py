"""Every bad input docs/validation.md's "bad input → message" table lists fails before training, with one line naming
it.

Each case is (id, setup, expected message). ``setup(tmp_path, monkeypatch)`` triggers the error; that
table is these cases.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest
from hydra.errors import ConfigCompositionException

from grpo_sweep.launching.gate import check_one_engine, check_study_engine, check_study_processes
from grpo_sweep.launching.submit import Node, check_partition_fit, check_resources, run_world
from grpo_sweep.rewards.sandbox import SandboxUnavailable
from grpo_sweep.run import validate as validation
from grpo_sweep.run.distributed import check_world
from grpo_sweep.run.resume import ResumeError, check_same_run, remember_config
from grpo_sweep.run.validate import ConfigError, check_machine, validate
from grpo_sweep.search.optuna.storage import check_storage_url

from .conftest import ROOT, compose


def jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def bad(overrides):
    return lambda tmp, mp: validate(compose(overrides))


def on_cpu(overrides):
    def run(tmp, mp):
        mp.setattr(validation, "gpu_available", lambda: False)
        check_machine(compose(overrides))

    return run


def file_data(rows, extra=()):
    def run(tmp, mp):
        path = jsonl(tmp / "d.jsonl", rows)
        validate(compose(["data=file", f"data.path={path}", *extra]))

    return run


def with_packages(present: set[str], gpu: bool, overrides, env=None):
    def run(tmp, mp):
        for key, value in (env or {}).items():
            mp.setenv(key, value)
        real = importlib.util.find_spec
        mp.setattr(
            importlib.util,
            "find_spec",
            lambda name, *a: object() if name in present else (None if name == "unsloth" else real(name, *a)),
        )
        mp.setattr(validation, "gpu_available", lambda: gpu)
        check_machine(compose(overrides))

    return run


def gpus_here(count: int, overrides):
    def run(tmp, mp):
        mp.setattr(validation, "gpu_available", lambda: True)
        mp.setattr(validation, "gpu_count", lambda: count)
        check_machine(compose(overrides))

    return run


def no_sandbox(tmp, mp):
    def unavailable(isolation="namespaces"):
        raise SandboxUnavailable("unshare: unshare failed: Operation not permitted")

    mp.setattr(validation, "check_isolation", unavailable)
    check_machine(compose(["+reward_mix.code.weight=1"]))


def no_sbatch(tmp, mp):
    mp.setattr(shutil, "which", lambda name: None)
    check_resources({}, "slurm")


def slurm_study(tmp, mp):
    from hydra_plugins.grpo_sweep_launcher.launcher import GrpoSlurmLauncher

    check_study_processes(compose(["distributed=ddp"]), GrpoSlurmLauncher())


def taken_dir(tmp, mp):
    remember_config(tmp, compose(["lora.r=16"]))
    check_same_run(tmp, compose(["lora.r=32"]))


def lora_targets_absent(tmp, mp):
    from grpo_sweep.backends import trl_backend as hf

    cfg = compose(["lora.target_modules=[q_proj,nope_proj]"])
    model = hf.load_base_model(cfg.model, hf.model_source(cfg.model, cfg.data))
    hf.apply_lora(model, cfg.lora)


GT = [{"prompt": "1+1?", "ground_truth": "2"}] * 3
CODE = [{**row, "tests": ["assert True"]} for row in GT]
VLLM = ["backend=unsloth", "backend.fast_inference=true"]
DDP2 = ["distributed=ddp", "distributed.nproc_per_node=2"]
SERVER = ["trainer.use_vllm=true", "trainer.vllm_mode=server"]
CASES = [
    # (id, setup, message the error must contain)
    ("unknown group option", lambda t, m: compose(["reward_mix=nope"]), "Could not find 'reward_mix/nope'"),
    ("typo'd key", lambda t, m: compose(["lora.rr=3"]), "Could not override 'lora.rr'."),
    ("wrong type", lambda t, m: compose(["lora.r=sixteen"]), "Error merging override lora.r=sixteen"),
    (
        "num_generations < 2",
        bad(["trainer.num_generations=1"]),
        "trainer.num_generations=1: GRPO compares completions within a group, use >= 2",
    ),
    (
        "num_generations not dividing the batch",
        bad(["trainer.num_generations=3"]),
        "trainer.num_generations=3 must divide the generation batch",
    ),
    (
        "prompt + completion > max_seq_length",
        bad(["trainer.max_completion_length=1000"]),
        "exceeds model.max_seq_length=512",
    ),
    (
        "unknown reward name",
        bad(["+reward_mix.formatt.weight=1"]),
        "unknown reward 'formatt'; built-in rewards are: boxed, code, correct",
    ),
    (
        "reward import path not importable",
        bad(["+reward_mix.mine.fn=no_such_pkg.reward"]),
        "cannot import module 'no_such_pkg'",
    ),
    (
        "reward import path without the function",
        bad(["+reward_mix.mine.fn=tests.reward_plugins.missing"]),
        "has no function 'missing'",
    ),
    (
        "reward signature cannot take TRL's arguments",
        bad(["+reward_mix.mine.fn=tests.reward_plugins.no_kwargs"]),
        "must accept **kwargs",
    ),
    (
        "negative reward weight",
        bad(["reward_mix.xmlcount.weight=-1"]),
        "reward_mix.xmlcount.weight=-1.0: weights must be >= 0",
    ),
    (
        "all-zero reward weights",
        bad(["reward_mix.xmlcount.weight=0", "reward_mix.correct.weight=0"]),
        "every weight is 0",
    ),
    (
        "non-numeric reward weight",
        bad(["reward_mix.xmlcount.weight=high"]),
        "reward_mix.xmlcount.weight='high': must be a number",
    ),
    ("unknown key in a reward term", bad(["+reward_mix.xmlcount.wieght=1"]), "unknown key 'wieght'"),
    (
        "reward weights not matching the rewards",
        bad(["+trainer.args.reward_weights=[1.0]"]),
        "trainer.args.reward_weights=[1.0] does not match the 2 rewards of reward_mix (xmlcount, correct)",
    ),
    ("bad reward_errors mode", bad(["reward_errors=ignore"]), "reward_errors='ignore'; use one of: raise, skip"),
    ("empty dataset", file_data([]), "the train dataset is empty"),
    (
        "data file missing",
        bad(["data=file", "data.path=/nonexistent/train.jsonl"]),
        "data file not found: '/nonexistent/train.jsonl' (data.path)",
    ),
    ("unknown data file format", bad(["data=file", "data.path=/etc/hostname"]), "unknown format ''"),
    (
        "missing prompt column",
        file_data([{"question": "1+1?", "ground_truth": "2"}] * 3),
        "data.prompt_column='prompt' is not a column of the train data; columns: ['question', 'ground_truth']",
    ),
    (
        "missing ground_truth column with a correctness reward",
        file_data([{"prompt": "1+1?"}] * 3),
        "data.ground_truth_column='ground_truth' is not a column of the train data",
    ),
    (
        "null ground_truth rows",
        file_data([*GT, {"prompt": "x", "ground_truth": None}, {"prompt": "y", "ground_truth": ""}]),
        "2 of 5 train rows have no ground truth in column 'ground_truth' (rows 3, 4)",
    ),
    (
        "code reward without its tests column",
        file_data(GT, ["+reward_mix.code.weight=1"]),
        "reward_mix.code needs column 'tests', which the train data lacks",
    ),
    (
        "custom reward needing a column the data lacks",
        bad(["+reward_mix.mine.fn=tests.reward_plugins.needs_answer"]),
        "reward_mix.mine (tests.reward_plugins.needs_answer) needs column 'answer', which the train data lacks "
        "(columns: prompt, ground_truth); map a column to it with reward_mix.mine.columns.answer=ground_truth",
    ),
    (
        "custom reward needing a column a data file lacks",
        file_data(GT, ["reward_mix=none", "+reward_mix.mine.fn=tests.reward_plugins.needs_answer"]),
        "reward_mix.mine (tests.reward_plugins.needs_answer) needs column 'answer', which the train data lacks",
    ),
    (
        "custom reward asking for `prompt`",
        bad(["+reward_mix.mine.fn=tests.reward_plugins.needs_prompt"]),
        "needs column 'prompt', which TRL never passes to rewards (it passes 'prompts')",
    ),
    (
        "weight-0 reward needing a ground truth the data lacks",
        file_data(
            [{"prompt": "1+1?"}] * 3,
            ["+reward_mix.mine.fn=tests.reward_plugins.prefix_reward", "reward_mix.correct.weight=0"],
        ),
        "but reward_mix.correct needs a ground truth; set data.ground_truth_column to the column that holds the "
        "answers, or drop it with ~reward_mix.correct (weight 0: it is only logged)",
    ),
    (
        "empty reward mix",
        bad(["reward_mix=none"]),
        "reward_mix is empty; pick one of conf/reward_mix/ or add rewards (reward_mix=none "
        "+reward_mix.mine.fn=mypkg.rewards.my_reward)",
    ),
    (
        "bad reward column mapping",
        bad(["+reward_mix.xmlcount.columns=[a]"]),
        "reward_mix.xmlcount.columns=['a']: give parameter: column pairs",
    ),
    (
        "reward factory not importable",
        bad(["+reward_mix.overlong.factory=trl.rewards.get_overlong"]),
        "reward_mix.overlong.factory=trl.rewards.get_overlong: module 'trl.rewards' has no function 'get_overlong'",
    ),
    (
        "reward factory missing an argument",
        bad(
            [
                "+reward_mix.overlong.factory=trl.rewards.get_soft_overlong_punishment",
                "+reward_mix.overlong.factory_args.max_completion_len=256",
            ]
        ),
        "reward_mix.overlong.factory=trl.rewards.get_soft_overlong_punishment: missing a required argument: "
        "'soft_punish_cache'",
    ),
    (
        "reward factory not returning a reward",
        bad(["+reward_mix.mine.factory=builtins.dict"]),
        "reward_mix.mine.factory=builtins.dict returned dict {}, not a reward function",
    ),
    (
        "reward term with both fn and factory",
        bad(
            [
                "+reward_mix.mine.fn=tests.reward_plugins.prefix_reward",
                "+reward_mix.mine.factory=trl.rewards.get_repetition_penalty_reward",
            ]
        ),
        "reward_mix.mine: give fn (the reward) or factory (a function that returns the reward), not both",
    ),
    (
        "a reward's tags the system prompt never asks for",
        bad(["reward_mix=unsloth_gsm8k"]),
        "reward_mix.xmlcount (weight 0.5) scores tag <reasoning> (params.think_tag=reasoning), which "
        "data.system_prompt never mentions, so a model that follows the prompt cannot earn it; set "
        "data.system_prompt to one that asks for <reasoning>, or reward_mix.xmlcount.params.think_tag to the "
        "prompt's tag",
    ),
    (
        "an answer tag the system prompt never asks for",
        bad(["reward_mix=correct", "+reward_mix.correct.params.answer_tag=result"]),
        "reward_mix.correct (weight 1) scores tag <result> (params.answer_tag=result), which data.system_prompt "
        "never mentions",
    ),
    (
        "accuracy reward unknown",
        bad(["trainer.eval.accuracy_reward=corect"]),
        "trainer.eval.accuracy_reward='corect': unknown reward 'corect'",
    ),
    (
        "val_accuracy without a ground truth to score it",
        file_data(
            [{"prompt": "1+1?"}] * 3, ["reward_mix=none", "+reward_mix.mine.fn=tests.reward_plugins.prefix_reward"]
        ),
        "trainer.eval.accuracy_reward=correct needs column 'ground_truth', which the data lacks (columns: "
        "prompt), so val_accuracy, the optimized_metric, would be None; set data.ground_truth_column, set "
        "trainer.eval.accuracy_reward=tests.reward_plugins.prefix_reward (its validation mean becomes "
        "val_accuracy), or optimized_metric=val_rewards.mine",
    ),
    (
        "a test metric as the objective",
        bad(["optimized_metric=test_accuracy"]),
        "optimized_metric=test_accuracy: the test split only measures, it never chooses (a choice made on it "
        "inflates what it reports); optimize its validation twin, optimized_metric=val_accuracy",
    ),
    (
        "a report choice that does not exist",
        bad(["trainer.eval.report=last"]),
        "trainer.eval.report='last'; use one of: best, final",
    ),
    (
        "negative periodic evaluation interval",
        bad(["trainer.eval.every_steps=-5"]),
        "trainer.eval.every_steps=-5: must be >= 0",
    ),
    ("negative pass@k sample count", bad(["trainer.eval.k=-1"]), "trainer.eval.k=-1: must be >= 0"),
    (
        "pass@k samples at temperature 0",
        bad(["trainer.eval.temperature=0"]),
        "trainer.eval.temperature=0.0 with trainer.eval.k=4: k samples at temperature 0 are k copies of the "
        "greedy answer",
    ),
    (
        "best.* objective the evaluation does not measure",
        bad(["optimized_metric=best.reward"]),
        "optimized_metric=best.reward: the best step is chosen among the validation evaluations",
    ),
    ("unknown data source", bad(["data.source=s3"]), "data.source='s3'; use one of: arithmetic, hub, file"),
    ("lora.r <= 0", bad(["lora.r=0"]), "lora.r=0: LoRA rank must be > 0"),
    (
        "LoRA target modules absent from the model",
        lora_targets_absent,
        "lora.target_modules: ['nope_proj'] not in the model; its linear modules are ['down_proj', 'gate_proj', "
        "'k_proj'",
    ),
    ("learning rate <= 0", bad(["optimizer.learning_rate=0"]), "optimizer.learning_rate=0.0: must be > 0"),
    ("max_steps <= 0", bad(["trainer.max_steps=0"]), "trainer.max_steps=0: must be > 0"),
    (
        "unknown model dtype",
        bad(["model.dtype=fp8"]),
        "model.dtype='fp8'; use one of: auto, float32, bfloat16, float16",
    ),
    (
        "a tiny model's warm start setting out of range",
        bad(
            [
                "model.tiny.warm_start.steps=100",
                "model.tiny.warm_start.decay_steps=0",
                "model.tiny.warm_start.teacher_slip=1.5",
            ]
        ),
        "model.tiny.warm_start.teacher_slip=1.5; need 0..1",
    ),
    (
        "bf16 weights on a CPU-only machine",
        on_cpu(["model.dtype=bfloat16"]),
        "model.dtype=bfloat16 needs a GPU and this machine has no GPU",
    ),
    ("fp16 weights on a CPU-only machine", on_cpu(["model.dtype=float16"]), "model.dtype=float16 needs a GPU"),
    ("bf16 training on a CPU-only machine", on_cpu(["trainer.bf16=true"]), "trainer.bf16=true needs a GPU"),
    ("fp16 training on a CPU-only machine", on_cpu(["+trainer.args.fp16=true"]), "trainer.args.fp16=true needs a GPU"),
    ("4-bit on a CPU-only machine", on_cpu(["model.load_in_4bit=true"]), "model.load_in_4bit=true (QLoRA) needs a GPU"),
    (
        "paged optimizer on a CPU-only machine",
        on_cpu(["optimizer.optim=paged_adamw_32bit"]),
        "optimizer.optim=paged_adamw_32bit (paged) needs a GPU",
    ),
    (
        "8-bit optimizer without bitsandbytes",
        with_packages(set(), True, ["optimizer=adamw_8bit"]),
        "optimizer.optim=adamw_8bit needs bitsandbytes, which is not installed",
    ),
    (
        "unsloth backend without its package",
        with_packages(set(), True, ["backend.name=unsloth"]),
        "backend.name=unsloth: the unsloth package is not installed",
    ),
    (
        "unsloth backend without a GPU, its CPU fallback turned off",
        with_packages({"unsloth"}, False, ["backend.name=unsloth"], {"UNSLOTH_DISABLE_CPU_FALLBACK": "1"}),
        "backend.name=unsloth needs a GPU and this machine has no GPU",
    ),
    (
        "code reward where the sandbox cannot be built",
        no_sandbox,
        "reward_mix.code: cannot sandbox generated code with isolation=namespaces here",
    ),
    (
        "code reward with an unknown isolation",
        file_data(CODE, ["+reward_mix.code.weight=1", "+reward_mix.code.params.isolation=none"]),
        "reward_mix.code.params.isolation='none'; use one of: namespaces, rlimits",
    ),
    ("SLURM launcher without sbatch", no_sbatch, "hydra/launcher=slurm: SLURM's sbatch is not on PATH here"),
    (
        "vLLM engine runs on a launcher that trains several in one process",
        lambda t, m: check_one_engine(compose(VLLM), "local", 2),
        "backend=unsloth backend.fast_inference=true starts a vLLM engine that its process cannot free "
        "(vllm-project/vllm#21073), and hydra/launcher=local trains more than one of the sweep's 2 runs in a "
        "process, so the next run there would run out of GPU memory; use hydra/launcher=submitit_local or "
        "hydra/launcher=slurm (a process per run), or set backend.fast_inference=false",
    ),
    (
        "vLLM engine runs in an Optuna study",
        lambda t, m: check_study_engine(compose(VLLM), 20, 1),
        "an Optuna worker trains its trials one after another in one process (hydra.sweeper.n_trials=20, "
        "seeds_per_trial=1)",
    ),
    (
        "Optuna storage: directory cannot be made",
        lambda t, m: check_storage_url(f"sqlite:///{jsonl(t / 'f', [])}/optuna.db"),
        "cannot be opened",
    ),
    (
        "Optuna storage: not an SQLite file",
        lambda t, m: check_storage_url(f"sqlite:///{jsonl(t / 'x.db', [{'a': 1}])}"),
        "cannot be opened: DatabaseError",
    ),
    (
        "Optuna storage: driver/dialect missing",
        lambda t, m: check_storage_url("nosuchdb://user@localhost/optuna"),
        "hydra.sweeper.storage='nosuchdb://user@localhost/optuna' cannot be opened: NoSuchModuleError",
    ),
    (
        "Optuna storage: server unreachable",
        lambda t, m: check_storage_url("postgresql://u:p@127.0.0.1:1/optuna"),
        "hydra.sweeper.storage='postgresql://u:***@127.0.0.1:1/optuna' cannot be opened",
    ),
    (
        "a credential in the config",
        bad(["+trainer.args.hub_token=hf_abcdefgh"]),
        "trainer.args.hub_token=<hidden>: credentials must not go into the config",
    ),
    (
        "a field TRL's GRPOConfig does not have",
        bad(["+trainer.args.scale_reward=batch"]),
        "trainer.args.scale_reward: TRL 1.14.2's GRPOConfig has no such field; did you mean "
        "trainer.args.scale_rewards?",
    ),
    (
        "a GRPOConfig field given the wrong kind of value",
        bad(["+trainer.args.epsilon=high"]),
        "trainer.args.epsilon='high': GRPOConfig's epsilon takes float, not str",
    ),
    (
        "a trainer setting given through trainer.args",
        bad(["+trainer.args.num_generations=4"]),
        "trainer.args.num_generations is set by grpo-sweep from its own config: set trainer.num_generations",
    ),
    (
        "distributed: processes that break the generation batch",
        bad([*DDP2, "trainer.per_device_train_batch_size=6", "trainer.num_generations=8"]),
        "trainer.num_generations=8 must divide the generation batch processes x per_device_train_batch_size x "
        "steps_per_generation = 2 x 6 x 1 = 12",
    ),
    (
        "distributed: several processes with distributed=none",
        bad(["distributed.nproc_per_node=2"]),
        "distributed.nproc_per_node=2 with distributed=none (one process a run): choose distributed=ddp",
    ),
    (
        "distributed: an unknown strategy",
        bad(["distributed.strategy=ddpp"]),
        "distributed.strategy='ddpp'; use one of: none, ddp, zero2",
    ),
    (
        "distributed: Unsloth over several processes",
        bad(["backend=unsloth", *DDP2]),
        "distributed=ddp with backend=unsloth: Unsloth trains on one GPU; use backend=trl",
    ),
    (
        "distributed: one process per GPU on a machine without one",
        on_cpu(["distributed=ddp"]),
        "distributed=ddp with distributed.nproc_per_node=null runs one process per GPU, and this machine has none",
    ),
    (
        "distributed: DeepSpeed on a CPU-only machine",
        on_cpu(["distributed=zero2", "distributed.nproc_per_node=2"]),
        "distributed=zero2 is DeepSpeed, which needs NVIDIA GPUs",
    ),
    (
        "distributed: an Optuna study of multi-process runs on SLURM",
        slurm_study,
        "distributed=ddp in an Optuna study on SLURM: a worker job runs the study's trial loop once per task",
    ),
    (
        "SLURM: several tasks a run with distributed=none",
        lambda t, m: run_world({"tasks_per_node": 2}, "slurm", compose([])),
        "hydra.launcher.tasks_per_node=2, nodes=1: with distributed=none a run is one training process",
    ),
    (
        "SLURM: processes a node that are not its tasks",
        lambda t, m: run_world(
            {"tasks_per_node": 2}, "slurm", compose(["distributed=ddp", "distributed.nproc_per_node=3"])
        ),
        "distributed.nproc_per_node=3 but hydra.launcher.tasks_per_node=2",
    ),
    (
        "SLURM: more processes a node than its GPUs",
        lambda t, m: check_world(compose(["distributed=ddp"]), 16, 2, 4),
        "8 training processes per node but 4 GPUs per node",
    ),
    (
        "SLURM: more nodes than the partition has",
        lambda t, m: check_partition_fit({"nodes": 4, "gpus_per_node": 8}, [Node(64, 512000, 8, 2)]),
        "hydra.launcher.nodes=4: the default partition has 2 node(s)",
    ),
    (
        "vLLM server: its GPUs are not tensor x data parallel",
        bad([*SERVER, "trainer.vllm_server.gpus=2"]),
        "trainer.vllm_server.gpus=2 but tensor_parallel_size x data_parallel_size = 1 x 1",
    ),
    (
        "vLLM server: no GPU left for it",
        lambda t, m: check_world(
            compose(
                ["distributed=ddp", *SERVER, "trainer.vllm_server.gpus=2", "trainer.vllm_server.data_parallel_size=2"]
            ),
            8,
            1,
            8,
        ),
        "8 training processes + 2 vLLM server GPUs per node but 8 GPUs per node",
    ),
    (
        "vLLM server with no GPUs",
        bad([*SERVER, "trainer.vllm_server.gpus=0"]),
        "trainer.vllm_server.gpus=0: must be >= 1 (trainer.vllm_mode=server starts a vLLM server on GPUs of its own)",
    ),
    (
        "a vLLM server flag the run sets itself",
        bad([*SERVER, "trainer.vllm_server.extra_args=['--port=9000']"]),
        "trainer.vllm_server.extra_args has --port=9000, which the run sets itself; remove it",
    ),
    (
        "vLLM server and training on a node with too few GPUs",
        gpus_here(1, SERVER),
        "1 training processes + 1 vLLM server GPUs per node but 1 GPUs per node: each training process needs a "
        "GPU of its own, and the server its own",
    ),
    (
        "FSDP through trainer.args",
        bad(["+trainer.args.fsdp=full_shard"]),
        "trainer.args.fsdp: FSDP splits the weights across the processes, and rank 0 evaluates and saves the "
        "whole model alone; use distributed=ddp or zero2",
    ),
    (
        "bf16 full fine-tune with no float32 master weights",
        bad(["lora=none", "model.dtype=bfloat16"]),
        "model.dtype=bfloat16 with lora=none and distributed=none: a full fine-tune would update the bfloat16 "
        "weights with no float32 master copy, and most small updates round to zero; use model.dtype=float32 "
        "(trainer.bf16=true still computes in bf16) or distributed=zero2",
    ),
    ("output directory of another run", taken_dir, "holds a run started with another config (lora.r: 16 -> 32)"),
]


@pytest.mark.parametrize("name, setup, message", CASES, ids=[c[0] for c in CASES])
def test_bad_input_fails_with_a_message_naming_it(name, setup, message, tmp_path, monkeypatch):
    errors = (ConfigError, ConfigCompositionException, ResumeError, ValueError)
    with pytest.raises(errors) as info:
        setup(tmp_path, monkeypatch)
    text = str(info.value)
    assert message in text, text
    if not isinstance(info.value, ConfigCompositionException):  # Hydra's own errors list the options below
        assert "\n" not in text, text


def test_valid_inputs_pass(tmp_path):
    """A file dataset with the code reward's column, and the code reward: every check passes, and they do look at
    this config (the same config with one value spoiled is refused, naming it)."""
    # 6 rows: 4 to train on after the carved validation and test, a generation's 2 prompts
    cfg = compose(["data=file", f"data.path={jsonl(tmp_path / 'd.jsonl', CODE * 2)}", "+reward_mix.code.weight=0.5"])
    refused = {}
    for check in (validate, check_machine):  # check_machine builds the sandbox for real here
        try:
            check(cfg)
        except ConfigError as exc:
            refused[check.__name__] = str(exc)
    assert refused == {}
    cfg.trainer.num_generations = 1
    with pytest.raises(ConfigError, match="trainer.num_generations=1"):
        validate(cfg)


def launch(args, cwd, env=None):
    return subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def test_a_sweep_with_one_bad_job_launches_nothing(tmp_path):
    out = launch(["-m", "trainer.num_generations=4,3", f"output_root={tmp_path}"], tmp_path)
    assert out.returncode != 0
    assert "grpo-sweep: job 1 (trainer.num_generations=3): trainer.num_generations=3 must divide" in out.stderr
    assert not list(tmp_path.glob("**/metrics.jsonl")), "a job ran although another was invalid"


def test_a_run_into_another_runs_directory_writes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    remember_config(run_dir, compose(["lora.r=16"]))
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    out = launch(["lora.r=32", f"hydra.run.dir={run_dir}", f"output_root={tmp_path}"], tmp_path)
    assert out.returncode != 0
    assert "holds a run started with another config (lora.r: 16 -> 32)" in out.stderr
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before  # not even Hydra's .hydra/


def test_the_docs_table_is_these_cases():
    """docs/validation.md's bad-input table lists exactly CASES, in order, with their messages."""
    page = (ROOT / "docs" / "validation.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ") and line.split("|")[1].strip().isdigit()]
    expected = [f"| {i} | {case_id} | `{message}` |" for i, (case_id, _, message) in enumerate(CASES, 1)]
    assert rows == expected
    assert f"The {len(CASES)} bad inputs covered" in page


def test_a_full_finetune_keeps_float32_master_weights_where_the_optimizer_updates_the_loaded_ones():
    from grpo_sweep.backends.trl_backend import training_dtype

    assert training_dtype(compose(["lora=none", "model.dtype=auto"])) == "float32"  # auto would be bf16 on a GPU
    assert training_dtype(compose(["model.dtype=auto"])) == "auto"  # a LoRA: the base weights are frozen
    assert training_dtype(compose(["lora=none", "model.dtype=auto", "distributed=zero2"])) == "auto"  # DeepSpeed's copy
    # the recipes that fine-tune fully do it through ZeRO-2, which the check lets through
    validation._check_full_finetune_precision(compose(["experiment=qwen7b_server_1node"]))
