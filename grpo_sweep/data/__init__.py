"""Datasets as TRL wants them: a conversational ``prompt`` (system + user) and a ``ground_truth`` column.

Every other column of the data stays (TRL hands each to the rewards by name). With ``data.ground_truth_after``
set, ``ground_truth`` and the ``data.ground_truth_column`` both hold the normalised answer (the text after the
marker) and ``<ground_truth_column>_raw`` keeps the untouched text.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .arithmetic import ARITHMETIC_COLUMNS, arithmetic_splits

FILE_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


class DataError(ValueError):
    """The data named in config cannot be loaded or lacks what the rewards need."""


def held_out_questions(data_cfg: Any) -> tuple[str, ...]:
    """The built-in task's held-out questions, which the tiny model's warm start must never show in chat (other
    data is not arithmetic questions, so nothing of it is among the warm start's)."""
    if data_cfg.source != "arithmetic":
        return ()
    a = data_cfg.arithmetic
    _, held_out = arithmetic_splits(a.n_train, a.n_eval, a.min_operands, a.max_operands, a.max_operand, a.seed)
    return tuple(row["question"] for row in held_out)


def load_splits(data_cfg: Any, need_ground_truth: bool, need_columns: dict[str, Any] | None = None):
    """Train and held-out ``datasets.Dataset``s with ``prompt`` (messages) and ``ground_truth`` columns.

    ``need_columns`` (``rewards.mix.data_columns``): column -> the reward that needs it; a column the loaded
    data lacks is a one-line DataError, raised here, before any trainer is built.
    """
    import datasets

    if data_cfg.source == "arithmetic":
        a = data_cfg.arithmetic
        train_rows, eval_rows = arithmetic_splits(
            a.n_train, a.n_eval, a.min_operands, a.max_operands, a.max_operand, a.seed
        )
        train, held_out = datasets.Dataset.from_list(train_rows), datasets.Dataset.from_list(eval_rows)
        prompt_column, truth_column = _source_columns(data_cfg)
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

    need_columns = need_columns or {}
    need_truth = need_columns.get("ground_truth") or need_ground_truth
    has_truth = _check_columns(train, prompt_column, truth_column, need_truth, "train")
    _check_reward_columns(train.column_names, data_cfg, need_columns, "train")
    if held_out is None:
        if len(train) < 2:
            raise DataError(f"the data has {len(train)} row(s); need at least 2 to hold some out (or set data.eval_split)")
        split = train.train_test_split(test_size=data_cfg.eval_fraction, seed=data_cfg.seed)
        train, held_out = split["train"], split["test"]
    else:
        _check_columns(held_out, prompt_column, truth_column, need_truth, "held-out")
        _check_reward_columns(held_out.column_names, data_cfg, need_columns, "held-out")
    train = _to_prompts(train, data_cfg, prompt_column, truth_column if has_truth else None)
    held_out = _to_prompts(held_out, data_cfg, prompt_column, truth_column if has_truth else None)
    if data_cfg.max_train_samples:
        train = train.select(range(min(data_cfg.max_train_samples, len(train))))
    if data_cfg.max_eval_samples:
        held_out = held_out.select(range(min(data_cfg.max_eval_samples, len(held_out))))
    return train, held_out


def _source_columns(data_cfg: Any) -> tuple[str, str | None]:
    """(prompt column, ground-truth column) of the data as it is stored."""
    if data_cfg.source == "arithmetic":
        return "question", "ground_truth"
    return data_cfg.prompt_column, data_cfg.ground_truth_column


def reward_columns(source_columns: list[str], data_cfg: Any) -> list[str]:
    """The columns the rewards get after ``load_splits``, given the stored data's columns
    (``ground_truth`` only when the data has one)."""
    prompt_column, truth_column = _source_columns(data_cfg)
    out = ["prompt"] + [c for c in source_columns if c not in (prompt_column, "prompt", "ground_truth")]
    if truth_column and truth_column in source_columns:
        out.append("ground_truth")
        raw = f"{truth_column}_raw"
        if data_cfg.ground_truth_after and raw not in out:
            out.append(raw)
    return out


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


def precheck_files(data_cfg: Any, need_ground_truth: bool, need_columns: dict[str, Any] | None = None) -> list[str] | None:
    """Before any training: the data has what the rewards need, checked without loading it (stdlib readers).

    Returns the columns the rewards will get, or None where they cannot be known here (hub data, large files).
    """
    need_columns = need_columns or {}
    if data_cfg.source == "arithmetic":
        _check_reward_columns(list(ARITHMETIC_COLUMNS), data_cfg, need_columns, "train")
        return reward_columns(list(ARITHMETIC_COLUMNS), data_cfg)
    if data_cfg.source != "file":
        return None
    need_truth = need_columns.get("ground_truth") or need_ground_truth
    columns = None
    for path, which in ((data_cfg.path, "train"), (data_cfg.eval_split, "held-out")):
        if which == "held-out" and not path:
            continue
        file = _data_file(path)
        if file.stat().st_size > PRECHECK_MAX_BYTES:
            continue
        rows = _Rows(_read_rows(file))
        _check_columns(rows, data_cfg.prompt_column, data_cfg.ground_truth_column, need_truth, which)
        _check_reward_columns(rows.column_names, data_cfg, need_columns, which)
        if which == "train":
            columns = reward_columns(rows.column_names, data_cfg)
    return columns


def _check_columns(ds, prompt_column: str, truth_column: str | None, need_truth: Any, which: str) -> bool:
    """Raise a DataError naming what is missing; return whether a ground-truth column is there.

    ``need_truth``: falsy, True, or the reward that needs the ground truth (``rewards.mix.ColumnNeed``).
    """
    if len(ds) == 0:
        raise DataError(f"the {which} dataset is empty")
    if prompt_column not in ds.column_names:
        raise DataError(
            f"data.prompt_column={prompt_column!r} is not a column of the {which} data; columns: {ds.column_names}"
        )
    has_truth = bool(truth_column) and truth_column in ds.column_names
    if need_truth and not has_truth:
        who, fix = "the reward mix", ""
        if hasattr(need_truth, "fix"):
            who, fix = need_truth.reward, f"; {need_truth.fix('ground_truth', False)}"
        raise DataError(
            f"data.ground_truth_column={truth_column!r} is not a column of the {which} data "
            f"(columns: {ds.column_names}), but {who} needs a ground truth{fix}"
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


def _check_reward_columns(source_columns: list[str], data_cfg: Any, need_columns: dict[str, Any], which: str) -> None:
    """Every column a reward needs is among those the rewards will get (ground_truth: ``_check_columns``)."""
    columns = reward_columns(source_columns, data_cfg)
    has_truth = "ground_truth" in columns
    for column, need in need_columns.items():
        if column == "ground_truth" or column in columns:
            continue
        if hasattr(need, "missing"):
            raise DataError(need.missing(column, which, columns, has_truth))
        raise DataError(f"reward {need!r} needs column {column!r}, which the {which} data lacks (columns: {', '.join(columns)})")


def _to_prompts(ds, data_cfg, prompt_column: str, truth_column: str | None):
    system_prompt, marker = data_cfg.system_prompt, data_cfg.ground_truth_after
    # a <column>_raw the data already has is the user's own: left as it is
    keep_raw = bool(marker and truth_column and f"{truth_column}_raw" not in ds.column_names)

    def convert(row: dict) -> dict:
        question = row[prompt_column]
        if isinstance(question, list):  # already chat messages
            messages = list(question)
        else:
            messages = [{"role": "user", "content": str(question)}]
        if system_prompt and not any(m.get("role") == "system" for m in messages):
            messages = [{"role": "system", "content": system_prompt}] + messages
        raw = row.get(truth_column) if truth_column else None
        truth = raw
        if truth is not None:
            truth = str(truth)
            if marker and marker in truth:
                truth = truth.split(marker)[-1].replace(",", "")  # GSM8K writes 1,000
            truth = truth.strip()
        out = {"prompt": messages, "ground_truth": truth}
        if keep_raw:
            # A reward copied from elsewhere reads the answer under the data's own column name (the Unsloth
            # GSM8K demo's `answer`): give it the normalised value there too, the untouched text beside it.
            out[truth_column] = truth
            out[f"{truth_column}_raw"] = raw
        return out

    # Other columns stay: TRL passes every dataset column to the rewards by name.
    return ds.map(convert, remove_columns=[prompt_column] if prompt_column != "prompt" else None)
