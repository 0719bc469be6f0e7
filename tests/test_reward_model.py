"""A reward term can be a sequence-classification reward model (reward_mix.<name>.model=<dir or hub id>): checked on
the launching machine from its files alone, scored like TRL scores a reward model, logged as rewards/<name>/mean,
and a short training against the tiny local reward model (models/tiny_reward.py) raises its mean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_sweep.models.tiny_reward import ensure_reward_model, score_of
from grpo_sweep.rewards import RewardError
from grpo_sweep.rewards.mix import build_mix, check_mix, describe_mix
from grpo_sweep.rewards.reward_model import RewardModel
from grpo_sweep.run.validate import ConfigError, validate

from .conftest import FAST, ROOT, compose, launch_here, run_launch
from .test_gate import assert_one_line_refusal, started_runs
from .test_hub import hub_env, place_in_hub_cache


@pytest.fixture(scope="module")
def rm_dir() -> str:
    return str(ensure_reward_model())


def chat(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


def said(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


QUESTIONS = [
    "What is 2 + 3?",
    "What is the result of 6 * 7?",
    "Calculate 9 - 4",
    "What is 1 + 1?",
    "Say it",
    "What is 8 * 8?",
    "What is 3 - 9?",
]
ANSWERS = [
    "<answer> 5 </answer>",
    "the answer is forty two",
    "5",
    "<think> 1 + 1 = 2 </think> <answer> 2 </answer>",
    "",
    "64 64 64 64 64 64 64 64 64",
    "minus six",
]


def direct_scores(path: str, texts: list[str]) -> list[float]:
    """The model's own forward, one text at a time (no padding)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.no_grad():
        return [model(**tokenizer(t, return_tensors="pt", add_special_tokens=False)).logits[0, 0].item() for t in texts]


def test_scores_are_the_models_forward_on_the_chat_template_text_and_the_known_function(rm_dir):
    from transformers import AutoTokenizer

    prompts, completions = [chat(q) for q in QUESTIONS], [said(a) for a in ANSWERS]
    scores = RewardModel(rm_dir)(prompts, completions)
    tokenizer = AutoTokenizer.from_pretrained(rm_dir)
    texts = [tokenizer.apply_chat_template(p + c, tokenize=False) for p, c in zip(prompts, completions)]
    assert scores == pytest.approx(direct_scores(rm_dir, texts), abs=1e-5)
    digits = set("0123456789")
    for text, score in zip(texts, scores):  # the tiny reward model's closed form: the share of digit tokens
        tokens = tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"])
        assert score == pytest.approx(score_of(sum(t in digits for t in tokens) / len(tokens)), abs=1e-4)
    assert scores[5] > scores[0] > scores[1]  # digits pay


def test_plain_text_prompts_are_joined_with_the_completion(rm_dir):
    prompts, completions = ["What is 2 + 3? ", "Say it "], ["5 5 5", "five"]
    assert RewardModel(rm_dir)(prompts, completions) == pytest.approx(
        direct_scores(rm_dir, ["What is 2 + 3? 5 5 5", "Say it five"]), abs=1e-5
    )


@pytest.mark.parametrize("batch_size", [1, 2, 3])
def test_smaller_batches_give_the_same_scores(rm_dir, batch_size):
    prompts, completions = [chat(q) for q in QUESTIONS], [said(a) for a in ANSWERS]
    whole = RewardModel(rm_dir, batch_size=len(prompts))(prompts, completions)
    assert RewardModel(rm_dir, batch_size=batch_size)(prompts, completions) == pytest.approx(whole, abs=1e-5)


def test_max_length_keeps_the_end_of_the_text(rm_dir):
    from transformers import AutoTokenizer

    prompts, completions = [chat(q) for q in QUESTIONS], [said(a) for a in ANSWERS]
    scorer = RewardModel(rm_dir, max_length=8)
    scores = scorer(prompts, completions)
    tokenizer = AutoTokenizer.from_pretrained(rm_dir)
    tails = [
        tokenizer.decode(tokenizer(t, add_special_tokens=False)["input_ids"][-8:])
        for t in scorer.texts(prompts, completions)
    ]
    assert scores == pytest.approx(direct_scores(rm_dir, tails), abs=1e-5)


