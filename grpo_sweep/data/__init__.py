"""Datasets as TRL wants them: a conversational ``prompt`` (system + user) and a ``ground_truth`` column."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .arithmetic import arithmetic_splits

FILE_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class DataError(ValueError):
    """The data named in config cannot be loaded or lacks what the rewards need."""


def load_splits(data_cfg: Any, need_ground_truth: bool, need_columns: dict[str, str] | None = None):
    """Train and held-out ``datasets.Dataset``s with ``prompt`` (messages) and ``ground_truth`` columns."""
    import datasets

    if data_cfg.source == "arithmetic":
        a = data_cfg.arithmetic
        train_rows, eval_rows = arithmetic_splits(
            a.n_train, a.n_eval, a.min_operands, a.max_operands, a.max_operand, a.seed
        )
        train, held_out = datasets.Dataset.from_list(train_rows), datasets.Dataset.from_list(eval_rows)
        prompt_column, truth_column = "question", "ground_truth"
    elif data_cfg.source == "hub":
        train = datasets.load_dataset(data_cfg.path, data_cfg.subset, split=data_cfg.train_split)
        held_out = (
            datasets.load_dataset(data_cfg.path, data_cfg.subset, split=data_cfg.eval_split)
            if data_cfg.eval_split
            else None
        )
        prompt_column, truth_column = data_cfg.prompt_column, data_cfg.ground_truth_column
    elif data_cfg.source == "file":
        train = _load_file(data_cfg.path)
        held_out = _load_file(data_cfg.eval_split) if data_cfg.eval_split else None
        prompt_column, truth_column = data_cfg.prompt_column, data_cfg.ground_truth_column
    else:
        raise DataError(f"data.source={data_cfg.source!r}; use one of: arithmetic, hub, file")

    has_truth = _check_columns(train, prompt_column, truth_column, need_ground_truth, "train")
    _check_reward_columns(train, need_columns or {}, "train")
    if held_out is None:
        if len(train) < 2:
            raise DataError(f"the data has {len(train)} row(s); need at least 2 to hold some out (or set data.eval_split)")
        split = train.train_test_split(test_size=data_cfg.eval_fraction, seed=data_cfg.seed)
        train, held_out = split["train"], split["test"]
    else:
        _check_columns(held_out, prompt_column, truth_column, need_ground_truth, "held-out")
        _check_reward_columns(held_out, need_columns or {}, "held-out")
    train = _to_prompts(train, data_cfg, prompt_column, truth_column if has_truth else None)
    held_out = _to_prompts(held_out, data_cfg, prompt_column, truth_column if has_truth else None)
    if data_cfg.max_train_samples:
        train = train.select(range(min(data_cfg.max_train_samples, len(train))))
    if data_cfg.max_eval_samples:
        held_out = held_out.select(range(min(data_cfg.max_eval_samples, len(held_out))))
    return train, held_out


def _data_file(path: str | None) -> Path:
    if not path:
        raise DataError("data.path is empty; give a local .jsonl, .json, .csv or .parquet file")
    file = Path(path).expanduser()
    if not file.is_file():
        raise DataError(f"data file not found: {str(file)!r} (data.path)")
    if file.suffix.lower() not in FILE_FORMATS:
        raise DataError(f"data file {str(file)!r}: unknown format {file.suffix!r}; use one of {sorted(FILE_FORMATS)}")
    return file


def _load_file(path: str | None):
    import datasets

    file = _data_file(path)
    return datasets.load_dataset(FILE_FORMATS[file.suffix.lower()], data_files=str(file), split="train")


# Larger files are checked when training loads them, not on the login node.
PRECHECK_MAX_BYTES = 64 * 1024 * 1024


class _Rows:
    """Just enough of ``datasets.Dataset`` (column_names, len, ds[column]) for ``_check_columns``."""

    def __init__(self, rows: list[dict]):
        self.rows = rows
        self.column_names = list(dict.fromkeys(k for row in rows[:1000] for k in row))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, column: str) -> list:
        return [row.get(column) for row in self.rows]


def _read_rows(file: Path) -> list[dict]:
    suffix = file.suffix.lower()
    try:
        if suffix == ".jsonl" or (suffix == ".json" and file.read_text().lstrip()[:1] != "["):
            import json

            return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        if suffix == ".json":
            import json

            return json.loads(file.read_text())
        if suffix == ".csv":
            import csv

            with file.open(newline="") as f:
                return [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(f)]
        import pyarrow.parquet as pq

        return pq.read_table(file).to_pylist()
    except (ValueError, OSError, ImportError) as exc:
        raise DataError(f"data file {str(file)!r} cannot be read: {exc}") from None


def precheck_files(data_cfg: Any, need_ground_truth: bool, need_columns: dict[str, str] | None = None) -> None:
    """Before any training: local data files exist and have the columns the rewards need (stdlib readers)."""
    if data_cfg.source != "file":
        return
    for path, which in ((data_cfg.path, "train"), (data_cfg.eval_split, "held-out")):
        if which == "held-out" and not path:
            continue
        file = _data_file(path)
        if file.stat().st_size > PRECHECK_MAX_BYTES:
            continue
        rows = _Rows(_read_rows(file))
        _check_columns(rows, data_cfg.prompt_column, data_cfg.ground_truth_column, need_ground_truth, which)
        _check_reward_columns(rows, need_columns or {}, which)


def _check_columns(ds, prompt_column: str, truth_column: str | None, need_truth: bool, which: str) -> bool:
    """Raise a DataError naming what is missing; return whether a ground-truth column is there."""
    if len(ds) == 0:
        raise DataError(f"the {which} dataset is empty")
    if prompt_column not in ds.column_names:
        raise DataError(
            f"data.prompt_column={prompt_column!r} is not a column of the {which} data; columns: {ds.column_names}"
        )
    has_truth = bool(truth_column) and truth_column in ds.column_names
    if need_truth and not has_truth:
        raise DataError(
            f"data.ground_truth_column={truth_column!r} is not a column of the {which} data "
            f"(columns: {ds.column_names}), but the reward mix needs a ground truth"
        )
    if has_truth and need_truth:
        missing = [i for i, v in enumerate(ds[truth_column]) if v is None or str(v).strip() == ""]
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            raise DataError(
                f"{len(missing)} of {len(ds)} {which} rows have no ground truth in column {truth_column!r} "
                f"(rows {shown}); fill or drop them"
            )
    return has_truth


def _check_reward_columns(ds, need_columns: dict[str, str], which: str) -> None:
    for column, reward_name in need_columns.items():
        if column not in ds.column_names:
            raise DataError(
                f"reward {reward_name!r} reads column {column!r}, which the {which} data lacks "
                f"(columns: {ds.column_names}); set reward_mix.{reward_name}.params.tests_column"
            )


def _to_prompts(ds, data_cfg, prompt_column: str, truth_column: str | None):
    system_prompt, marker = data_cfg.system_prompt, data_cfg.ground_truth_after

    def convert(row: dict) -> dict:
        question = row[prompt_column]
        if isinstance(question, list):  # already chat messages
            messages = list(question)
        else:
            messages = [{"role": "user", "content": str(question)}]
        if system_prompt and not any(m.get("role") == "system" for m in messages):
            messages = [{"role": "system", "content": system_prompt}] + messages
        truth = row.get(truth_column) if truth_column else None
        if truth is not None:
            truth = str(truth)
            if marker and marker in truth:
                truth = truth.split(marker)[-1].replace(",", "")  # GSM8K writes 1,000
            truth = truth.strip()
        return {"prompt": messages, "ground_truth": truth}

    # Other columns stay: TRL passes every dataset column to the rewards by name.
    return ds.map(convert, remove_columns=[prompt_column] if prompt_column != "prompt" else None)
