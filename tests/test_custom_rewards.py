"""A user's own reward: it plugs in (alone, with params, with a column mapped), or it is refused before training
with one line naming the reward, the column it needs and the columns the data has."""

from __future__ import annotations

import json

import pytest

from grpo_sweep.data import DataError, load_splits, precheck_files
from grpo_sweep.data.arithmetic import ARITHMETIC_COLUMNS, arithmetic_splits
from grpo_sweep.rewards import REWARDS, Needs, required_columns
from grpo_sweep.rewards import needs as needs_of
from grpo_sweep.rewards.mix import build_mix, data_columns, describe_mix, needs_ground_truth
from grpo_sweep.run.validate import ConfigError, validate

from . import reward_plugins
from .conftest import FAST, ROOT, compose, launch_here, run_launch

PLUGINS = "tests.reward_plugins"


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# GSM8K's own layout: the worked solution, then "#### <number>" (with thousands commas).
GSM8K_ROWS = [
    {"question": f"Tom has {i} boxes of 1,000 pens. How many pens?", "answer": f"{i} * 1000 = {i}000\n#### {i},000"}
    for i in range(1, 21)
]


def gsm8k_file(tmp_path):
    return write_jsonl(tmp_path / "gsm8k.jsonl", GSM8K_ROWS)


def gsm8k_overrides(path):
    return [
        "data=file",
        f"data.path={path}",
        "data.prompt_column=question",
        "data.ground_truth_column=answer",
        "data.ground_truth_after='####'",
        "data.validation_size=0.25",
        "data.test_size=0.25",
    ]


# --- what a reward needs is read off its signature ----------------------------------------------------------


def test_required_columns_skip_what_trl_passes_defaults_and_bound_params():
    def f(prompts, completions, answer, completion_ids, trainer_state, log_extra, log_metric, unit="cm", *a, **kw):
        return []

    def g(completions, answer, tolerance, **kw):
        return []

    assert required_columns(f) == ["answer"]
    assert required_columns(g) == ["answer", "tolerance"]
    assert required_columns(g, bound={"tolerance"}) == ["answer"]


def test_builtins_needs_come_from_the_same_inspection():
    assert {name for name, fn in REWARDS.items() if "ground_truth" in required_columns(fn)} == {"correct", "boxed"}
    assert required_columns(REWARDS["correct"]) == ["ground_truth"]
    assert required_columns(REWARDS["length"]) == []  # max_completion_length has a default (and is bound)


def test_mix_needs_name_the_reward_and_count_weight_zero_terms():
    mix = {
        "xmlcount": {"weight": 1.0},
        "correct": {"weight": 0.0},
        "mine": {"fn": f"{PLUGINS}.needs_answer", "weight": 0.5},
    }
    needs = data_columns(mix)
    assert set(needs) == {"ground_truth", "answer"}
    assert needs["ground_truth"].reward == "reward_mix.correct"
    assert needs["answer"].reward == f"reward_mix.mine ({PLUGINS}.needs_answer)"
    assert needs_ground_truth(mix)
    assert not needs_ground_truth({"xmlcount": {}})


def test_a_param_bound_by_the_mix_is_not_a_column():
    mix = {"mine": {"fn": f"{PLUGINS}.needs_answer", "params": {"answer": ["4"]}}}
    assert data_columns(mix) == {}


def test_code_reward_needs_the_column_its_params_name():
    needs = data_columns({"code": {"params": {"tests_column": "test_list"}}})
    assert list(needs) == ["test_list"]
    assert needs_of(REWARDS["code"]) == Needs(column_params={"tests_column": "tests"}, sandbox=True)
    # its ground_truth is in its signature; the tag it reads its answer from must be one the prompt asks for
    assert needs_of(REWARDS["correct"]) == Needs(tag_params=("answer_tag",))


def test_a_custom_reward_declares_what_it_reads_as_the_built_ins_do():
    assert list(data_columns({"mine": {"fn": f"{PLUGINS}.reads_named_column"}})) == ["cases"]
    named = data_columns({"mine": {"fn": f"{PLUGINS}.reads_named_column", "params": {"cases_column": "specs"}}})
    assert list(named) == ["specs"] and named["specs"].param == "cases_column"