def test_the_model_goes_on_the_training_device_unless_one_is_named(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert RewardModel("m").device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)  # this process's GPU in a multi-GPU run
    assert RewardModel("m").device() == torch.device("cuda", 3)
    assert RewardModel("m", device="cpu").device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert RewardModel("m", device="cuda:1").device() == torch.device("cuda", 1)
    with pytest.raises(RewardError, match=r"^reward_mix.rm.model_args.device='cuda:2': this machine has 2 GPU\(s\)"):
        RewardModel("m", device="cuda:2", term="rm").device()
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert RewardModel("m").dtype(torch.device("cuda", 3)) == torch.bfloat16  # auto: the policy's rule
    assert RewardModel("m").dtype(torch.device("cpu")) == torch.float32
    assert RewardModel("m", dtype="float16").dtype(torch.device("cpu")) == torch.float16


def test_a_gpu_named_for_the_reward_model_on_a_machine_without_one_is_refused_where_it_trains(rm_dir, monkeypatch):
    from grpo_sweep.run import validate as validation

    cfg = compose([*FAST, f"+reward_mix.rm.model={rm_dir}", "+reward_mix.rm.model_args.device=cuda:1"])
    monkeypatch.setattr(validation, "gpu_available", lambda: False)
    with pytest.raises(
        ConfigError,
        match=r"^reward_mix.rm.model_args.device=cuda:1: this machine has no GPU; use "
        r"auto \(the training device\) or cpu$",
    ):
        validation.check_machine(cfg)
    validate(cfg)  # the launching machine (a login node) need not have the GPU


def test_it_loads_on_the_first_call_in_eval_mode_without_grad(rm_dir):
    scorer = RewardModel(rm_dir, device="cpu", dtype="bfloat16")
    assert scorer.model is None  # making the term loads nothing
    scorer([chat("hi")], [said("1")])
    assert not scorer.model.training and scorer.model.dtype.is_floating_point
    assert str(scorer.model.dtype) == "torch.bfloat16" and scorer.model.device.type == "cpu"
    assert not any(p.requires_grad for p in scorer.model.parameters())


def test_a_model_term_is_named_guarded_and_timed_like_any_term(rm_dir):
    funcs, weights = build_mix({"rm": {"model": rm_dir, "weight": 0.5, "model_args": {"batch_size": 2}}})
    [fn] = funcs
    assert fn.__name__ == "rm" and weights == [0.5]  # TRL logs rewards/rm/mean
    scores = fn(
        prompts=[chat(q) for q in QUESTIONS[:3]], completions=[said(a) for a in ANSWERS[:3]], trainer_state=object()
    )
    assert scores == pytest.approx(
        RewardModel(rm_dir)([chat(q) for q in QUESTIONS[:3]], [said(a) for a in ANSWERS[:3]]), abs=1e-6
    )
    assert fn.calls == 1 and fn.seconds > 0  # summary.json's reward_cost reads these
    assert f"rm  weight 0.5  reward model {rm_dir}(batch_size=2)" in describe_mix(
        {"rm": {"model": rm_dir, "weight": 0.5, "model_args": {"batch_size": 2}}}
    )


def bad_terms(tmp: Path, rm_dir: str, policy_dir: str) -> list[tuple[dict, str]]:
    empty = tmp / "empty"
    empty.mkdir(exist_ok=True)
    two = tmp / "two_labels"
    two.mkdir(exist_ok=True)
    (two / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "NEG", "1": "POS"}})
    )
    return [
        ({"model": "/no/such/reward-model"}, "reward_mix.rm.model='/no/such/reward-model': no such directory"),
        ({"model": str(empty)}, f"reward_mix.rm.model={str(empty)!r} has no config.json"),
        (
            {"model": policy_dir},
            f"reward_mix.rm.model={policy_dir!r} is a LlamaForCausalLM, not a sequence-classification reward model",
        ),
        ({"model": str(two)}, f"reward_mix.rm.model={str(two)!r} has 2 labels; a reward model gives one score"),
        (
            {"model": "not a hub id!"},
            "reward_mix.rm.model='not a hub id!' is neither a path on this machine nor a hub id",
        ),
        (
            {"model": rm_dir, "model_args": {"dtype": "float8"}},
            "reward_mix.rm.model_args.dtype='float8'; use one of: auto, float32, bfloat16, float16",
        ),
        ({"model": rm_dir, "model_args": {"device": "gpu1"}}, "reward_mix.rm.model_args.device='gpu1'; use auto"),
        (
            {"model": rm_dir, "model_args": {"batch_size": 0}},
            "reward_mix.rm.model_args.batch_size=0: give a whole number >= 1",
        ),
        ({"model": rm_dir, "model_args": {"max_length": "long"}}, "reward_mix.rm.model_args.max_length='long'"),
        (
            {"model": rm_dir, "model_args": {"tokenizer": "/no/tok"}},
            "reward_mix.rm.model_args.tokenizer='/no/tok': no such directory",
        ),
        (
            {"model": rm_dir, "model_args": {"temperature": 1}},
            "reward_mix.rm.model_args.temperature: unknown option; a reward model takes tokenizer, batch_size, device",
        ),
        (
            {"model": rm_dir, "fn": "correct"},
            "reward_mix.rm: give one of fn (the reward), factory (a function that "
            "returns it) or model (a reward model), not fn and model",
        ),
        ({"model_args": {"batch_size": 2}}, "reward_mix.rm.model_args without reward_mix.rm.model"),
        ({"model": rm_dir, "params": {"unit": "cm"}}, "reward_mix.rm.params: a reward model takes no params"),
        ({"model": 3}, "reward_mix.rm.model=3: give a local directory or a hub id"),
    ]


