"""Datasets as TRL wants them: a conversational ``prompt`` (system + user) and a ``ground_truth`` column.

``load_splits`` gives three disjoint splits (``Splits``): train, validation (for choosing) and test (for
reporting). Where the data gives no validation or test split, it is carved from the train rows, seeded.

Every other column of the data stays (TRL hands each to the rewards by name). With ``data.ground_truth_after``
set, ``ground_truth`` and the ``data.ground_truth_column`` both hold the normalised answer (the text after the
marker) and ``<ground_truth_column>_raw`` keeps the untouched text.
"""

from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple

from ..config.show import shown
from .arithmetic import ARITHMETIC_COLUMNS, arithmetic_splits
from .sources import (
    VALIDATION_NAMES,
    DataError,
    Source,
    carve_order,
    carved_counts,
    check_size,
    load,
    locate,
    read_rows,
)

SPLITS = ("train", "validation", "test")

SOURCES = ("arithmetic", "hub", "file")


def _unknown_source(source: Any) -> DataError:
    return DataError(f"data.source={source!r}; use one of: {', '.join(SOURCES)}")


class Splits(NamedTuple):
    """Disjoint train / validation / test ``datasets.Dataset``s, each with ``prompt`` (messages) and, where the
    data has one, ``ground_truth``. Validation is for choosing (periodic evaluation, the best step, a search's
    objective); test is for reporting only."""

    train: Any
    validation: Any
    test: Any


def held_out_questions(data_cfg: Any) -> tuple[str, ...]:
    """The built-in task's validation and test questions, which the tiny model's warm start must never show in
    chat (other data is not arithmetic questions, so nothing of it is among the warm start's)."""
    if data_cfg.source != "arithmetic":
        return ()
    _, validation, test = _arithmetic_rows(data_cfg)
    return tuple(row["question"] for row in validation + test)


def _arithmetic_rows(data_cfg: Any) -> tuple[list[dict], list[dict], list[dict]]:
    a = data_cfg.arithmetic
    return arithmetic_splits(a.n_train, a.n_val, a.n_test, a.min_operands, a.max_operands, a.max_operand, a.seed)


def _file_sources(data_cfg: Any) -> dict[str, Source | None]:
    """split -> where ``data=file`` gives it (None: carve it from train)."""
    train = locate(data_cfg.path, "data.path")
    named = {"validation": data_cfg.validation_split, "test": data_cfg.test_split}
    paths = {"validation": data_cfg.validation_path, "test": data_cfg.test_path}
    if train.kind != "saved_dict":
        set_names = {
            f"data.{s}_split": n
            for s, n in (("train", data_cfg.train_split), *named.items())
            if n and not (s == "train" and n == "train")
        }
        if set_names:
            key, name = next(iter(set_names.items()))
            raise DataError(
                f"{key}={name!r} names a split of a saved DatasetDict, but data.path={str(train.path)!r} is not one; "
                "give a separate split as data.validation_path / data.test_path"
            )
        out: dict[str, Source | None] = {"train": train}
    else:
        out = {"train": _dict_split(train, data_cfg.train_split, "train_split")}
        standard = {"validation": VALIDATION_NAMES, "test": ("test",)}
        for split in ("validation", "test"):
            if named[split]:
                out[split] = _dict_split(train, named[split], f"{split}_split")
                continue
            present = [n for n in standard[split] if n in train.splits]
            if len(present) > 1:
                raise DataError(
                    f"data.path={str(train.path)!r} has splits {present}, each a {split} split by its name; "
                    f"choose one with data.{split}_split"
                )
            out[split] = train.split(present[0], "data.path") if present else None
    for split, path in paths.items():
        if not path:
            out.setdefault(split, None)
            continue
        if out.get(split) is not None:
            raise DataError(
                f"data.{split}_path={path!r} and data.path={str(train.path)!r}'s own {split} split both give the "
                f"{split} split; drop one"
            )
        source = locate(path, f"data.{split}_path")
        if source.kind == "saved_dict":
            raise DataError(
                f"data.{split}_path={path!r} is a saved DatasetDict (splits {list(source.splits)}); "
                f"point at one split's directory, e.g. {str(source.path / source.splits[0])!r}"
            )
        out[split] = source
    return out


def _dict_split(source: Source, name: str, key: str) -> Source:
    if name not in source.splits:
        raise DataError(
            f"data.{key}={name!r} is not a split of {str(source.path)!r}; its splits: {list(source.splits)}"
        )
    return source.split(name, "data.path")