def test_a_custom_reward_declares_the_tag_it_pays_for_as_the_built_ins_do():
    """The tag a reward pays for must be one the system prompt asks for: its default, or the one its params name."""
    mine = ["+reward_mix.mine.fn=tests.reward_plugins.ends_with_block"]
    with pytest.raises(
        ConfigError,
        match=r"^reward_mix.mine \(tests.reward_plugins.ends_with_block\) \(weight 1\) "
        r"scores tag <final> \(its default tag=final\), which data.system_prompt never",
    ):
        validate(compose(mine))
    validate(compose([*mine, "+reward_mix.mine.params.tag=answer"]))  # the default prompt asks for <answer>
    validate(compose([*mine, "data.system_prompt='Think, then give <answer></answer> and <final></final>.'"]))
    validate(compose([*mine, "+reward_mix.mine.weight=0"]))  # only logged
    validate(compose([*mine, "data.system_prompt=''"]))  # no system prompt: the data's messages say what to write


# --- refused before training, on the launching machine -----------------------------------------------------


def test_arithmetic_columns_are_what_the_generator_writes():
    rows, _, _ = arithmetic_splits(4, 1, 1, 2, 2, 9, seed=0)
    assert tuple(rows[0]) == ARITHMETIC_COLUMNS


def test_arithmetic_data_is_checked_statically():
    cfg = compose([f"+reward_mix.mine.fn={PLUGINS}.needs_answer"])
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert str(info.value) == (
        f"reward_mix.mine ({PLUGINS}.needs_answer) needs column 'answer', which the train data lacks "
        "(columns: prompt, ground_truth); map a column to it with reward_mix.mine.columns.answer=ground_truth, "
        "or add the column"
    )


def scores_text(text, **kwargs):
    """A reward written for the completions under another name (TRL passes them as ``completions``)."""
    return [float(bool(t)) for t in text]


def test_a_reward_without_completions_is_told_its_signature_not_to_map_a_column():
    fn = f"{__name__}.scores_text"
    with pytest.raises(ConfigError) as info:
        validate(compose(["reward_mix=none", f"+reward_mix.mine.fn={fn}"]))
    assert str(info.value) == (
        f"reward_mix.mine ({fn}): scores_text(text, **kwargs) has no `completions` parameter, so `text` is read as "
        "a dataset column, which the train data lacks (columns: prompt, ground_truth); TRL passes the completions "
        "as `completions` (and prompts, completion_ids, trainer_state and every dataset column, by name): write "
        "scores_text(completions, **kwargs)"
    )
    # mapped to a column, `text` is one the mix means as a column: the column advice stays
    with pytest.raises(
        ConfigError,
        match=r"needs column 'body', which the train data lacks .*; map a column to it "
        r"with reward_mix.mine.columns.text=ground_truth",
    ):
        validate(compose(["reward_mix=none", f"+reward_mix.mine.fn={fn}", "+reward_mix.mine.columns.text=body"]))


