"""Every config group option composes onto the schema; typos and bad values fail before any training."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from grpo_sweep.config import Config
from grpo_sweep.run.validate import ConfigError, validate

from .conftest import CONF, ROOT, compose

GROUPS = ["model", "lora", "reward_mix", "optimizer", "data", "trainer", "backend", "logger", "experiment", "debug"]
# groups whose options set several other groups by design; every other group's option sets only its own keys
BUNDLES = ["experiment", "debug"]


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("group, option", [(g, o) for g in GROUPS for o in options(g)])
def test_every_option_composes_and_validates(group, option, tmp_path):
    overrides = [f"{group}={option}"]
    if group == "data" and option == "file":
        # 20 rows: 16 to train on after the carved validation and test, a generation's 2 prompts
        (tmp_path / "x.jsonl").write_text('{"prompt": "1+1?", "ground_truth": "2"}\n' * 20)
        overrides.append(f"data.path={tmp_path / 'x.jsonl'}")
    if group == "reward_mix" and option == "none":
        overrides.append("+reward_mix.mine.fn=xmlcount")  # the empty mix is the start of one's own, not a mix
    if group == "trainer" and option == "standard":
        overrides.append("model.max_seq_length=1024")  # the walkthrough's 256 + 768 tokens
    if group == "reward_mix" and option == "unsloth_gsm8k":
        overrides.append(f"data.system_prompt='{REASONING_PROMPT}'")  # its tags: the default prompt asks for <think>
    cfg = compose(overrides)
    validate(cfg)  # config-level checks; what the machine must have is check_machine's, on it
    # and the composed config holds every value the option's file sets (a bundle's at the top level, a group
    # option's under its group), but for what this test overrode
    node = OmegaConf.load(CONF / group / f"{option}.yaml")
    node.pop("defaults", None)
    composed = flat(OmegaConf.to_container(cfg, resolve=False))
    prefix = "" if group in BUNDLES else f"{group}."
    overridden = {o.split("=")[0] for o in overrides[1:]}
    for key, value in flat(OmegaConf.to_container(node, resolve=False)).items():
        if key and not key.startswith("hydra.") and prefix + key not in overridden:
            assert composed.get(prefix + key) == value, (prefix + key, composed.get(prefix + key), value)


# the Unsloth notebook's system prompt, which experiment=gsm8k_qwen0_5b sets for reward_mix=unsloth_gsm8k
REASONING_PROMPT = "Respond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>"


def option_values(group: str, option: str):
    """What conf/<group>/<option>.yaml says: the sibling options of its defaults list, then its own keys."""
    node = OmegaConf.load(CONF / group / f"{option}.yaml")
    defaults = list(node.pop("defaults", []))
    merged = OmegaConf.create()
    for entry in defaults if "_self_" in defaults else [*defaults, "_self_"]:
        if entry == "_self_":
            merged = OmegaConf.merge(merged, node)
        elif isinstance(entry, str):
            # `common/base@_here_`: a shared base file of the group, merged at the group's own level
            merged = OmegaConf.merge(merged, option_values(group, entry.removesuffix("@_here_")))
        elif not all(str(key).startswith("override /") for key in entry):
            # `override /group: option` picks another group's option and adds no values here
            raise AssertionError(f"conf/{group}/{option}.yaml: defaults entry {entry} not understood by this test")
    return merged


def flat(container, prefix: str = "") -> dict:
    if not isinstance(container, dict) or not container:
        return {prefix: container}
    return {
        k: v for key, value in container.items() for k, v in flat(value, f"{prefix}.{key}" if prefix else key).items()
    }


@pytest.mark.parametrize("group, option", [(g, o) for g in GROUPS if g not in BUNDLES for o in options(g)])
def test_choosing_an_option_gives_its_files_values(group, option):
    """`<group>=<option>` alone gives exactly that file's values (the schema adds none): no other group's option,
    nor the main job's experiment=cpu_tiny, writes into this group."""
    expected = OmegaConf.merge(OmegaConf.structured(Config), {group: option_values(group, option)})[group]
    got = OmegaConf.to_container(compose([f"{group}={option}"])[group])
    want = OmegaConf.to_container(expected)
    wrong = {
        key: f"{value!r}, the file says {flat(want).get(key, '(no such key)')!r}"
        for key, value in flat(got).items()
        if flat(want).get(key, object()) != value
    }
    wrong.update({key: "missing" for key in flat(want).keys() - flat(got).keys()})
    assert not wrong, f"{group}={option} gives {wrong}"


