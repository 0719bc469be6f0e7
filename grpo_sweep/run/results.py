"""What a run leaves in its directory: metrics.jsonl, summary.json, samples.jsonl — written so nothing is lost."""
from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

from .redact import redact
from .summary import SUMMARY_NAME, RunSummary

SUMMARY = SUMMARY_NAME
METRICS = "metrics.jsonl"
SAMPLES = "samples.jsonl"
# Per-question outcomes of the evaluations a run reports, one JSONL file each under outcomes/: ``val`` (validation
# at the reported step), ``val_before``, ``test`` (the reported adapter, once, after training) and ``test_before``.
# A row: {"key": question_key(prompt), "accuracy": 1.0 | 0.0 | null, "accuracy_lenient": ..., and on test with
# sampling "pass_at_k", "maj_at_k"}. The sweep's verdicts pair runs by seed and by question through ``key``.
OUTCOMES = "outcomes"
OUTCOME_SETS = ("val", "val_before", "test", "test_before")


_UMASK = os.umask(0)
os.umask(_UMASK)  # reading the umask means setting it: put it straight back


def write_text_atomic(path: Path, text: str) -> None:
    """Temp file in the same directory, fsync, rename: a reader (or a crash) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a run's files are read by the people sharing the sweep directory, so they
        # get the mode any new file gets here (0666 less the umask)
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """JSON, secrets masked (see redact.py), written atomically."""
    write_text_atomic(path, json.dumps(redact(data), indent=2, default=_jsonable) + "\n")


def write_jsonl_atomic(path: Path, rows: Iterable[dict]) -> None:
    write_text_atomic(path, "".join(json.dumps(redact(row), default=_jsonable) + "\n" for row in rows))


def append_jsonl(path: Path, row: dict) -> None:
    """One row appended as a line, NaN/inf as null, secrets masked (a line cut by a kill is skipped on read)."""
    with Path(path).open("a") as f:
        f.write(json.dumps(redact({k: clean_number(v) for k, v in row.items()}), default=_jsonable) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:  # a line cut short by a kill: skip it
                    continue
    return rows


def iter_jsonl(path: Path) -> Iterator[dict]:
    """The rows of a JSONL file one at a time (a sweep's metrics need not all be in memory); a cut line is skipped."""
    try:
        f = Path(path).open()
    except FileNotFoundError:
        return
    with f:
        for line in f:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by a kill: skip it
                    continue
                if isinstance(row, dict):
                    yield row


def read_summary_checked(run_dir: Path) -> tuple[dict | None, str | None]:
    """(summary, None); (None, None) when there is no summary.json yet; (None, why) when it cannot be read.

    For tools that read many runs: one half-written or unreadable summary is reported with its reason, not raised.
    """
    path = Path(run_dir) / SUMMARY
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{SUMMARY} cannot be read: {type(exc).__name__}: {exc}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"{SUMMARY} is not valid JSON (half-written?): {exc}"
    try:
        return RunSummary.from_dict(data).to_dict(), None
    except ValueError as exc:  # not an object, or no status: the schema says which, in one line
        return None, str(exc)


def read_run_summary(run_dir: Path) -> tuple[RunSummary | None, str | None]:
    """``read_summary_checked`` as the schema: (RunSummary, None), (None, None) when there is none yet, (None, why)."""
    data, problem = read_summary_checked(run_dir)
    return (None if data is None else RunSummary.from_dict(data)), problem


def write_summary(run_dir: Path, summary: dict | RunSummary) -> dict:
    """Write ``summary.json`` through the schema (a summary without a status is refused); return what was written."""
    data = (summary if isinstance(summary, RunSummary) else RunSummary.from_dict(summary)).to_dict()
    write_json_atomic(Path(run_dir) / SUMMARY, data)
    return data


def question_key(prompt: Any) -> str:
    """A question's identity across runs: a hash of its prompt (chat messages or text), the same in every run of
    the same data."""
    import hashlib

    return hashlib.sha256(json.dumps(prompt, sort_keys=True, default=str).encode()).hexdigest()[:16]


def outcomes_path(run_dir: Path, name: str) -> Path:
    if name not in OUTCOME_SETS:
        raise ValueError(f"outcomes {name!r}: use one of {', '.join(OUTCOME_SETS)}")
    return Path(run_dir) / OUTCOMES / f"{name}.jsonl"


def write_outcomes(run_dir: Path, name: str, rows: Iterable[dict]) -> None:
    write_jsonl_atomic(outcomes_path(run_dir, name), rows)


def read_outcomes(run_dir: Path, name: str, field: str = "accuracy") -> dict[str, float | None] | None:
    """{question key: that question's ``field``} of one outcomes file; None when the run has no such file (an
    older run, a pruned or failed one). A question judged None (no usable ground truth) stays None."""
    path = outcomes_path(run_dir, name)
    if not path.is_file():
        return None
    out: dict[str, float | None] = {}
    for row in iter_jsonl(path):
        value = row.get(field)
        out[str(row["key"])] = float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
    return out


def read_summary(run_dir: Path) -> dict | None:
    path = Path(run_dir) / SUMMARY
    if not path.exists():
        return None
    return json.loads(path.read_text())


def record_failure(run_dir: Path, error: str, overrides: Iterable[str], traceback_text: str = "",
                   runtime_s: float | None = None, keep_recorded: bool = False, **extra: Any) -> dict:
    """Write the summary of a run that did not finish, the one way every path does it (a run that raised, a run the
    gate refused, a worker process that died, a failed Optuna trial), so the table, report and status read the
    same fields: ``status: failed``, ``error``, the end of its traceback, ``overrides``, ``runtime_s``, ``run_dir``.

    ``keep_recorded``: when the run already recorded its own failure (train() writes a fuller one), keep that."""
    if keep_recorded and (previous := read_summary(run_dir)) and previous.get("status") == "failed":
        return previous
    summary = {"status": "failed", "error": error, "overrides": list(overrides), "run_dir": str(run_dir)}
    if traceback_text:
        summary["traceback"] = traceback_text[-4000:]
    if runtime_s is not None:
        summary["runtime_s"] = round(runtime_s, 3)
    summary.update(extra)
    return write_summary(run_dir, summary)


def _jsonable(value: Any):
    if hasattr(value, "item"):  # numpy / torch scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def clean_number(value: Any) -> Any:
    """NaN/inf are not JSON; store them as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# summary.json keys the validation evaluation measures at every evaluation, so a best step can be chosen on them
# (`val_rewards.<reward>` for any reward of the mix); `best.<key>` names that key's value at the best step.
PERIODIC_METRICS = ("val_accuracy", "val_accuracy_lenient", "val_rewards.")
BEST_PREFIX = "best."


def without_best(metric: str) -> str:
    """``val_accuracy`` for ``best.val_accuracy``; any other metric as it is."""
    return metric[len(BEST_PREFIX):] if metric.startswith(BEST_PREFIX) else metric


def measured_periodically(metric: str) -> bool:
    base = without_best(metric)
    return base in PERIODIC_METRICS[:2] or base.startswith(PERIODIC_METRICS[2])


def lookup(summary: dict, dotted: str) -> Any:
    """``summary["a"]["b"]`` for ``"a.b"``; a flat key containing dots wins."""
    if dotted in summary:
        return summary[dotted]
    node: Any = summary
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def reward_trajectory(history: list[dict], key: str) -> tuple[float | None, float | None]:
    """Mean of ``key`` over the first and the last fifth of the logged steps (single steps are noisy)."""
    values = [row[key] for row in history if isinstance(row.get(key), (int, float)) and math.isfinite(row[key])]
    if not values:
        return None, None
    window = max(1, len(values) // 5)
    return sum(values[:window]) / window, sum(values[-window:]) / window


# --- what a run cost: device time and generated tokens (train.py stores them, the report and W&B sum them) ---

def generated_tokens(history: list[dict], generation_batch_size: int, gradient_accumulation_steps: int,
                     steps_per_generation: int, num_iterations: int = 1) -> int | None:
    """Completion tokens sampled during training, from TRL's logged ``completions/mean_length``.

    TRL's own counter, ``num_tokens`` (``state.num_input_tokens_seen``), adds the prompt tokens, so it is not what
    generation cost. TRL generates ``generation_batch_size`` completions (all processes) at every
    ``steps_per_generation * num_iterations``-th micro-batch, and a logged row's ``completions/mean_length`` is the
    mean over the generations since the previous row: tokens = mean length × completions generated in between.
    Exact when every step was logged from the first (a resume restarts TRL's generation cycle at the checkpoint:
    still exact when checkpoints fall on generation boundaries, as with the default steps_per_generation).
    """
    every = steps_per_generation * num_iterations  # micro-batches between generations
    total, previous, seen = 0.0, 0, False
    for row in history:
        length = row.get("completions/mean_length")
        if "train_runtime" in row or not isinstance(row.get("step"), int) or not isinstance(length, (int, float)):
            continue
        step = row["step"]
        # generations happen at micro-batches 0, every, 2*every, ...; optimizer step s holds micro-batches
        # [(s-1)*GA, s*GA): those of steps previous+1..step are [previous*GA, step*GA)
        calls = -(-step * gradient_accumulation_steps // every) - -(-previous * gradient_accumulation_steps // every)
        total += length * generation_batch_size * calls
        previous, seen = step, True
    return round(total) if seen else None


def run_cost(timings: dict, history: list[dict], args: Any) -> dict:
    """``device_seconds``, ``generated_tokens`` and ``tokens_per_s`` of a run, for its summary.json.

    device_seconds: wall seconds the run kept its device busy: training (its periodic evaluations included),
    saving and the final evaluation, i.e. ``timings_s`` train + save + eval. Process start-up and set-up (imports,
    data, model load) are left out: they are the same for every configuration of a sweep and mostly disk or
    network. On CPU it is the same wall time (the process holds its cores throughout).
    generated_tokens: completion tokens sampled in training (``generated_tokens`` above); the evaluations'
    completions are not counted. tokens_per_s: generated_tokens / device_seconds, i.e. training tokens per
    device-second the run cost (a cost rate; evaluation time is in the denominator, so it is below raw speed).
    ``args`` is the run's GRPOConfig (its generation_batch_size, gradient_accumulation_steps, ...).
    """
    parts = [timings.get(k) for k in ("train", "save", "eval")]
    seconds = sum(p for p in parts if isinstance(p, (int, float))) if isinstance(parts[0], (int, float)) else None
    tokens = generated_tokens(history, args.generation_batch_size, args.gradient_accumulation_steps,
                              args.steps_per_generation, getattr(args, "num_iterations", 1) or 1)
    rate = tokens / seconds if tokens is not None and seconds else None
    return {"device_seconds": None if seconds is None else round(seconds, 3), "generated_tokens": tokens,
            "tokens_per_s": None if rate is None else round(rate, 1)}


def cost_totals(summaries: list[RunSummary]) -> dict:
    """A sweep's cost: summed device seconds and generated tokens, tokens per device-second, runs counted."""
    costed = [s for s in summaries if isinstance(s.device_seconds, (int, float))]
    seconds = sum(s.device_seconds for s in costed)
    tokens = sum(s.generated_tokens for s in costed if isinstance(s.generated_tokens, int))
    return {"runs": len(costed), "of": len(summaries), "device_seconds": seconds, "generated_tokens": tokens,
            "tokens_per_s": tokens / seconds if seconds else None}


def cost_line(summaries: list[RunSummary]) -> str | None:
    """``Cost: ...`` for a sweep's report and terminal table; None when no run recorded its cost."""
    t = cost_totals(summaries)
    if not t["runs"]:
        return None
    rate = "-" if t["tokens_per_s"] is None else f"{t['tokens_per_s']:,.0f}"
    line = (f"Cost: {t['device_seconds']:,.1f} device-seconds ({t['device_seconds'] / 3600:.2f} device-hours), "
            f"{t['generated_tokens']:,} completion tokens generated in training, {rate} tokens per device-second")
    missing = t["of"] - t["runs"]
    if missing:
        line += f"; {missing} of {t['of']} runs recorded no cost (running, failed, or written before cost was recorded)"
    return line


# A reward term that takes at least this share of the training time is named at the end of a run (app.format_summary).
COSTLY_SHARE = 0.05


def reward_cost(terms: dict[str, tuple[float, int]], timings: dict) -> dict:
    """summary.json's ``reward_cost``: per reward term (``terms``: name -> (seconds, calls), as rewards/guard.py
    times them), the wall seconds spent in it during training, its ``share`` of the training time and the
    ``calls`` (batches scored).

    The training time is ``timings_s`` train less eval_periodic: the wall time of the training steps as a whole
    (generation, rewards, loss and backward, the optimizer, checkpoints), what decides how long a run trains, on
    the clock the terms are timed on. TRL's ``step_time`` is not used: it leaves out the optimizer step and the
    checkpoints, and metrics.jsonl keeps only its mean per logging interval, so its sum would have to be rebuilt.
    A share is None when the training time is unknown."""
    train, periodic = timings.get("train"), timings.get("eval_periodic") or 0.0
    seconds = train - periodic if isinstance(train, (int, float)) else None
    return {name: {"seconds": round(spent, 4),
                   "share": round(spent / seconds, 5) if seconds else None,
                   "calls": calls}
            for name, (spent, calls) in terms.items()}


def costly_terms(summary: dict | RunSummary, threshold: float = COSTLY_SHARE) -> list[tuple[str, dict]]:
    """The terms of a run's ``reward_cost`` whose share is at least ``threshold``, costliest first."""
    cost = (summary.get("reward_cost") if isinstance(summary, dict) else summary.reward_cost) or {}
    found = [(name, c) for name, c in cost.items()
             if isinstance(c, dict) and isinstance(c.get("share"), (int, float)) and c["share"] >= threshold]
    return sorted(found, key=lambda item: -item[1]["share"])
