"""A reward term can name a factory (TRL's get_soft_overlong_punishment, ...) and the arguments it is called with;
TRL's shipped rewards, plain and made by factories, each train the tiny model."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from grpo_sweep.rewards import RewardError
from grpo_sweep.rewards.mix import build_mix, check_mix, data_columns, describe_mix
from grpo_sweep.run.validate import ConfigError, validate

from .conftest import FAST, ROOT, compose, launch_here, run_launch

OVERLONG = "trl.rewards.get_soft_overlong_punishment"
OVERLONG_ARGS = {"max_completion_len": 12, "soft_punish_cache": 4}


def test_a_factory_term_is_the_reward_its_factory_returns_named_and_guarded_like_any_term():
    funcs, weights = build_mix({"overlong": {"factory": OVERLONG, "factory_args": OVERLONG_ARGS, "weight": 0.5}})
    [fn] = funcs
    assert fn.__name__ == "overlong" and weights == [0.5]  # TRL logs rewards/overlong/mean
    ids = [[1] * 6, [1] * 10, [1] * 20]
    assert fn(prompts=["p"] * 3, completions=["c"] * 3, completion_ids=ids) == [0.0, -0.5, -1.0]
    with pytest.raises(Exception, match="overlong"):  # the guard names the term: a wrong-length list is an error
        fn(prompts=["p"] * 2, completions=["c"] * 2, completion_ids=ids)


def test_each_training_gets_its_own_reward_from_the_factory():
    mix = {"overlong": {"factory": OVERLONG, "factory_args": OVERLONG_ARGS}}
    first, second = (inspect.unwrap(build_mix(mix)[0][0]) for _ in range(2))
    assert type(first).__name__ == "_SoftOverlongPunishment" and first is not second


def test_the_reward_a_factory_returns_has_its_columns_read_off_its_signature():
    cosine = {"factory": "trl.rewards.get_cosine_scaled_reward", "factory_args": {"max_len": 16}}
    assert data_columns({"cos": cosine})["solution"].reward == "reward_mix.cos (trl.rewards.get_cosine_scaled_reward)"
    assert list(data_columns({"cos": {**cosine, "columns": {"solution": "ground_truth"}}})) == ["ground_truth"]
    with pytest.raises(
        ConfigError,
        match=r"^reward_mix.cos \(trl.rewards.get_cosine_scaled_reward\) needs column "
        r"'solution', which the train data lacks",
    ):
        validate(
            compose(
                [
                    "+reward_mix.cos.factory=trl.rewards.get_cosine_scaled_reward",
                    "+reward_mix.cos.factory_args.max_len=16",
                ]
            )
        )


def test_the_mix_shows_the_factory_and_its_arguments():
    text = describe_mix({"overlong": {"factory": OVERLONG, "factory_args": OVERLONG_ARGS}})
    assert f"overlong  weight 1  {OVERLONG}(max_completion_len=12, soft_punish_cache=4)" in text


BAD = [
    (
        {"factory": "trl.rewards.get_soft_overlong", "factory_args": OVERLONG_ARGS},
        "reward_mix.t.factory=trl.rewards.get_soft_overlong: module 'trl.rewards' has no function 'get_soft_overlong'",
    ),
    ({"factory": "no_such_pkg.make"}, "reward_mix.t.factory=no_such_pkg.make: cannot import module 'no_such_pkg'"),
    (
        {"factory": OVERLONG, "factory_args": {"max_completion_len": 12}},
        f"reward_mix.t.factory={OVERLONG}: missing a required argument: 'soft_punish_cache'; it takes "
        "(max_completion_len: int, soft_punish_cache: int), set as +reward_mix.t.factory_args.<argument>=<value>",
    ),
    (
        {"factory": OVERLONG, "factory_args": {**OVERLONG_ARGS, "max_len": 3}},
        f"reward_mix.t.factory={OVERLONG}: got an unexpected keyword argument 'max_len'",
    ),
    (
        {"factory": "builtins.dict", "factory_args": {"a": 1}},
        "reward_mix.t.factory=builtins.dict returned dict {'a': 1}, not a reward function",
    ),
    (
        {"factory": "trl.rewards.think_format_reward"},
        "reward_mix.t.factory=trl.rewards.think_format_reward is a reward itself (it takes completions): "
        "use reward_mix.t.fn=trl.rewards.think_format_reward instead of factory=",
    ),
    (
        {"factory": OVERLONG, "fn": "trl.rewards.think_format_reward"},
        "reward_mix.t: give fn (the reward) or factory (a function that returns the reward), not both",
    ),
    ({"factory_args": OVERLONG_ARGS}, "reward_mix.t.factory_args without reward_mix.t.factory"),
    (
        {"factory": "tests.reward_plugins.make_failing_reward", "factory_args": {"n": 9}},
        "reward_mix.t.factory=tests.reward_plugins.make_failing_reward: calling it with {'n': 9} raised ValueError: "
        "n=9 is too big",
    ),
    (
        {"factory": "tests.reward_plugins.make_positional_reward"},
        "reward_mix.t: the reward 'tests.reward_plugins.make_positional_reward(...)' must accept **kwargs",
    ),
]


@pytest.mark.parametrize("term,message", BAD, ids=[m.split(":")[0][:40] + str(i) for i, (_, m) in enumerate(BAD)])
def test_a_bad_factory_term_is_refused_in_one_line_naming_the_term(term, message):
    with pytest.raises(RewardError) as info:
        check_mix({"t": term})
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


# TRL's shipped rewards, each the only trained reward of a real short run
TRL_REWARDS = {
    "accuracy": ["+reward_mix.t.fn=trl.rewards.accuracy_reward", "+reward_mix.t.columns.solution=ground_truth"],
    "think_format": ["+reward_mix.t.fn=trl.rewards.think_format_reward"],
    "overlong": [
        f"+reward_mix.t.factory={OVERLONG}",
        "+reward_mix.t.factory_args.max_completion_len=12",
        "+reward_mix.t.factory_args.soft_punish_cache=4",
    ],
    "repetition": [
        "+reward_mix.t.factory=trl.rewards.get_repetition_penalty_reward",
        "+reward_mix.t.factory_args.ngram_size=2",
    ],
    "cosine": [
        "+reward_mix.t.factory=trl.rewards.get_cosine_scaled_reward",
        "+reward_mix.t.factory_args.max_len=16",
        "+reward_mix.t.columns.solution=ground_truth",
    ],
}


# each trains the tiny model for real; the factory example runs by default, the others with the slow tests
@pytest.mark.parametrize(
    "name", [name if name == "overlong" else pytest.param(name, marks=pytest.mark.slow) for name in TRL_REWARDS]
)
def test_trl_shipped_reward_trains(name, tmp_path):
    out = launch_here(
        ["reward_mix=none", *TRL_REWARDS[name], *FAST, "trainer.max_steps=2", "trainer.save_steps=2"], tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [summary_file] = list(tmp_path.glob("grpo/runs/*/summary.json"))
    summary = json.loads(summary_file.read_text())
    assert summary["steps"] == 2 and set(summary["test_rewards"]) == {"t"}


def test_launch_refuses_a_bad_factory_path_in_one_line_before_training(tmp_path):
    out = run_launch(
        [
            "+reward_mix.overlong.factory=trl.rewards.get_soft_overlong",
            "+reward_mix.overlong.factory_args.max_completion_len=256",
            *FAST,
        ],
        tmp_path,
        timeout=120,
    )
    assert out.returncode != 0
    assert out.stderr.startswith(
        "grpo-sweep: reward_mix.overlong.factory=trl.rewards.get_soft_overlong: module "
        "'trl.rewards' has no function 'get_soft_overlong'"
    ), out.stderr
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr, out.stderr
    assert not list(tmp_path.glob("**/metrics.jsonl")) and not list(tmp_path.glob("**/.hydra")), "training started"


ALL_OF_THEM = [o.replace("reward_mix.t.", f"reward_mix.{name}.") for name, v in TRL_REWARDS.items() for o in v]


def test_validating_trl_factory_terms_imports_no_torch():
    """The launching machine imports and calls TRL's factories to check them: trl.rewards must stay light there."""
    code = (
        "import sys\n"
        "from tests.conftest import compose\n"
        "from grpo_sweep.run.validate import validate\n"
        f"validate(compose(['reward_mix=none', *{ALL_OF_THEM!r}]))\n"
        "print('HEAVY', [m for m in ('torch', 'transformers', 'unsloth', 'vllm') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
