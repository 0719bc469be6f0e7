"""What a ``data.path`` (or ``validation_path`` / ``test_path``) points at, and how its rows are read.

A path is one file, a directory of shards of one format, or a directory that ``datasets``' ``save_to_disk`` wrote
(a ``Dataset``, or a ``DatasetDict`` of named splits). Telling them apart and reading rows for the login-node
check need only the standard library and pyarrow; ``load`` (training) imports ``datasets``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
# save_to_disk's marker files: a Dataset directory has both of the first two, a DatasetDict directory the third
_DATASET_FILES = ("state.json", "dataset_info.json")
_DICT_FILE = "dataset_dict.json"
# The names a DatasetDict's validation split goes by (the hub's own datasets use all of them)
VALIDATION_NAMES = ("validation", "valid", "val", "dev")


class DataError(ValueError):
    """The data named in config cannot be loaded or lacks what the rewards need."""


@dataclass(frozen=True)
class Source:
    """One located path. kind: ``file``, ``shards`` (a directory of data files), ``saved`` (a save_to_disk
    Dataset: ``files`` are its arrow files) or ``saved_dict`` (a save_to_disk DatasetDict: ``splits``)."""

    path: Path
    key: str
    kind: str
    files: tuple[Path, ...] = ()
    format: str = ""
    splits: tuple[str, ...] = field(default=())

    def split(self, name: str, key: str) -> "Source":
        """A DatasetDict's split ``name`` (a save_to_disk Dataset directory of its own)."""
        return locate(str(self.path / name), key)

    def name(self) -> str:
        """How messages name it: the key and the path."""
        return f"{self.key}={str(self.path)!r}"

    def nbytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def locate(path: str | None, key: str) -> Source:
    """The Source at ``path`` (``key``: the config key that named it, for messages), or a one-line DataError."""
    if not path:
        raise DataError(f"{key} is empty; give a .jsonl/.json/.csv/.parquet file or a directory of them, or a save_to_disk directory")
    where = Path(path).expanduser()
    if where.is_file():
        if where.suffix.lower() not in FILE_FORMATS:
            raise DataError(f"data file {str(where)!r} ({key}): unknown format {where.suffix!r}; use one of {sorted(FILE_FORMATS)}")
        return Source(where, key, "file", (where,), FILE_FORMATS[where.suffix.lower()])
    if not where.is_dir():
        raise DataError(f"data file not found: {str(where)!r} ({key})")
    if (where / _DICT_FILE).is_file():
        try:
            splits = tuple(json.loads((where / _DICT_FILE).read_text())["splits"])
        except (ValueError, KeyError, TypeError, OSError) as exc:
            raise DataError(f"{key}={str(where)!r}: unreadable {_DICT_FILE} ({exc})") from None
        return Source(where, key, "saved_dict", splits=splits)
    if all((where / name).is_file() for name in _DATASET_FILES):
        try:
            state = json.loads((where / "state.json").read_text())
            files = tuple(where / f["filename"] for f in state["_data_files"])
        except (ValueError, KeyError, TypeError, OSError) as exc:
            raise DataError(f"{key}={str(where)!r}: unreadable save_to_disk state.json ({exc})") from None
        return Source(where, key, "saved", files, "arrow")
    # Spark/Dask write _SUCCESS and .crc files beside the shards; a README may sit there too: only data files count
    shards = sorted(f for f in where.iterdir() if f.is_file() and f.suffix.lower() in FILE_FORMATS and f.name[0] not in "._")
    if not shards:
        raise DataError(
            f"{key}={str(where)!r} is a directory with no .jsonl/.json/.csv/.parquet files and no save_to_disk "
            f"dataset ({_DICT_FILE}, or {' + '.join(_DATASET_FILES)})"
        )
    formats = sorted({FILE_FORMATS[f.suffix.lower()] for f in shards})
    if len(formats) > 1:
        counts = ", ".join(f"{sum(FILE_FORMATS[f.suffix.lower()] == fmt for f in shards)} {fmt}" for fmt in formats)
        raise DataError(f"{key}={str(where)!r} holds shards of several formats ({counts}); keep one format per directory")
    return Source(where, key, "shards", tuple(shards), formats[0])