def test_file_data_is_checked_from_its_header(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1?", "ground_truth": "2", "topic": "sums"}] * 3)
    cfg = compose(["data=file", f"data.path={path}", f"+reward_mix.mine.fn={PLUGINS}.needs_answer"])
    with pytest.raises(ConfigError, match=r"lacks \(columns: prompt, topic, ground_truth\); map a column"):
        validate(cfg)
    columns = precheck_files(cfg.data, False, {}).columns
    assert columns == ["prompt", "topic", "ground_truth"]


def test_held_out_file_is_checked_too(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", [{"prompt": "a", "ground_truth": "1", "answer": "1"}] * 3)
    held_out = write_jsonl(tmp_path / "test.jsonl", [{"prompt": "a", "ground_truth": "1"}] * 3)
    cfg = compose(
        [
            "data=file",
            f"data.path={train}",
            f"data.test_path={held_out}",
            "reward_mix=none",
            f"+reward_mix.mine.fn={PLUGINS}.needs_answer",
        ]
    )
    with pytest.raises(ConfigError, match="needs column 'answer', which the test data lacks"):
        validate(cfg)


def test_hub_data_is_checked_right_after_loading(monkeypatch):
    """Hub columns are unknown until downloaded: load_splits (train start, before the trainer) refuses."""
    import datasets

    rows = [{"question": f"q{i}", "answer": f"x\n#### {i}"} for i in range(8)]
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: datasets.Dataset.from_list(rows))
    cfg = compose(
        [
            "data=gsm8k",
            "reward_mix=none",
            f"+reward_mix.mine.fn={PLUGINS}.needs_answer",
            f"+reward_mix.book.fn={PLUGINS}.needs_source",
        ]
    )
    validate(cfg)  # hub columns cannot be known on the launching machine
    with pytest.raises(DataError) as info:
        load_splits(cfg.data, need_ground_truth=False, need_columns=data_columns(cfg.reward_mix))
    assert str(info.value) == (
        f"reward_mix.book ({PLUGINS}.needs_source) needs column 'source', which the train data lacks "
        "(columns: prompt, answer, ground_truth, answer_raw); map a column to it with "
        "reward_mix.book.columns.source=ground_truth, or add the column"
    )


def test_a_reward_asking_for_prompt_is_refused_whatever_the_data():
    with pytest.raises(ConfigError, match="needs column 'prompt', which TRL never passes to rewards"):
        validate(compose(["reward_mix=none", f"+reward_mix.mine.fn={PLUGINS}.needs_prompt"]))


def test_launch_refuses_in_one_line_before_training(tmp_path):
    out = run_launch(
        [f"+reward_mix.mine.fn={PLUGINS}.needs_answer", *FAST], tmp_path, timeout=120, env={"PYTHONPATH": str(ROOT)}
    )
    assert out.returncode != 0
    message = (
        f"grpo-sweep: reward_mix.mine ({PLUGINS}.needs_answer) needs column 'answer', which the train data "
        "lacks (columns: prompt, ground_truth)"
    )
    assert out.stderr.startswith(message), out.stderr
    assert out.stderr.strip().count("\n") == 0 and "Traceback" not in out.stderr, out.stderr
    assert not list(tmp_path.glob("**/metrics.jsonl")) and not list(tmp_path.glob("**/.hydra")), "training started"


def test_a_sweep_with_one_job_lacking_a_column_launches_nothing(tmp_path):
    data = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1?", "ground_truth": "2", "answer": "2"}] * 16)
    # the second job's data has no `answer` column: refused before the first job runs
    other = write_jsonl(tmp_path / "e.jsonl", [{"prompt": "1+1?", "ground_truth": "2"}] * 16)
    out = run_launch(
        [
            "-m",
            "data=file",
            f"data.path={data},{other}",
            "reward_mix=none",
            f"+reward_mix.mine.fn={PLUGINS}.needs_answer",
            *FAST,
        ],
        tmp_path,
        timeout=120,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert out.returncode != 0
    assert "grpo-sweep: job 1 (" in out.stderr and "needs column 'answer', which the train data lacks" in out.stderr
    assert not list(tmp_path.glob("**/metrics.jsonl"))


# --- training on only one's own rewards ---------------------------------------------------------------------


def test_reward_mix_none_takes_added_rewards():
    cfg = compose(["reward_mix=none", f"+reward_mix.mine.fn={PLUGINS}.prefix_reward", "+reward_mix.mine.weight=0.5"])
    assert dict(cfg.reward_mix) == {"mine": {"fn": f"{PLUGINS}.prefix_reward", "weight": 0.5}}
    validate(cfg)
    funcs, weights = build_mix(cfg.reward_mix, cfg.trainer)
    assert [f.__name__ for f in funcs] == ["mine"] and weights == [0.5]


def test_dropping_the_default_mixs_weight_zero_term(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1?"}] * 6)  # 4 train rows: a generation's 2 prompts
    base = [
        "data=file",
        f"data.path={path}",
        f"+reward_mix.mine.fn={PLUGINS}.prefix_reward",
        f"trainer.eval.accuracy_reward={PLUGINS}.prefix_reward",
        "reward_mix.correct.weight=0",
    ]
    with pytest.raises(
        ConfigError, match=r"reward_mix.correct needs a ground truth; .* ~reward_mix.correct \(weight 0"
    ):
        validate(compose(base))
    cfg = compose([*base, "~reward_mix.correct"])
    validate(cfg)
    assert list(cfg.reward_mix) == ["xmlcount", "mine"]


def test_val_accuracy_on_data_without_ground_truth(tmp_path):
    """val_accuracy needs trainer.eval.accuracy_reward's columns: refused while it is the objective."""
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "1+1?"}] * 6)
    base = ["data=file", f"data.path={path}", "reward_mix=none", f"+reward_mix.mine.fn={PLUGINS}.prefix_reward"]
    with pytest.raises(ConfigError, match="optimized_metric=val_rewards.mine"):
        validate(compose(base))
    validate(compose([*base, "optimized_metric=val_rewards.mine"]))  # val_accuracy is then None
    validate(compose([*base, f"trainer.eval.accuracy_reward={PLUGINS}.prefix_reward"]))
    with pytest.raises(ConfigError, match="accuracy_reward=tests.reward_plugins.needs_answer needs column 'answer'"):
        validate(
            compose(
                [*base, "optimized_metric=val_rewards.mine", f"trainer.eval.accuracy_reward={PLUGINS}.needs_answer"]
            )
        )