def test_a_bad_model_term_is_refused_in_one_line_naming_the_term_and_value(rm_dir, tmp_path):
    cfg = compose(FAST)
    from grpo_sweep.backends.trl_backend import model_source

    policy_dir = model_source(cfg.model, cfg.data)
    for term, message in bad_terms(tmp_path, rm_dir, policy_dir):
        with pytest.raises(RewardError) as info:
            check_mix({"rm": term})
        assert str(info.value).startswith(message), (term, str(info.value))
        assert "\n" not in str(info.value)


def test_validation_refuses_a_bad_option_and_launch_refuses_it_before_training(rm_dir, tmp_path):
    with pytest.raises(ConfigError, match=r"^reward_mix.rm.model_args.dtype='fp8'; use one of"):
        validate(compose([f"+reward_mix.rm.model={rm_dir}", "+reward_mix.rm.model_args.dtype=fp8"]))
    out = run_launch(["reward_mix=none", "+reward_mix.rm.model=/no/such/rm", *FAST], tmp_path, timeout=120)
    assert out.returncode != 0
    assert_one_line_refusal(out.stderr, "grpo-sweep: reward_mix.rm.model='/no/such/rm': no such directory")
    assert started_runs(tmp_path) == []


def test_checking_a_model_term_imports_no_torch_and_loads_nothing(rm_dir):
    code = (
        "import sys\n"
        "from tests.conftest import compose\n"
        "from grpo_sweep.run.validate import validate\n"
        "from grpo_sweep.rewards.mix import describe_mix\n"
        "from grpo_sweep.launching.hub import reward_model_ids\n"
        f"cfg = compose(['reward_mix=none', '+reward_mix.rm.model={rm_dir}', '+reward_mix.rm.model_args.batch_size=4',"
        " '+reward_mix.hub.model=org/some-reward-model', '+reward_mix.hub.weight=0'])\n"
        "validate(cfg)\n"
        "print(describe_mix(cfg.reward_mix))\n"
        "print('HUB', reward_model_ids(cfg))\n"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'trl', 'safetensors') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert "HUB [('reward_mix.hub.model', 'org/some-reward-model')]" in out.stdout  # the local one is not fetched


def test_a_hub_reward_model_neither_cached_nor_reachable_is_one_line_naming_the_term(tmp_path):
    out = run_launch(
        ["+reward_mix.rm.model=org/some-reward-model", *FAST], tmp_path, timeout=120, env=hub_env(tmp_path)
    )
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_refusal(
        out.stderr,
        (
            "grpo-sweep: reward_mix.rm.model='org/some-reward-model' is not in the HF cache and the hub cannot be "
            "reached from this machine: run this launch once on a machine that reaches the hub (it fetches "
            "'org/some-reward-model' into the HF cache the nodes share, $HF_HOME), or use reward_mix.rm.model=<local "
            "dir>"
        ),
    )
    assert started_runs(tmp_path) == []