def load(source: Source):
    """The rows of ``source`` as one ``datasets.Dataset`` (not for a DatasetDict: take one of its splits)."""
    import datasets

    try:
        if source.kind == "saved":
            loaded = datasets.load_from_disk(str(source.path))
        else:
            loaded = datasets.load_dataset(source.format, data_files=[str(f) for f in source.files], split="train")
    except Exception as exc:  # any reader's failure on the user's files: one line naming the path
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DataError(f"{source.key}={str(source.path)!r} cannot be read: {first}") from None
    if not isinstance(loaded, datasets.Dataset):
        raise DataError(f"{source.key}={str(source.path)!r} did not load as one dataset but as {type(loaded).__name__}")
    return loaded


def read_rows(source: Source) -> list[dict]:
    """All rows of ``source`` as dicts, without ``datasets`` (the login-node check)."""
    rows: list[dict] = []
    for file in source.files:
        rows.extend(_read_arrow(file) if source.format == "arrow" else _read_file(file))
    return rows


def _read_file(file: Path) -> list[dict]:
    suffix = file.suffix.lower()
    try:
        if suffix == ".jsonl" or (suffix == ".json" and file.read_text().lstrip()[:1] != "["):
            return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        if suffix == ".json":
            return json.loads(file.read_text())
        if suffix == ".csv":
            import csv

            with file.open(newline="") as f:
                return [{k: (v if v != "" else None) for k, v in row.items()} for row in csv.DictReader(f)]
        import pyarrow.parquet as pq

        return pq.read_table(file).to_pylist()
    except (ValueError, OSError, ImportError) as exc:
        raise DataError(f"data file {str(file)!r} cannot be read: {exc}") from None


def _read_arrow(file: Path) -> list[dict]:
    """A save_to_disk shard: Arrow's streaming format (what datasets writes), or its file format."""
    try:
        import pyarrow as pa

        try:
            with pa.ipc.open_stream(file) as reader:
                return reader.read_all().to_pylist()
        except pa.ArrowInvalid:
            with pa.ipc.open_file(file) as reader:
                return reader.read_all().to_pylist()
    except (ValueError, OSError, ImportError) as exc:
        raise DataError(f"data file {str(file)!r} cannot be read: {exc}") from None


def check_size(value: Any, key: str) -> None:
    """A carved split's size: a fraction in (0, 1) or a whole number of rows >= 1."""
    ok = not isinstance(value, bool) and (
        (isinstance(value, int) and value >= 1) or (isinstance(value, float) and 0 < value < 1)
    )
    if not ok:
        raise DataError(f"{key}={value!r}: give a fraction of the train rows in (0, 1) or a number of rows >= 1")


def carved_counts(n_rows: int, sizes: dict[str, tuple[Any, str]], where: str) -> dict[str, int]:
    """Rows to carve for each split in ``sizes`` (split -> (size, its config key)) from ``n_rows`` train rows.
    A fraction rounds up, as datasets' train_test_split does, so no carved split is empty."""
    counts = {}
    for split, (size, key) in sizes.items():
        check_size(size, key)
        counts[split] = math.ceil(size * n_rows) if isinstance(size, float) else int(size)
    if sizes and sum(counts.values()) >= n_rows:
        asked = " and ".join(f"{key}={size!r} ({counts[s]} rows)" for s, (size, key) in sizes.items())
        raise DataError(f"{asked} leave none of the {n_rows} rows of {where} to train on; lower them or give the split")
    return counts


def carve_order(n_rows: int, seed: int):
    """The seeded permutation that carving takes its splits from: test first, then validation, the rest train.
    Test therefore stays the same rows when only the validation size changes."""
    import numpy as np

    return np.random.default_rng(seed).permutation(n_rows)
