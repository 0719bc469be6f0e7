"""Data sources: the built-in arithmetic task, hub data and local files or directories, each in three disjoint
splits (train / validation / test), with clear errors for bad data."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grpo_sweep.data import DataError, Splits, held_out_questions, load_splits, precheck_files
from grpo_sweep.data.arithmetic import arithmetic_splits
from grpo_sweep.run.validate import ConfigError, validate

from .conftest import ROOT, compose


def questions(ds) -> set[str]:
    return {p[-1]["content"] for p in ds["prompt"]}


# --- the built-in task ----------------------------------------------------------------------------------------


def test_arithmetic_is_seeded_disjoint_and_correct():
    train, validation, test = arithmetic_splits(200, 40, 50, 2, 3, 9, seed=1)
    assert (train, validation, test) == arithmetic_splits(200, 40, 50, 2, 3, 9, seed=1)
    assert (len(train), len(validation), len(test)) == (200, 40, 50)
    sets = [{r["question"] for r in rows} for rows in (train, validation, test)]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    for row in train[:20] + validation[:5] + test[:5]:
        expression = row["question"].removeprefix("What is the result of ").removesuffix("?")
        assert str(eval(expression)) == row["ground_truth"]
    assert arithmetic_splits(200, 40, 50, 2, 3, 9, seed=2)[2] != test


def test_arithmetic_test_set_does_not_move_with_the_other_sizes():
    test = arithmetic_splits(115, 64, 64, 2, 2, 9, seed=0)[2]
    assert arithmetic_splits(50, 10, 64, 2, 2, 9, seed=0)[2] == test


def test_arithmetic_too_many_rows_is_a_clear_error():
    with pytest.raises(ValueError, match=r"only 12 distinct expressions exist.*n_train \+ n_val \+ n_test = 510"):
        arithmetic_splits(500, 5, 5, 2, 2, 2, seed=0)


def test_the_default_task_is_three_disjoint_splits_of_all_243_questions():
    data = compose().data  # the main job's data, not the tests' small one
    splits = load_splits(data, need_ground_truth=True)
    assert isinstance(splits, Splits) and tuple(map(len, splits)) == (115, 64, 64)
    train, validation, test = map(questions, splits)
    assert len(train | validation | test) == 243 and not (train & validation or train & test or validation & test)
    prompt = splits.train[0]["prompt"]
    assert [m["role"] for m in prompt] == ["system", "user"] and "<answer>" in prompt[0]["content"]
    assert all(t.lstrip("-").isdigit() for t in splits.test["ground_truth"])
    # the warm start must see neither validation nor test questions in chat
    assert set(held_out_questions(data)) == validation | test


def test_the_default_test_questions_are_the_ones_held_out_before_validation_existed():
    # sha256 of the 64 held-out questions (newline-joined, in order) of the single held-out split before this
    # one (n_train=179, n_eval=64, seed 0), so runs before and after report on the same questions
    import hashlib

    test = load_splits(compose().data, need_ground_truth=False).test
    joined = "\n".join(p[-1]["content"] for p in test["prompt"])
    assert hashlib.sha256(joined.encode()).hexdigest()[:16] == "21e758f8d44f4252"


def test_sample_limits_apply_per_split():
    splits = load_splits(
        compose(["data.max_train_samples=5", "data.max_val_samples=3", "data.max_test_samples=2"]).data,
        need_ground_truth=True,
    )
    assert tuple(map(len, splits)) == (5, 3, 2)


# --- local data: files, fractions, directories ------------------------------------------------------------------


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def numbered(n, start=0):
    return [{"prompt": f"q{i}", "ground_truth": str(i)} for i in range(start, start + n)]


def file_cfg(path, *overrides):
    return compose(["data=file", f"data.path={path}", *overrides]).data


def sizes(splits):
    return tuple(map(len, splits))


def test_file_source_with_gsm8k_style_answers(tmp_path):
    rows = [{"question": f"q{i}", "answer": f"work...\n#### {i},000", "extra": i} for i in range(20)]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = file_cfg(
        path,
        "data.prompt_column=question",
        "data.ground_truth_column=answer",
        "data.ground_truth_after='####'",
        "data.validation_size=0.25",
        "data.test_size=0.25",
    )
    splits = load_splits(cfg, need_ground_truth=True)
    assert sizes(splits) == (10, 5, 5)
    for ds in splits:
        row = ds[0]
        assert row["ground_truth"] == f"{row['extra']}000"
        assert "extra" in ds.column_names  # other columns reach the rewards
        # the named ground-truth column holds the normalised answer too; the untouched text sits beside it
        assert row["answer"] == row["ground_truth"]
        assert row["answer_raw"] == f"work...\n#### {row['extra']},000"


def test_carving_is_seeded_disjoint_and_complete(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(100))
    first = load_splits(file_cfg(path), need_ground_truth=True)
    again = load_splits(file_cfg(path), need_ground_truth=True)
    assert sizes(first) == (80, 10, 10)  # the defaults: 10 % validation, 10 % test
    assert [ds["ground_truth"] for ds in first] == [ds["ground_truth"] for ds in again]
    parts = [set(ds["ground_truth"]) for ds in first]
    assert set.union(*parts) == {str(i) for i in range(100)} and sum(map(len, parts)) == 100
    other = load_splits(file_cfg(path, "data.seed=1"), need_ground_truth=True)
    assert set(other.test["ground_truth"]) != parts[2]
    # test is carved first: another validation size leaves the test rows as they were
    bigger = load_splits(file_cfg(path, "data.validation_size=30"), need_ground_truth=True)
    assert sizes(bigger) == (60, 30, 10) and bigger.test["ground_truth"] == first.test["ground_truth"]


def test_fractions_round_up_so_no_carved_split_is_empty(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", numbered(5))
    assert sizes(load_splits(file_cfg(path), need_ground_truth=True)) == (3, 1, 1)


def test_separate_validation_and_test_files(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", numbered(20))
    val = write_jsonl(tmp_path / "val.jsonl", numbered(4, 100))
    test = write_jsonl(tmp_path / "test.jsonl", numbered(6, 200))
    splits = load_splits(
        file_cfg(train, f"data.validation_path={val}", f"data.test_path={test}"), need_ground_truth=True
    )
    assert sizes(splits) == (20, 4, 6)
    assert splits.validation["ground_truth"] == [str(i) for i in range(100, 104)]  # a given split keeps its order
    # only a test file: validation is carved from train (10 % of 20)
    splits = load_splits(file_cfg(train, f"data.test_path={test}"), need_ground_truth=True)
    assert sizes(splits) == (18, 2, 6) and set(splits.validation["ground_truth"]) < {str(i) for i in range(20)}


def test_a_shard_directory_is_all_its_shards(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    jsonl_dir, parquet_dir = tmp_path / "jsonl", tmp_path / "parquet"
    jsonl_dir.mkdir(), parquet_dir.mkdir()
    for k in range(3):
        write_jsonl(jsonl_dir / f"part-{k:05d}.jsonl", numbered(10, 10 * k))
        pq.write_table(pa.Table.from_pylist(numbered(10, 10 * k)), parquet_dir / f"part-{k:05d}.parquet")
    (jsonl_dir / "_SUCCESS").write_text("")  # what Spark leaves beside its shards
    (parquet_dir / "README.md").write_text("not data")
    for d in (jsonl_dir, parquet_dir):
        splits = load_splits(file_cfg(d), need_ground_truth=True)
        assert sizes(splits) == (24, 3, 3)
        assert set().union(*(ds["ground_truth"] for ds in splits)) == {str(i) for i in range(30)}
        assert precheck_files(file_cfg(d), True).columns == ["prompt", "ground_truth"]


def test_a_saved_dataset_is_carved_like_a_file(tmp_path):
    import datasets

    datasets.Dataset.from_list(numbered(40)).save_to_disk(str(tmp_path / "saved"))
    cfg = file_cfg(tmp_path / "saved", "data.validation_size=0.25", "data.test_size=5")
    assert sizes(load_splits(cfg, need_ground_truth=True)) == (25, 10, 5)
    assert precheck_files(cfg, True).columns == ["prompt", "ground_truth"]


def test_a_saved_dataset_dict_gives_its_splits_by_name(tmp_path):
    import datasets

    full = datasets.DatasetDict(
        train=datasets.Dataset.from_list(numbered(30)),
        validation=datasets.Dataset.from_list(numbered(4, 100)),
        test=datasets.Dataset.from_list(numbered(6, 200)),
    )
    full.save_to_disk(str(tmp_path / "full"))
    splits = load_splits(file_cfg(tmp_path / "full"), need_ground_truth=True)
    assert sizes(splits) == (30, 4, 6) and splits.test["ground_truth"] == [str(i) for i in range(200, 206)]
    assert precheck_files(file_cfg(tmp_path / "full"), True).columns == ["prompt", "ground_truth"]

    # no validation split: carved from train; `dev` is taken as the validation split
    datasets.DatasetDict(train=full["train"], test=full["test"]).save_to_disk(str(tmp_path / "no_val"))
    splits = load_splits(file_cfg(tmp_path / "no_val"), need_ground_truth=True)
    assert sizes(splits) == (27, 3, 6) and set(splits.validation["ground_truth"]) < {str(i) for i in range(30)}
    datasets.DatasetDict(train=full["train"], dev=full["validation"]).save_to_disk(str(tmp_path / "dev"))
    assert sizes(load_splits(file_cfg(tmp_path / "dev"), need_ground_truth=True)) == (27, 4, 3)

    # splits under other names are named in config
    datasets.DatasetDict(fit=full["train"], holdout=full["test"], check=full["validation"]).save_to_disk(
        str(tmp_path / "odd")
    )
    cfg = file_cfg(tmp_path / "odd", "data.train_split=fit", "data.validation_split=check", "data.test_split=holdout")
    assert sizes(load_splits(cfg, need_ground_truth=True)) == (30, 4, 6)


def test_hub_validation_is_carved_from_train_and_test_is_the_test_split(monkeypatch):
    """data=gsm8k without the hub: a local dataset stands in for each split load_dataset is asked for."""
    import datasets

    asked = []
    hub = {
        "train": [{"question": f"t{i}", "answer": f"...\n#### {i}"} for i in range(2000)],
        "test": [{"question": f"x{i}", "answer": f"...\n#### {i}"} for i in range(1319)],
    }

    def load_dataset(path, subset, split):
        asked.append((path, subset, split))
        return datasets.Dataset.from_list(hub[split])

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    cfg = compose(["data=gsm8k"]).data
    splits = load_splits(cfg, need_ground_truth=True)
    assert sorted(asked) == [("openai/gsm8k", "main", "test"), ("openai/gsm8k", "main", "train")]
    assert sizes(splits) == (1500, 500, 1319)
    assert questions(splits.test) == {f"x{i}" for i in range(1319)}
    assert not questions(splits.train) & questions(splits.validation)
    assert load_splits(cfg, need_ground_truth=True).validation["ground_truth"] == splits.validation["ground_truth"]


# --- the shapes datasets' readers take, which the login-node check takes too ------------------------------------

TEN = numbered(10)
SHAPES = {
    "blank lines between the rows": (
        "d.jsonl",
        "\n".join(json.dumps(r) for r in TEN[:5]) + "\n\n  \n" + "".join(json.dumps(r) + "\n" for r in TEN[5:]),
    ),
    "a byte-order mark": ("d.jsonl", "\ufeff" + "".join(json.dumps(r) + "\n" for r in TEN)),
    "a line break U+2028 inside a string": (
        "d.jsonl",
        "".join(json.dumps({**r, "prompt": r["prompt"] + "\u2028x"}, ensure_ascii=False) + "\n" for r in TEN),
    ),
    "a list of objects over many lines": ("d.json", json.dumps(TEN, indent=2)),
    "chat messages as prompts": (
        "d.jsonl",
        "".join(
            json.dumps({"prompt": [{"role": "user", "content": r["prompt"]}], "ground_truth": int(r["ground_truth"])})
            + "\n"
            for r in TEN
        ),
    ),
    "a CSV with blank lines": (
        "d.csv",
        "\n\nprompt,ground_truth\n" + "".join(f"{r['prompt']},{r['ground_truth']}\n\n" for r in TEN),
    ),
}


@pytest.mark.parametrize("name", SHAPES)
def test_the_check_takes_what_training_loads_with_the_same_rows(tmp_path, name):
    file, text = SHAPES[name]
    (tmp_path / file).write_text(text, encoding="utf-8")
    cfg = file_cfg(tmp_path / file)
    checked, splits = precheck_files(cfg, True), load_splits(cfg, need_ground_truth=True)
    assert checked.columns == ["prompt", "ground_truth"]
    assert sum(sizes(splits)) == 10 and checked.train_rows == len(splits.train) == 8
    assert sorted(p[-1]["content"].split("\u2028")[0] for s in splits for p in s["prompt"]) == sorted(
        r["prompt"] for r in TEN
    )


def test_the_check_counts_the_rows_the_train_split_keeps(tmp_path):
    assert precheck_files(compose(["data.arithmetic.n_train=50"]).data, True).train_rows == 50
    assert precheck_files(compose(["data.max_train_samples=7"]).data, True).train_rows == 7
    path = write_jsonl(tmp_path / "d.jsonl", numbered(40))
    assert precheck_files(file_cfg(path), True).train_rows == 32  # 4 rows each carved for validation and test
    assert precheck_files(file_cfg(path, "data.test_size=10", "data.max_train_samples=100"), True).train_rows == 26
    assert precheck_files(compose(["data=gsm8k"]).data, True) == (None, None)  # hub data: read where it trains


def test_training_names_data_that_is_not_utf8(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(
        b"".join(json.dumps(r).encode() + b"\n" for r in numbered(9)) + b'{"prompt": "\xff", "ground_truth": "1"}\n'
    )
    with pytest.raises(DataError, match=r"^the train data is not UTF-8 text \(byte 0xff\); save its files as UTF-8$"):
        load_splits(file_cfg(path), need_ground_truth=True)


def test_training_names_a_bad_prompt_the_check_could_not_see(monkeypatch):
    """Hub data (and files over the check's size limit) are first read where training runs: the same check there,
    naming the split and row."""
    import datasets

    rows = [{"question": "q", "answer": "#### 1"}] * 3 + [{"question": None, "answer": "#### 2"}]
    monkeypatch.setattr(datasets, "load_dataset", lambda path, subset, split: datasets.Dataset.from_list(rows))
    with pytest.raises(
        DataError,
        match=r"^the train data's row 3: the prompt \(data.prompt_column='question'\) is "
        r"null; give a string or a list of chat messages",
    ):
        load_splits(compose(["data=gsm8k"]).data, need_ground_truth=True)


# --- bad input: one line naming the value ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "rows, overrides, message",
    [
        ([{"q": "a", "ground_truth": "1"}] * 3, [], "data.prompt_column='prompt' is not a column"),
        ([{"prompt": "a"}] * 4, [], "data.ground_truth_column='ground_truth' is not a column"),
        (
            [{"prompt": "a", "ground_truth": None}, {"prompt": "b", "ground_truth": "2"}] * 10,
            [],
            "10 of 20 train rows have no ground truth",
        ),
        (
            numbered(10),
            ["data.validation_size=1.5"],
            r"data.validation_size=1.5: give a fraction of the train rows in \(0, 1\) or a number of rows >= 1",
        ),
        (numbered(10), ["data.test_size=0"], r"data.test_size=0: give a fraction"),
        (numbered(10), ["data.test_size=-0.1"], r"data.test_size=-0.1: give a fraction"),
        (
            numbered(10),
            ["data.validation_size=5", "data.test_size=0.5"],
            r"data.test_size=0.5 \(5 rows\) and data.validation_size=5 \(5 rows\) leave none of the 10 rows of "
            r"data.path='.*d.jsonl' to train on",
        ),
        (
            numbered(10),
            ["data.validation_split=dev"],
            "data.validation_split='dev' names a split of a saved DatasetDict, but data.path=",
        ),
    ],
)
def test_bad_files_fail_clearly(tmp_path, rows, overrides, message):
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = file_cfg(path, *overrides)
    for check in (lambda: load_splits(cfg, need_ground_truth=True), lambda: precheck_files(cfg, True)):
        with pytest.raises(DataError, match=message) as info:
            check()
        assert "\n" not in str(info.value)


def test_a_bad_validation_or_test_file_is_named_by_its_split(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", numbered(10))
    test = write_jsonl(tmp_path / "test.jsonl", [{"prompt": "a"}] * 3)
    cfg = file_cfg(train, f"data.test_path={test}")
    for check in (lambda: load_splits(cfg, need_ground_truth=True), lambda: precheck_files(cfg, True)):
        with pytest.raises(DataError, match="not a column of the test data"):
            check()


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="data file not found: .*nope.jsonl' \\(data.path\\)"):
        load_splits(file_cfg(f"{tmp_path}/nope.jsonl"), need_ground_truth=False)
    with pytest.raises(DataError, match="data file not found: .*nope.jsonl' \\(data.test_path\\)"):
        load_splits(
            file_cfg(write_jsonl(tmp_path / "d.jsonl", numbered(4)), f"data.test_path={tmp_path}/nope.jsonl"),
            need_ground_truth=False,
        )


def test_bad_directories_fail_clearly(tmp_path):
    import datasets

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    with pytest.raises(
        DataError,
        match=r"data.path='.*empty' is a directory with no .jsonl/.json/.csv/.parquet files and no save_to_disk",
    ):
        precheck_files(file_cfg(empty), False)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    write_jsonl(mixed / "a.jsonl", numbered(3))
    write_jsonl(mixed / "b.jsonl", numbered(3))
    (mixed / "c.csv").write_text("prompt,ground_truth\nq,1\n")
    with pytest.raises(
        DataError, match=r"holds shards of several formats \(1 csv, 2 json\); keep one format per directory"
    ):
        load_splits(file_cfg(mixed), need_ground_truth=False)

    train = datasets.Dataset.from_list(numbered(10))
    datasets.DatasetDict(train=train, val=train, dev=train).save_to_disk(str(tmp_path / "two_val"))
    with pytest.raises(
        DataError,
        match=(
            r"has splits \['val', 'dev'\], each a validation split by its name; choose one with data.validation_split"
        ),
    ):
        precheck_files(file_cfg(tmp_path / "two_val"), False)
    datasets.DatasetDict(fit=train).save_to_disk(str(tmp_path / "no_train"))
    with pytest.raises(
        DataError, match=r"data.train_split='train' is not a split of '.*no_train'; its splits: \['fit'\]"
    ):
        load_splits(file_cfg(tmp_path / "no_train"), need_ground_truth=False)
    datasets.DatasetDict(train=train, test=train).save_to_disk(str(tmp_path / "dict"))
    test = write_jsonl(tmp_path / "test.jsonl", numbered(3))
    with pytest.raises(
        DataError, match=r"data.test_path='.*test.jsonl' and data.path='.*dict''s own test split both give"
    ):
        precheck_files(file_cfg(tmp_path / "dict", f"data.test_path={test}"), False)
    with pytest.raises(
        DataError,
        match=(
            r"data.test_path='.*dict' is a saved DatasetDict \(splits \['train', 'test'\]\); point at one split's "
            r"directory"
        ),
    ):
        precheck_files(file_cfg(test, f"data.test_path={tmp_path / 'dict'}"), False)


def test_a_save_to_disk_directory_whose_records_are_broken_is_named(tmp_path):
    """save_to_disk's record files and shards, read at the gate without datasets: each fault one line."""
    saved = tmp_path / "saved"
    saved.mkdir()
    (saved / "dataset_info.json").write_text("{}")
    cases = [
        (
            '{"_data_files": "data.arrow"}',
            r"its state.json is \{\"_data_files\": \"data.arrow\"\}; save_to_disk writes",
        ),
        (
            '{"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}',
            r"its state.json names data-00000-of-00001.arrow, which is not there$",
        ),
        ("{", r"unreadable state.json \(Expecting property name"),
    ]
    for state, message in cases:
        (saved / "state.json").write_text(state)
        with pytest.raises(DataError, match=message):
            precheck_files(file_cfg(saved), False)
    (saved / "state.json").write_text('{"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}')
    (saved / "data-00000-of-00001.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(DataError, match=r"data file '.*data-00000-of-00001.arrow' cannot be read as Arrow: "):
        precheck_files(file_cfg(saved), False)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["data.arithmetic.n_val=0"], "data.arithmetic.n_val=0: every split needs at least 1 question"),
        (["data=gsm8k", "data.validation_size=0.0"], r"data.validation_size=0.0: give a fraction"),
    ],
)
def test_bad_split_sizes_are_refused_before_training(overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        validate(compose(overrides))
    assert "\n" not in str(info.value)


def test_the_login_node_check_reads_directories_without_datasets(tmp_path):
    """precheck_files (run by the planning gate, before anything is submitted) imports no `datasets` or torch,
    also for a save_to_disk directory and a shard directory."""
    import datasets

    datasets.DatasetDict(train=datasets.Dataset.from_list(numbered(10))).save_to_disk(str(tmp_path / "saved"))
    (tmp_path / "shards").mkdir()
    write_jsonl(tmp_path / "shards" / "a.jsonl", numbered(5))
    code = (
        "import sys; sys.path.insert(0, '.'); from tests.conftest import compose; from grpo_sweep.run.validate "
        "import validate\n"
        f"for p in {[str(tmp_path / 'saved'), str(tmp_path / 'shards')]!r}:\n"
        "    validate(compose(['data=file', 'data.path=' + p]))\n"
        "print('HEAVY', [m for m in ('datasets', 'torch', 'transformers', 'trl') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