def test_the_schema_holds_types_only():
    """Every value comes from conf/: a schema field is unset (MISSING), null, or a nested section."""
    from grpo_sweep.config.schema import TinyModelConfig

    for schema in (Config, TinyModelConfig):  # Config's model.tiny is null until a model file (model=tiny) sets it
        valued = {
            key: value
            for key, value in flat(OmegaConf.to_container(OmegaConf.structured(schema))).items()
            if value not in ("???", None)
        }
        assert not valued, f"defaults in config/schema.py (set them in conf/ instead): {valued}"
    unset = [key for key, value in flat(OmegaConf.to_container(compose().model.tiny)).items() if value == "???"]
    assert not unset, f"conf/model/tiny.yaml leaves model.tiny.{unset} unset"


def test_defaults_are_the_cpu_main_job():
    cfg = compose()
    assert cfg.model.tiny is not None
    assert cfg.trainer.bf16 is False
    assert cfg.trainer.mask_truncated_completions is False
    assert cfg.optimizer.lr_scheduler_type == "constant"
    o = cfg.optimizer
    assert (o.optim, o.learning_rate, o.warmup_steps, o.max_grad_norm, o.weight_decay) == (
        "adamw_torch",
        3e-4,
        0,
        1.0,
        0.0,
    )
    assert (cfg.lora.r, cfg.lora.alpha) == (64, 64)
    assert {k: v["weight"] for k, v in cfg.reward_mix.items()} == {"xmlcount": 0.0, "correct": 1.0}
    assert cfg.model.tiny.warm_start.steps == 600 and cfg.data.arithmetic.max_operands == 2
    assert cfg.optimized_metric == "val_accuracy"
    assert cfg.trainer.max_steps == 120 and cfg.trainer.num_generations == 8 and cfg.data.arithmetic.n_train == 115


# the main job's recipe, conf/experiment/cpu_tiny.yaml: one pick per group
MAIN_JOB = {
    "model": "tiny",
    "data": "arithmetic",
    "reward_mix": "smoke",
    "optimizer": "adamw_constant",
    "lora": "wide",
    "trainer": "cpu_tiny",
}


def test_the_main_job_is_one_experiment_whose_picks_the_command_line_overrides():
    """Plain `python launch.py` is experiment=cpu_tiny, which is its group picks and nothing else; without it the
    groups are their base options, and a group on the command line wins over the recipe's pick."""
    main = compose([])
    assert main == compose(["experiment=cpu_tiny"])
    picks = [f"{group}={option}" for group, option in MAIN_JOB.items()]
    assert main == compose(["~experiment", *picks])
    base = compose(["~experiment"])
    assert (base.trainer.max_steps, base.optimizer.learning_rate, base.lora.r) == (250, 5e-6, 16)
    for group, option in [
        ("trainer", "standard"),
        ("optimizer", "adamw_torch"),
        ("lora", "none"),
        ("reward_mix", "format"),
    ]:
        chosen = compose([f"{group}={option}"])
        assert chosen[group] == compose(["~experiment", f"{group}={option}"])[group], group
        assert all(chosen[g] == main[g] for g in main if g != group), group


