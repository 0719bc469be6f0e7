"""What a ``data.path`` (or ``validation_path`` / ``test_path``) points at, and how its rows are read.

A path is one file, a directory of shards of one format, or a directory that ``datasets``' ``save_to_disk`` wrote
(a ``Dataset``, or a ``DatasetDict`` of named splits). Telling them apart and reading rows for the login-node
check need only the standard library and pyarrow; ``load`` (training) imports ``datasets``.
"""

from __future__ import annotations

import bisect
import codecs
import json
import math
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config.show import first_line, shown

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

    def split(self, name: str, key: str) -> Source:
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
        raise DataError(
            f"{key} is empty; give a .jsonl/.json/.csv/.parquet file or a directory of them, or a save_to_disk "
            "directory"
        )
    where = Path(path).expanduser()
    if where.is_file():
        if where.suffix.lower() not in FILE_FORMATS:
            raise DataError(
                f"data file {str(where)!r} ({key}): unknown format {where.suffix!r}; use one of {sorted(FILE_FORMATS)}"
            )
        return Source(where, key, "file", (where,), FILE_FORMATS[where.suffix.lower()])
    if not where.is_dir():
        raise DataError(f"data file not found: {str(where)!r} ({key})")
    if (where / _DICT_FILE).is_file():
        info = _saved_json(where / _DICT_FILE, key)
        splits = info.get("splits") if isinstance(info, dict) else None
        if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
            raise DataError(
                f"{key}={str(where)!r}: its {_DICT_FILE} is {shown(info)}; save_to_disk writes "
                '{"splits": [<split names>]}'
            )
        return Source(where, key, "saved_dict", splits=tuple(splits))
    if all((where / name).is_file() for name in _DATASET_FILES):
        state = _saved_json(where / "state.json", key)
        listed = state.get("_data_files") if isinstance(state, dict) else None
        names = [f.get("filename") if isinstance(f, dict) else None for f in listed] if isinstance(listed, list) else []
        if not names or not all(isinstance(n, str) for n in names):
            raise DataError(
                f"{key}={str(where)!r}: its state.json is {shown(state)}; save_to_disk writes "
                '{"_data_files": [{"filename": ...}, ...]}'
            )
        files = tuple(where / name for name in names)
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise DataError(f"{key}={str(where)!r}: its state.json names {missing[0]}, which is not there")
        return Source(where, key, "saved", files, "arrow")
    # Spark/Dask write _SUCCESS and .crc files beside the shards; a README may sit there too: only data files count
    shards = sorted(
        f for f in where.iterdir() if f.is_file() and f.suffix.lower() in FILE_FORMATS and f.name[0] not in "._"
    )
    if not shards:
        raise DataError(
            f"{key}={str(where)!r} is a directory with no .jsonl/.json/.csv/.parquet files and no save_to_disk "
            f"dataset ({_DICT_FILE}, or {' + '.join(_DATASET_FILES)})"
        )
    formats = sorted({FILE_FORMATS[f.suffix.lower()] for f in shards})
    if len(formats) > 1:
        counts = ", ".join(f"{sum(FILE_FORMATS[f.suffix.lower()] == fmt for f in shards)} {fmt}" for fmt in formats)
        raise DataError(
            f"{key}={str(where)!r} holds shards of several formats ({counts}); keep one format per directory"
        )
    return Source(where, key, "shards", tuple(shards), formats[0])