# a training subprocess (~15 s): resolving a hub id from the HF cache is test_hub.py's policy run and the refusal
# from the cached config below; a reward model training is the test of its mean
@pytest.mark.slow
def test_a_hub_reward_model_in_the_hf_cache_trains_with_the_hub_out_of_reach(rm_dir, tmp_path):
    place_in_hub_cache(Path(rm_dir), tmp_path / "hf", "grpo-sweep-test/tiny-rm")
    out = run_launch(
        [
            "reward_mix=none",
            "+reward_mix.rm.model=grpo-sweep-test/tiny-rm",
            *FAST,
            "trainer.max_steps=2",
            "trainer.save_steps=2",
        ],
        tmp_path,
        timeout=300,
        env=hub_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [summary] = [json.loads(p.read_text()) for p in tmp_path.glob("grpo/runs/*/summary.json")]
    assert set(summary["test_rewards"]) == {"rm"} and summary["reward_cost"]["rm"]["calls"] == 2


def test_a_hub_model_that_is_no_reward_model_is_refused_from_its_cached_config(tmp_path):
    from grpo_sweep.backends.trl_backend import model_source

    cfg = compose(FAST)
    place_in_hub_cache(Path(model_source(cfg.model, cfg.data)), tmp_path / "hf", "grpo-sweep-test/tiny-llama")
    out = run_launch(
        ["+reward_mix.rm.model=grpo-sweep-test/tiny-llama", *FAST], tmp_path, timeout=120, env=hub_env(tmp_path)
    )
    assert out.returncode == 1, out.stderr[-3000:]
    assert_one_line_refusal(
        out.stderr,
        "grpo-sweep: reward_mix.rm.model='grpo-sweep-test/tiny-llama' is a "
        "LlamaForCausalLM, not a sequence-classification reward model "
        "(*ForSequenceClassification)",
    )
    assert started_runs(tmp_path) == []


def test_a_reward_model_tokenizer_without_a_chat_template_is_named_on_chat_prompts(rm_dir, tmp_path):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(rm_dir, bare)
    config = json.loads((bare / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config))
    for extra in bare.glob("chat_template.*"):
        extra.unlink()
    [fn], _ = build_mix({"rm": {"model": str(bare)}})
    assert fn(prompts=["2 + 3 = "], completions=["5"]) == pytest.approx(direct_scores(rm_dir, ["2 + 3 = 5"]), abs=1e-5)
    with pytest.raises(
        Exception,
        match=r"reward 'rm' raised RewardError: the reward model's tokenizer \(.*bare\) has "
        r"no chat template, but the prompts are conversational",
    ):
        fn(prompts=[chat("2 + 3?")], completions=[said("5")])


def test_training_with_the_reward_model_as_the_only_reward_raises_its_mean(rm_dir, tmp_path):
    # the random tiny model at a high learning rate: it learns to write digits, which the reward model pays for,
    # within 20 steps (seeds 1-3 rose from ~0.03 to 0.13-0.23)
    out = launch_here(
        [
            "reward_mix=none",
            f"+reward_mix.rm.model={rm_dir}",
            *FAST,
            "trainer.max_steps=20",
            "trainer.save_steps=20",
            "optimizer.learning_rate=1e-2",
            "trainer.eval.every_steps=0",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [run_dir] = [p.parent for p in tmp_path.glob("grpo/runs/*/summary.json")]
    means = [
        row["rewards/rm/mean"]
        for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
        if "rewards/rm/mean" in row
    ]
    assert len(means) == 20
    first, last = sum(means[:5]) / 5, sum(means[-5:]) / 5
    assert last > first + 0.03, means
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["test_rewards"]) == {"rm"} and summary["reward_cost"]["rm"]["calls"] == 20


def test_a_sharded_model_is_taken_with_all_its_shards_and_refused_without_one(rm_dir, tmp_path):
    """from_pretrained's other layouts, read from the files alone: an index and its shards (the policy's reader
    too), a PEFT adapter as the policy."""
    import shutil

    from grpo_sweep.models import check_local_model

    sharded = tmp_path / "sharded"
    shutil.copytree(rm_dir, sharded)
    (sharded / "model.safetensors").rename(sharded / "model-00001-of-00001.safetensors")
    (sharded / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {"score.weight": "model-00001-of-00001.safetensors"}})
    )
    check_mix({"rm": {"model": str(sharded)}})
    partial = tmp_path / "partial"  # another directory: a term's check is made once per process
    shutil.copytree(sharded, partial)
    (partial / "model-00001-of-00001.safetensors").unlink()
    with pytest.raises(
        RewardError,
        match=r"its model.safetensors.index.json names 1 shard\(s\) that are not there "
        r"\(model-00001-of-00001.safetensors, ...\): copy the whole directory$",
    ):
        check_mix({"rm": {"model": str(partial)}})

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "org/base"}))
    check_local_model("model.name_or_path", str(adapter))
    cfg = compose(FAST)
    from grpo_sweep.backends.trl_backend import model_source

    check_local_model("model.name_or_path", model_source(cfg.model, cfg.data))  # the tiny policy itself