def test_a_trainer_option_sets_trainer_values_only_and_the_gpu_experiment_bundles_the_rest():
    """trainer=standard changes no other group; experiment=gpu picks the walkthrough's optimizer and LoRA too, and
    the command line still wins over it."""
    default, standard = compose([]), compose(["trainer=standard"])
    assert standard.trainer.max_completion_length == 768 and standard.trainer.save_steps == 25
    for group in default:
        if group != "trainer":
            assert standard[group] == default[group], group
    cfg = compose(["experiment=gpu"])
    o = cfg.optimizer
    assert (o.optim, o.learning_rate, o.lr_scheduler_type, o.warmup_steps, o.max_grad_norm) == (
        "adamw_torch",
        5e-6,
        "cosine",
        0.1,
        0.1,
    )
    assert (cfg.lora.r, cfg.lora.alpha) == (16, 32) and cfg.trainer == standard.trainer
    cfg = compose(["experiment=gpu", "optimizer=adamw_constant", "lora=wide"])
    assert (cfg.optimizer.learning_rate, cfg.optimizer.lr_scheduler_type, cfg.lora.r) == (3e-4, "constant", 64)


def test_walkthrough_experiment_is_the_walkthrough_setup():
    cfg = compose(["experiment=walkthrough_llama8b"])
    assert cfg.model.name_or_path.endswith("Meta-Llama-3.1-8B-Instruct") and cfg.model.load_in_4bit
    assert cfg.model.max_seq_length == 1024
    assert (cfg.lora.r, cfg.lora.alpha) == (32, 32)
    assert list(cfg.lora.target_modules) == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    o, t = cfg.optimizer, cfg.trainer
    assert (o.optim, o.learning_rate, o.adam_beta1, o.adam_beta2, o.weight_decay) == (
        "paged_adamw_8bit",
        5e-6,
        0.9,
        0.99,
        0.1,
    )
    assert (o.warmup_steps, o.lr_scheduler_type, o.max_grad_norm) == (0.1, "cosine", 0.1)
    assert (t.per_device_train_batch_size, t.num_generations, t.max_prompt_length, t.max_completion_length) == (
        6,
        6,
        256,
        768,
    )
    assert (t.max_steps, t.save_steps) == (250, 250)
    assert cfg.backend.gpu_memory_utilization == 0.6


def test_unsloth_gsm8k_weights():
    mix = compose(["reward_mix=unsloth_gsm8k"]).reward_mix
    assert {k: v.weight for k, v in mix.items()} == {
        "xmlcount": 0.5,
        "soft_format": 0.5,
        "strict_format": 0.5,
        "int": 0.5,
        "correct": 2.0,
    }


@pytest.mark.parametrize("experiment", options("experiment"))
def test_every_experiments_prompt_asks_for_the_tags_its_rewards_score(experiment):
    cfg = compose([f"experiment={experiment}"])
    tags = {
        p.get("think_tag", "think")
        for name, p in ((n, t.get("params") or {}) for n, t in cfg.reward_mix.items())
        if name in ("xmlcount", "format", "soft_format", "strict_format") and cfg.reward_mix[name].weight > 0
    }
    tags |= {"answer"}
    assert all(f"<{tag}>" in cfg.data.system_prompt and f"</{tag}>" in cfg.data.system_prompt for tag in tags), (
        tags,
        cfg.data.system_prompt,
    )
    validate(cfg)


def test_gsm8k_experiment_asks_for_the_unsloth_notebooks_tags():
    cfg = compose(["experiment=gsm8k_qwen0_5b"])
    assert cfg.data.system_prompt == REASONING_PROMPT
    assert {t.get("params", {}).get("think_tag") for t in cfg.reward_mix.values()} >= {"reasoning"}


def test_reward_added_from_the_command_line():
    cfg = compose(["+reward_mix.length.weight=0.1", "+reward_mix.length.params.prefer=short"])
    validate(cfg)
    assert cfg.reward_mix.length.weight == 0.1


def test_lora_rank_override():
    assert compose(["lora.r=16"]).lora.r == 16