def _saved_json(path: Path, key: str) -> Any:
    """A save_to_disk record file's JSON (any value: the caller checks its shape)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError, RecursionError) as exc:  # not JSON, not UTF-8, unreadable
        raise DataError(f"{key}={str(path.parent)!r}: unreadable {path.name} ({first_line(exc)})") from None


def load(source: Source):
    """The rows of ``source`` as one ``datasets.Dataset`` (not for a DatasetDict: take one of its splits)."""
    import datasets

    try:
        if source.kind == "saved":
            loaded = datasets.load_from_disk(str(source.path))
        else:
            loaded = datasets.load_dataset(source.format, data_files=[str(f) for f in source.files], split="train")
    except Exception as exc:  # any reader's failure on the user's files: one line naming the path
        raise DataError(f"{source.key}={str(source.path)!r} cannot be read: {first_line(exc)}") from None
    if not isinstance(loaded, datasets.Dataset):
        raise DataError(f"{source.key}={str(source.path)!r} did not load as one dataset but as {type(loaded).__name__}")
    return loaded


class Rows:
    """The rows of a Source read for the login-node check, and where each one sits in its file (``place``, for
    messages). Just enough of ``datasets.Dataset`` (column_names, len, ds[column]) for the column checks."""

    def __init__(self) -> None:
        self.rows: list[dict] = []
        # (first row, file, unit, numbers): rows from ``first`` on sit in ``file`` at ``unit`` numbers[i]
        # (None: i + 1); an array, since a large file has a million of them
        self._parts: list[tuple[int, Path, str, Any]] = []

    def add(self, file: Path, unit: str, rows: list[dict], numbers: Any = None) -> None:
        self._parts.append((len(self.rows), file, unit, numbers))
        self.rows.extend(rows)

    @property
    def column_names(self) -> list[str]:
        return list(dict.fromkeys(k for row in self.rows[:1000] for k in row))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, column: str) -> list:
        return [row.get(column) for row in self.rows]

    def place(self, index: int) -> str:
        """Where row ``index`` is: ``data file '<path>' line 37``."""
        first, file, unit, numbers = self._parts[bisect.bisect_right([p[0] for p in self._parts], index) - 1]
        offset = index - first
        return _at(file, unit, numbers[offset] if numbers is not None else offset + 1)


def read_rows(source: Source) -> Rows:
    """All rows of ``source``, without ``datasets`` (the login-node check). A file that is not what its format
    says is a one-line DataError naming the file and the line (or item, or row) where it goes wrong."""
    out = Rows()
    for file in source.files:
        if source.format == "json":
            out.add(file, *_read_json(file))
        elif source.format == "csv":
            out.add(file, *_read_csv(file))
        else:
            out.add(file, "row", _read_table(file, "Arrow" if source.format == "arrow" else "Parquet"))
    return out


def _at(file: Path, unit: str = "", number: int = 0) -> str:
    return f"data file {str(file)!r}" + (f" {unit} {number}" if unit else "")


def _text(file: Path) -> str:
    """The file as text: UTF-8 (a leading byte-order mark is dropped, as pyarrow's reader does)."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise DataError(f"{_at(file)} cannot be read: {exc.strerror or exc}") from None
    data = data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"{_at(file, 'line', line)}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None


def _loads(text: str, file: Path) -> Any:
    """The whole file's one JSON value."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _not_json(exc, _at(file, "line", exc.lineno)) from None
    except (ValueError, RecursionError) as exc:
        raise _not_json(exc, _at(file)) from None


def _not_json(exc: BaseException, where: str) -> DataError:
    if isinstance(exc, json.JSONDecodeError):
        return DataError(f"{where}: not JSON ({exc.msg} at column {exc.colno})")
    # a 5000-digit number, arrays nested thousands deep
    return DataError(f"{where}: not JSON this reader takes ({type(exc).__name__}: {first_line(exc)[:80]})")


def _read_json(file: Path) -> tuple[str, list[dict], Any]:
    """(unit, rows, numbers) of a .json/.jsonl file, read the ways ``datasets``' json loader reads one: a JSON
    array (of objects, or of strings: a ``text`` column), one object per line (blank lines skipped), or one object
    spread over many lines (one row)."""
    text = _text(file)
    if text.lstrip().startswith("["):
        return ("item", *_items(file, _loads(text, file)))
    rows, numbers = [], array("q")
    # split at "\n" only: a JSON string may hold U+2028 and the other breaks str.splitlines() would split at
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:
            if not rows and (one := _one_object(file, text)) is not None:
                return "line", one, None
            raise _not_json(exc, _at(file, "line", number)) from None
        if not isinstance(row, dict):
            raise DataError(f"{_at(file, 'line', number)}: expected a JSON object per line, got {shown(row)}")
        rows.append(row)
        numbers.append(number)
    return "line", rows, numbers


def _items(file: Path, items: list) -> tuple[list[dict], None]:
    if all(isinstance(item, str) for item in items):  # datasets reads a list of strings as a `text` column
        return [{"text": item} for item in items], None
    for number, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise DataError(
                f"{_at(file, 'item', number)}: expected a JSON object per item of the list, got {shown(item)}"
            )
    return items, None


def _one_object(file: Path, text: str) -> list[dict] | None:
    """The one row of a file that is one JSON object over many lines (pyarrow's reader, which datasets uses, reads
    it so: its keys are the columns of one row); None when the file is not one JSON value."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        raise DataError(f"{_at(file)}: expected one JSON object per line or a list of objects, got {shown(value)}")
    return [value]


def _read_csv(file: Path) -> tuple[str, list[dict], Any]:
    """(unit, rows, numbers) of a CSV file with a header line, as pandas (datasets' reader) takes it: blank lines
    skipped, a short row's missing fields and empty fields None; a row with more fields than the header refused."""
    import csv
    import io

    # a prompt may be longer than the csv module's default field limit (128 KiB); pandas has none
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
    reader = csv.reader(io.StringIO(_text(file), newline=""))
    rows, numbers = [], array("q")
    try:
        header = next((fields for fields in reader if fields), [])  # pandas skips blank lines before it
        for fields in reader:
            if not fields:
                continue
            if len(fields) > len(header):
                raise DataError(
                    f"{_at(file, 'line', reader.line_num)}: {len(fields)} fields, but the header has "
                    f"{len(header)} ({shown(header)})"
                )
            rows.append({k: (v if v != "" else None) for k, v in zip(header, fields + [""] * len(header))})
            numbers.append(reader.line_num)
    except csv.Error as exc:
        raise DataError(f"{_at(file, 'line', reader.line_num)}: not CSV ({exc})") from None
    return "line", rows, numbers


def _read_table(file: Path, kind: str) -> list[dict]:
    """A Parquet file, or (``kind="Arrow"``) a save_to_disk shard: Arrow's streaming format (what datasets writes),
    or its file format."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        if kind == "Parquet":
            return pq.read_table(file).to_pylist()
        try:
            with pa.ipc.open_stream(file) as reader:
                return reader.read_all().to_pylist()
        except pa.ArrowInvalid:
            with pa.ipc.open_file(file) as reader:
                return reader.read_all().to_pylist()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DataError(f"{_at(file)} cannot be read as {kind}: {first_line(exc)}") from None


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
