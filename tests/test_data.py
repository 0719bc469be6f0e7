"""Data sources: the built-in arithmetic task and local files, with clear errors for bad data."""
from __future__ import annotations

import json

import pytest

from grpo_sweep.data import DataError, load_splits
from grpo_sweep.data.arithmetic import arithmetic_splits

from .conftest import compose


def test_arithmetic_is_seeded_disjoint_and_correct():
    train, held_out = arithmetic_splits(200, 50, 2, 3, 9, seed=1)
    assert (train, held_out) == arithmetic_splits(200, 50, 2, 3, 9, seed=1)
    assert len(train) == 200 and len(held_out) == 50
    assert not {r["question"] for r in train} & {r["question"] for r in held_out}
    for row in train[:20]:
        expression = row["question"].removeprefix("What is the result of ").removesuffix("?")
        assert str(eval(expression)) == row["ground_truth"]


def test_arithmetic_too_many_rows_is_a_clear_error():
    with pytest.raises(ValueError, match="distinct expressions"):
        arithmetic_splits(500, 10, 2, 2, 2, seed=0)


def test_arithmetic_prompts_are_conversational():
    train, held_out = load_splits(compose().data, need_ground_truth=True)
    assert len(held_out) == 64
    prompt = train[0]["prompt"]
    assert [m["role"] for m in prompt] == ["system", "user"]
    assert "<answer>" in prompt[0]["content"]
    assert train[0]["ground_truth"].lstrip("-").isdigit()


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_file_source_with_gsm8k_style_answers(tmp_path):
    rows = [{"question": f"q{i}", "answer": f"work...\n#### {i},000", "extra": i} for i in range(20)]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = compose([f"data=file", f"data.path={path}", "data.prompt_column=question",
                   "data.ground_truth_column=answer", "data.ground_truth_after='####'", "data.eval_fraction=0.25"])
    train, held_out = load_splits(cfg.data, need_ground_truth=True)
    assert (len(train), len(held_out)) == (15, 5)
    row = train[0]
    assert row["ground_truth"] == f"{row['extra']}000"
    assert "extra" in train.column_names  # other columns reach the rewards
    # the named ground-truth column holds the normalised answer too; the untouched text sits beside it
    assert row["answer"] == row["ground_truth"]
    assert row["answer_raw"] == f"work...\n#### {row['extra']},000"


def test_without_a_marker_the_ground_truth_column_is_left_as_it_is(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"q{i}", "answer": i} for i in range(10)])
    cfg = compose(["data=file", f"data.path={path}", "data.ground_truth_column=answer"])
    train, _ = load_splits(cfg.data, need_ground_truth=True)
    assert "answer_raw" not in train.column_names
    assert [str(a) for a in train["answer"]] == train["ground_truth"]
    assert isinstance(train[0]["answer"], int)


@pytest.mark.parametrize(
    "rows, overrides, message",
    [
        ([{"q": "a", "ground_truth": "1"}], [], "data.prompt_column='prompt' is not a column"),
        ([{"prompt": "a"}] * 4, [], "data.ground_truth_column='ground_truth' is not a column"),
        ([{"prompt": "a", "ground_truth": None}, {"prompt": "b", "ground_truth": "2"}] * 10, [], "10 of 20 train rows have no ground truth"),
    ],
)
def test_bad_files_fail_clearly(tmp_path, rows, overrides, message):
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = compose(["data=file", f"data.path={path}", "data.eval_fraction=0.1", *overrides])
    with pytest.raises(DataError, match=message):
        load_splits(cfg.data, need_ground_truth=True)


def test_missing_file_is_named(tmp_path):
    cfg = compose(["data=file", f"data.path={tmp_path}/nope.jsonl"])
    with pytest.raises(DataError, match="data file not found: .*nope.jsonl"):
        load_splits(cfg.data, need_ground_truth=False)