def _carve_sizes(data_cfg: Any, given: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """split -> (size, key) for every split the data does not give; test first (see carve_order)."""
    return {s: (data_cfg.get(f"{s}_size"), f"data.{s}_size") for s in ("test", "validation") if given.get(s) is None}


def load_splits(data_cfg: Any, need_ground_truth: bool, need_columns: dict[str, Any] | None = None) -> Splits:
    """Train, validation and test ``datasets.Dataset``s with ``prompt`` (messages) and ``ground_truth`` columns.

    ``need_columns`` (``rewards.mix.data_columns``): column -> the reward that needs it; a column the loaded
    data lacks is a one-line DataError, raised here, before any trainer is built.
    """
    import datasets

    if data_cfg.source == "arithmetic":
        given = dict(zip(SPLITS, map(datasets.Dataset.from_list, _arithmetic_rows(data_cfg))))
        where = "the built-in task"
    elif data_cfg.source == "hub":
        given = {
            split: datasets.load_dataset(data_cfg.path, data_cfg.subset, split=name) if name else None
            for split, name in zip(SPLITS, (data_cfg.train_split, data_cfg.validation_split, data_cfg.test_split))
        }
        where = f"{data_cfg.path}'s {data_cfg.train_split} split"
    elif data_cfg.source == "file":
        sources = _file_sources(data_cfg)
        given = {split: load(source) if source else None for split, source in sources.items()}
        where = sources["train"].name()
    else:
        raise _unknown_source(data_cfg.source)
    prompt_column, truth_column = _source_columns(data_cfg)

    need_columns = need_columns or {}
    need_truth = need_columns.get("ground_truth") or need_ground_truth
    # checked before carving: the train rows' checks then cover the carved splits too
    has_truth = True
    for split in SPLITS:
        if given.get(split) is not None:
            try:
                has_truth &= _check_columns(given[split], prompt_column, truth_column, need_truth, split)
            except UnicodeDecodeError as exc:  # Arrow holds the bytes as they were; Python reads them as UTF-8
                raise DataError(
                    f"the {split} data is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); save its files as UTF-8"
                ) from None
            _check_reward_columns(given[split].column_names, data_cfg, need_columns, split)
    given = _carve(given, _carve_sizes(data_cfg, given), data_cfg.seed, where)
    splits = Splits(
        *(_to_prompts(given[s], data_cfg, prompt_column, truth_column if has_truth else None) for s in SPLITS)
    )
    limits = (data_cfg.max_train_samples, data_cfg.max_val_samples, data_cfg.max_test_samples)
    return Splits(*(ds.select(range(min(n, len(ds)))) if n else ds for ds, n in zip(splits, limits)))


def _carve(given: dict[str, Any], sizes: dict[str, tuple[Any, str]], seed: int, where: str) -> dict[str, Any]:
    """The splits ``sizes`` names, taken from ``given["train"]`` by a seeded permutation; the rest stays train."""
    if not sizes:
        return given
    train = given["train"]
    counts = carved_counts(len(train), sizes, where)
    order = carve_order(len(train), seed)
    out, start = dict(given), 0
    for split in ("test", "validation"):
        if split in counts:
            out[split] = train.select(order[start : start + counts[split]])
            start += counts[split]
    out["train"] = train.select(order[start:])
    return out


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


# Larger files are checked when training loads them, not on the login node.
PRECHECK_MAX_BYTES = 64 * 1024 * 1024


class DataCheck(NamedTuple):
    """What the login-node check learnt of the data: the columns the rewards will get and the rows the train split
    will hold (each None where it cannot be known here: hub data, large files)."""

    columns: list[str] | None
    train_rows: int | None


def precheck_files(data_cfg: Any, need_ground_truth: bool, need_columns: dict[str, Any] | None = None) -> DataCheck:
    """The data group's check, before any training: a known source, the data's files parse, it has what the rewards
    need and the splits can be made, checked without ``datasets`` (stdlib and pyarrow readers).

    Returns the columns the rewards will get and the train split's row count (``DataCheck``).
    """
    need_columns = need_columns or {}
    if data_cfg.source not in SOURCES:
        raise _unknown_source(data_cfg.source)
    if data_cfg.source == "arithmetic":
        a = data_cfg.arithmetic
        for key in ("n_train", "n_val", "n_test"):
            if a[key] < 1:
                raise DataError(f"data.arithmetic.{key}={a[key]}: every split needs at least 1 question")
        _check_reward_columns(list(ARITHMETIC_COLUMNS), data_cfg, need_columns, "train")
        return DataCheck(
            reward_columns(list(ARITHMETIC_COLUMNS), data_cfg), _limited(a.n_train, data_cfg.max_train_samples)
        )
    if data_cfg.source == "hub":
        for _split, (size, key) in _carve_sizes(
            data_cfg, {"validation": data_cfg.validation_split, "test": data_cfg.test_split}
        ).items():
            check_size(size, key)
        return DataCheck(None, None)
    sources = _file_sources(data_cfg)
    for size, key in _carve_sizes(data_cfg, sources).values():
        check_size(size, key)
    need_truth = need_columns.get("ground_truth") or need_ground_truth
    columns = train_rows = None
    for split in SPLITS:
        source = sources[split]
        if source is None or source.nbytes() > PRECHECK_MAX_BYTES:
            continue
        rows = read_rows(source)
        _check_columns(rows, data_cfg.prompt_column, data_cfg.ground_truth_column, need_truth, split, rows.place)
        _check_reward_columns(rows.column_names, data_cfg, need_columns, split)
        if split == "train":
            columns = reward_columns(rows.column_names, data_cfg)
            carved = carved_counts(len(rows), _carve_sizes(data_cfg, sources), source.name())
            train_rows = _limited(len(rows) - sum(carved.values()), data_cfg.max_train_samples)
    return DataCheck(columns, train_rows)


def _limited(rows: int, limit: int | None) -> int:
    return min(rows, limit) if limit else rows


def _check_columns(
    ds,
    prompt_column: str,
    truth_column: str | None,
    need_truth: Any,
    which: str,
    place: Callable[[int], str] | None = None,
) -> bool:
    """Raise a DataError naming what is missing or malformed; return whether a ground-truth column is there.

    ``need_truth``: falsy, True, or the reward that needs the ground truth (``rewards.mix.ColumnNeed``).
    ``place``: row index -> where it sits (``data file '<path>' line 37``); default ``the train data's row 3``.
    """
    if len(ds) == 0:
        raise DataError(f"the {which} dataset is empty")
    if prompt_column not in ds.column_names:
        raise DataError(
            f"data.prompt_column={prompt_column!r} is not a column of the {which} data; columns: {ds.column_names}"
        )
    place = place or (lambda i: f"the {which} data's row {i}")
    has_truth = bool(truth_column) and truth_column in ds.column_names
    if need_truth and not has_truth:
        who, fix = "the reward mix", ""
        if hasattr(need_truth, "fix"):
            who, fix = need_truth.reward, f"; {need_truth.fix('ground_truth', False)}"
        raise DataError(
            f"data.ground_truth_column={truth_column!r} is not a column of the {which} data "
            f"(columns: {ds.column_names}), but {who} needs a ground truth{fix}"
        )
    for i, prompt in enumerate(ds[prompt_column]):
        if not _is_prompt(prompt):
            raise DataError(
                f"{place(i)}: the prompt (data.prompt_column={prompt_column!r}) is {shown(prompt)}; give a "
                'string or a list of chat messages [{"role": ..., "content": ...}]'
            )
    if not has_truth:
        return False
    truths = ds[truth_column]
    for i, truth in enumerate(truths):
        if not _is_truth(truth):
            raise DataError(
                f"{place(i)}: the ground truth (data.ground_truth_column={truth_column!r}) is "
                f"{shown(truth)}; give a string or a number"
            )
    if need_truth:
        missing = [i for i, v in enumerate(truths) if _no_truth(v)]
        if missing:
            shown_rows = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            raise DataError(
                f"{len(missing)} of {len(ds)} {which} rows have no ground truth in column {truth_column!r} "
                f"(rows {shown_rows}); fill or drop them"
            )
    return True


def _is_prompt(value: Any) -> bool:
    """A string, or chat messages: each a mapping with a string role and a content (a string, or a multimodal
    list of parts)."""
    if isinstance(value, str):
        return True
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), (str, list))
            for m in value
        )
    )


def _is_truth(value: Any) -> bool:
    """What becomes a ground truth as it is (``_to_prompts`` writes it as a string): a string, a number or nothing."""
    return value is None or isinstance(value, str) or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _no_truth(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value).strip() == ""


def _check_reward_columns(source_columns: list[str], data_cfg: Any, need_columns: dict[str, Any], which: str) -> None:
    """Every column a reward needs is among those the rewards will get (ground_truth: ``_check_columns``)."""
    columns = reward_columns(source_columns, data_cfg)
    has_truth = "ground_truth" in columns
    for column, need in need_columns.items():
        if column == "ground_truth" or column in columns:
            continue
        if hasattr(need, "missing"):
            raise DataError(need.missing(column, which, columns, has_truth))
        raise DataError(
            f"reward {need!r} needs column {column!r}, which the {which} data lacks (columns: {', '.join(columns)})"
        )


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