def test_a_column_mapping_feeds_a_reward_written_for_another_column():
    cfg = compose(
        [
            "reward_mix=none",
            f"+reward_mix.mine.fn={PLUGINS}.needs_answer",
            "+reward_mix.mine.columns.answer=ground_truth",
        ]
    )
    validate(cfg)
    [fn], _ = build_mix(cfg.reward_mix, cfg.trainer)
    scores = fn(prompts=[[]] * 2, completions=[[{"role": "assistant", "content": "4"}]] * 2, ground_truth=["4", "5"])
    assert scores == [1.0, 0.0]


def test_describe_mix_names_weights_sources_params_and_columns():
    cfg = compose(
        [
            f"+reward_mix.units.fn={PLUGINS}.prefix_reward",
            "+reward_mix.units.weight=0.5",
            "+reward_mix.units.params.prefix=Answer",
            f"+reward_mix.mine.fn={PLUGINS}.needs_answer",
            "+reward_mix.mine.columns.answer=ground_truth",
        ]
    )
    text = describe_mix(cfg.reward_mix)
    lines = text.splitlines()
    assert lines[0] == "reward mix: 4 reward(s), reward = weighted sum"
    assert lines[1].split() == ["xmlcount", "weight", "0", "built-in", "xmlcount", "(logged", "only)"]
    assert lines[2].split() == ["correct", "weight", "1", "built-in", "correct", "reads", "ground_truth"]
    assert lines[3].split() == ["units", "weight", "0.5", f"{PLUGINS}.prefix_reward", "params", "prefix='Answer'"]
    assert lines[4].split() == [
        "mine",
        "weight",
        "1",
        f"{PLUGINS}.needs_answer",
        "columns",
        "answer<-ground_truth",
        "reads",
        "ground_truth",
    ]


# --- data.ground_truth_after and the copied Unsloth GSM8K demo ----------------------------------------------


def test_ground_truth_after_normalises_the_named_column_and_keeps_the_raw_text(tmp_path):
    cfg = compose(gsm8k_overrides(gsm8k_file(tmp_path)))
    for ds in load_splits(cfg.data, need_ground_truth=True):
        assert {"prompt", "ground_truth", "answer", "answer_raw"} <= set(ds.column_names)
        for row in ds:
            number = row["ground_truth"]
            assert row["answer"] == number and number.endswith("000") and "," not in number
            assert row["answer_raw"].endswith(f"#### {number[:-3]},000")
    assert precheck_files(cfg.data, True, {}).columns == ["prompt", "answer", "ground_truth", "answer_raw"]


def test_unsloth_demo_reward_gets_the_number_it_expects(tmp_path, capsys):
    cfg = compose(
        [
            *gsm8k_overrides(gsm8k_file(tmp_path)),
            "reward_mix=none",
            f"+reward_mix.demo.fn={PLUGINS}.correctness_reward_func",
        ]
    )
    validate(cfg)  # `answer` is a column of the file: accepted
    train = load_splits(
        cfg.data, need_ground_truth=needs_ground_truth(cfg.reward_mix), need_columns=data_columns(cfg.reward_mix)
    ).train
    [demo], _ = build_mix(cfg.reward_mix, cfg.trainer)
    rows = train.select(range(4))
    right = [
        [{"role": "assistant", "content": f"<reasoning>\n...\n</reasoning>\n<answer>\n{t}\n</answer>"}]
        for t in rows["ground_truth"]
    ]
    columns = {c: rows[c] for c in rows.column_names if c != "prompt"}
    assert demo(prompts=rows["prompt"], completions=right, **columns) == [2.0] * 4
    # what it would have scored on the raw column: nothing, every time
    columns["answer"] = columns["answer_raw"]
    assert reward_plugins.correctness_reward_func(prompts=rows["prompt"], completions=right, **columns) == [0.0] * 4
    assert "Question:" in capsys.readouterr().out  # the demo's own print, unchanged


def test_custom_only_mix_trains_and_prints_the_mix(tmp_path):
    data = gsm8k_file(tmp_path)
    out = launch_here(
        [
            *gsm8k_overrides(data),
            "reward_mix=none",
            f"+reward_mix.demo.fn={PLUGINS}.correctness_reward_func",
            "+reward_mix.fmt.fn=xmlcount",
            "+reward_mix.fmt.weight=0.5",
            *FAST,
            "trainer.max_steps=2",
            "trainer.save_steps=2",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [summary_file] = list(tmp_path.glob("grpo/runs/*/summary.json"))
    summary = json.loads(summary_file.read_text())
    assert summary["steps"] == 2 and set(summary["test_rewards"]) == {"demo", "fmt"}
    log = out.stdout + out.stderr
    assert "reward mix: 2 reward(s)" in log
    assert f"demo  weight 1  {PLUGINS}.correctness_reward_func  reads answer" in log
