"""What the three-split data loading costs: the login-node check (precheck_files, no `datasets`) and load_splits
(at training start) for the built-in task, one jsonl file, shard directories (jsonl, parquet) and save_to_disk
directories (a Dataset, a DatasetDict with train/validation/test), all with the same GSM8K-sized rows.

    python -m bench.data_splits [--rows 7473] [--shards 8]

Each case is timed twice: the first load_splits of a file or shard directory builds `datasets`' Arrow cache, the
second reads it. Prints a markdown table.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from bench._common import compose, parser


def rows(n: int, start: int = 0) -> list[dict]:
    # GSM8K-like: a ~250-character question, a worked answer ending in "#### N"
    return [
        {
            "question": f"Problem {i}: " + "Tom has some boxes of pens and gives a few away. " * 5 + "How many?",
            "answer": f"{i} * 3 = {3 * i}\n#### {3 * i}",
        }
        for i in range(start, start + n)
    ]


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--rows", type=int, default=7473)
    cli.add_argument("--shards", type=int, default=8)
    args = cli.parse_args()

    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from grpo_sweep.data import load_splits, precheck_files

    datasets.disable_progress_bars()
    tmp = Path(tempfile.mkdtemp(prefix="data_splits_"))
    os.environ["HF_DATASETS_CACHE"] = str(tmp / "hf_cache")  # a cold cache: the first load pays the Arrow build
    all_rows = rows(args.rows)
    per = -(-args.rows // args.shards)
    (tmp / "one.jsonl").write_text("".join(json.dumps(r) + "\n" for r in all_rows))
    for fmt in ("jsonl", "parquet"):
        (tmp / fmt).mkdir()
        for k in range(args.shards):
            part = all_rows[k * per : (k + 1) * per]
            if fmt == "jsonl":
                (tmp / fmt / f"part-{k:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
            else:
                pq.write_table(pa.Table.from_pylist(part), tmp / fmt / f"part-{k:05d}.parquet")
    full = datasets.Dataset.from_list(all_rows)
    full.save_to_disk(str(tmp / "saved"))
    n_val = n_test = max(1, args.rows // 10)
    datasets.DatasetDict(
        train=full.select(range(n_val + n_test, args.rows)),
        validation=full.select(range(n_val)),
        test=full.select(range(n_val, n_val + n_test)),
    ).save_to_disk(str(tmp / "saved_dict"))

    cases = [("built-in task (`data=arithmetic`)", [])]
    common = [
        "data=file",
        "data.prompt_column=question",
        "data.ground_truth_column=answer",
        "data.ground_truth_after='####'",
    ]
    for name, path in (
        ("one jsonl file", "one.jsonl"),
        (f"{args.shards} jsonl shards", "jsonl"),
        (f"{args.shards} parquet shards", "parquet"),
        ("save_to_disk Dataset", "saved"),
        ("save_to_disk DatasetDict (train/validation/test)", "saved_dict"),
    ):
        cases.append((name, [*common, f"data.path={tmp / path}"]))
    print(f"{args.rows} rows ({(tmp / 'one.jsonl').stat().st_size / 1e6:.1f} MB as jsonl), {args.shards} shards\n")
    print(
        "| data | splits (train / validation / test) | precheck_files (s) | load_splits, first (s) | "
        "load_splits, again (s) |"
    )
    print("|---|---|---|---|---|")
    for name, overrides in cases:
        cfg = compose(overrides)
        started = time.perf_counter()
        precheck_files(cfg.data, True)
        pre = time.perf_counter() - started
        times = []
        for _ in range(2):
            started = time.perf_counter()
            splits = load_splits(cfg.data, need_ground_truth=True)
            times.append(time.perf_counter() - started)
        sizes = " / ".join(f"{len(s):,}" for s in splits)
        print(f"| {name} | {sizes} | {pre:.3f} | {times[0]:.2f} | {times[1]:.2f} |")


if __name__ == "__main__":
    main()