@pytest.mark.parametrize(
    "override, error",
    [
        ("lora.rr=3", ConfigCompositionException),  # typo'd key
        ("trainer.num_generation=4", ConfigCompositionException),
        ("lora.r=sixteen", ConfigCompositionException),  # wrong type
        ("reward_mix=nope", ConfigCompositionException),  # unknown option
    ],
)
def test_typos_fail_at_compose_time(override, error):
    with pytest.raises((error, ConfigKeyError, ValidationError)):
        compose([override])


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["trainer.num_generations=1"], "trainer.num_generations=1"),
        (["trainer.num_generations=3"], "must divide the generation batch"),
        (["trainer.max_completion_length=1000"], "exceeds model.max_seq_length=512"),
        (["optimizer.learning_rate=0"], "optimizer.learning_rate=0"),
        (["lora.r=0"], "lora.r=0"),
        (["+reward_mix.formatt.weight=1"], "unknown reward 'formatt'"),
        (["reward_mix.xmlcount.weight=-1"], "weight=-1.0"),
        (["reward_mix.xmlcount.weight=0", "reward_mix.correct.weight=0"], "every weight is 0"),
        (["+reward_mix.mine.fn=no_such_pkg.reward"], "cannot import module 'no_such_pkg'"),
        (["+reward_mix.xmlcount.wieght=1"], "unknown key 'wieght'"),
        (["reward_mix.xmlcount.weight=high"], "weight='high': must be a number"),
    ],
)
def test_validation_messages_name_the_bad_value(overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(compose(overrides))


def test_launch_cfg_job_imports_nothing_heavy():
    """Composing and printing the job config must not import torch/trl/transformers (login nodes)."""
    code = (
        "import sys, runpy; sys.argv=['launch.py', '--cfg', 'job'];\n"
        "try:\n    runpy.run_path('launch.py', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'trl', 'transformers', 'unsloth', 'vllm', 'math_verify') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert "reward_mix:" in out.stdout


# the multi-GPU recipes: (experiment, SLURM launcher profile, training processes, nodes, server GPUs)
RECIPES = [
    ("qwen7b_server_1node", "slurm_8gpu_6tasks", 6, 1, 2),
    ("qwen7b_server_2nodes", "slurm_2x8gpu_4tasks", 8, 2, 4),
]


@pytest.mark.parametrize("experiment, profile, processes, nodes, server", RECIPES)
def test_the_multi_gpu_recipes_fit_their_nodes_and_their_batch(experiment, profile, processes, nodes, server):
    """Each recipe with its launcher profile passes the gate's arithmetic (check_world) for the processes, nodes and
    GPUs it is meant for, fills every node's 8 GPUs on rank 0's node, and keeps one global batch across sizes."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from grpo_sweep.configstore import register_configs
    from grpo_sweep.launching.submit import run_world
    from grpo_sweep.run.distributed import check_world, server_gpus

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        full = hydra_compose(
            config_name="config",
            overrides=[f"experiment={experiment}", f"hydra/launcher={profile}"],
            return_hydra_config=True,
        )
    launcher = OmegaConf.to_container(full.hydra.launcher, resolve=False)
    cfg = compose([f"experiment={experiment}"])
    validate(cfg)
    assert (cfg.model.name_or_path, cfg.distributed.strategy, cfg.lora.enabled) == (
        "Qwen/Qwen2.5-7B-Instruct",
        "zero2",
        False,
    )
    assert run_world(launcher, "slurm", cfg) == (processes, nodes, 8)  # what the gate asks the SLURM launcher
    check_world(cfg, processes, nodes, gpus_per_node=8)
    # the same run without SLURM on one node: nproc_per_node processes and the server on that node's 8 GPUs
    assert cfg.distributed.nproc_per_node * nodes == processes
    assert processes // nodes + server_gpus(cfg) == 8 and server_gpus(cfg) == server
    t = cfg.trainer
    assert processes * t.per_device_train_batch_size * t.gradient_accumulation_steps == 384 == 48 * t.num_generations
    assert t.max_steps == 6973 // 48  # one epoch of GSM8K's train split less the 500 validation problems
    # one more training process than the node has GPUs for, beside the server, is refused in one line
    with pytest.raises(
        ValueError,
        match=f"{processes // nodes + 1} training processes \\+ {server} vLLM server GPUs per node but 8 GPUs per node",
    ):
        check_world(cfg, processes + nodes, nodes, gpus_per_node=8)
