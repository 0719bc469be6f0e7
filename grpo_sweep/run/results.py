"""What a run leaves in its directory and how it is read back: summary.json (through the schema), per-question
outcomes, the names of its files and of the metrics a summary is looked up by. Written through run/files.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

from .files import write_json_atomic, write_jsonl_atomic
from .record import SUMMARY_NAME, VAL_ACCURACY, VAL_ACCURACY_LENIENT, VAL_REWARDS, RunFailed, RunSummary

SUMMARY = SUMMARY_NAME
METRICS = "metrics.jsonl"
# the best validation step's adapter and its record (run/evaluate.PeriodicEval)
BEST_DIR = "best"
SAMPLES = "samples.jsonl"
# Per-question outcomes of the evaluations a run reports, one JSONL file each under outcomes/: ``val`` (validation
# at the reported step), ``val_before``, ``test`` (the reported adapter, once, after training) and ``test_before``.
# A row: {"key": question_key(prompt), "accuracy": 1.0 | 0.0 | null, "accuracy_lenient": ..., and on test with
# sampling "pass_at_k", "maj_at_k"}. The sweep's verdicts pair runs by seed and by question through ``key``.
OUTCOMES = "outcomes"
OUTCOME_SETS = ("val", "val_before", "test", "test_before")
# Beside them: what every evaluation decoded with and which engine generated it (run/evaluate.Evaluator.decodings).
DECODING = "decoding.json"


def read_run_summary(run_dir: Path) -> tuple[RunSummary | None, str | None]:
    """(summary, None); (None, None) when there is no summary.json yet; (None, why) when it cannot be read.

    The one reader of summary.json: through the schema, and a half-written or unreadable file is reported with its
    reason in one line, not raised (a tool reading many runs shows it and goes on).
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
        return RunSummary.from_dict(data), None
    except ValueError as exc:  # not an object, or no status: the schema says which, in one line
        return None, str(exc)


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


class OutcomesDamaged(ValueError):
    """An outcomes file that is there but cannot be what its run wrote (written whole, atomically): its reason, one
    line, naming the file."""


def read_outcomes(
    run_dir: Path, name: str, field: str = "accuracy", expected: int | None = None
) -> dict[str, float | None] | None:
    """{question key: that question's ``field``} of one outcomes file; None when the run has no such file (an
    older run, a pruned or failed one). A question judged None (no usable ground truth) stays None.

    OutcomesDamaged when the file is there but damaged: not a file, unreadable, empty, a line that is not a question's
    row, or fewer rows than the ``expected`` questions (the summary's ``<split>_samples``)."""
    path = outcomes_path(run_dir, name)
    shown = f"{OUTCOMES}/{path.name}"
    if not path.exists():
        return None
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:  # a directory in its place, no permission, binary junk
        why = getattr(exc, "strerror", None) or exc
        raise OutcomesDamaged(f"{shown} cannot be read ({type(exc).__name__}: {why})") from None
    out: dict[str, float | None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if not isinstance(row, dict) or "key" not in row:
            raise OutcomesDamaged(f"{shown} line {number} is not a question's row (cut short or edited?)")
        value = row.get(field)
        out[str(row["key"])] = float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
    if not out:
        raise OutcomesDamaged(f"{shown} is empty")
    if isinstance(expected, int) and len(out) < expected:
        raise OutcomesDamaged(f"{shown} holds {len(out)} of the run's {expected} questions")
    return out


class EvaluationFailed(RunFailed):
    """The evaluation after training raised; the run's adapter is saved and its record, ``summary``, written, says
    so."""


def record_failure(
    run_dir: Path,
    error: str,
    overrides: Iterable[str],
    traceback_text: str = "",
    runtime_s: float | None = None,
    keep_recorded: bool = False,
    **extra: Any,
) -> dict:
    """Write the summary of a run that did not finish, the one way every path does it (a run that raised, a run the
    gate refused, a worker process that died, a failed Optuna trial), so the table, report and status read the
    same fields: ``status: failed``, ``error``, the end of its traceback, ``overrides``, ``runtime_s``, ``run_dir``.

    ``keep_recorded``: when the run already recorded its own failure (train() writes a fuller one), keep that, with
    ``extra`` added (an Optuna trial's block)."""
    if keep_recorded:
        previous, _ = read_run_summary(run_dir)
        if previous is not None and previous.status == "failed":
            return write_summary(run_dir, {**previous.to_dict(), **extra}) if extra else previous.to_dict()
    summary = {"status": "failed", "error": error, "overrides": list(overrides), "run_dir": str(run_dir)}
    if traceback_text:
        summary["traceback"] = traceback_text[-4000:]
    if runtime_s is not None:
        summary["runtime_s"] = round(runtime_s, 3)
    summary.update(extra)
    return write_summary(run_dir, summary)


# summary.json keys the validation evaluation measures at every evaluation, so a best step can be chosen on them
# (`val_rewards.<reward>` for any reward of the mix); `best.<key>` names that key's value at the best step.
PERIODIC_METRICS = (VAL_ACCURACY, VAL_ACCURACY_LENIENT, f"{VAL_REWARDS}.")
BEST_PREFIX = "best."


def without_best(metric: str) -> str:
    """The metric without its ``best.`` (``best.val_rewards.correct``: ``val_rewards.correct``); any other as it is."""
    return metric[len(BEST_PREFIX) :] if metric.startswith(BEST_PREFIX) else metric


def measured_periodically(metric: str) -> bool:
    base = without_best(metric)
    return base in PERIODIC_METRICS[:2] or base.startswith(PERIODIC_METRICS[2])


# the figures summary.json holds under these names, per reward term (``val_rewards.<term>``), that an objective may be
FIGURES = (VAL_ACCURACY, VAL_ACCURACY_LENIENT, "reward")
TERM_FIGURES = (VAL_REWARDS, "train_rewards")


def check_metric_name(metric: str, terms: Any, setting: str = "optimized_metric") -> None:
    """Refuse, in one line, an objective that names no figure a run reports (every trial or member would train and
    then have no value): ``terms``, the mix's reward names. The test split's figures are validate's to refuse.
    ValueError."""
    base = without_best(str(metric))
    known = {*FIGURES, *(f"{group}.{t}" for group in TERM_FIGURES for t in terms)}
    if base in known or base.startswith("test_"):
        return
    raise ValueError(
        f"{setting}={metric!r} is no figure a run reports; use one of {', '.join(FIGURES)}, "
        f"{VAL_REWARDS}.<term> or train_rewards.<term> (terms: {', '.join(map(str, terms)) or 'none'}), "
        "or best.<a val_ figure>"
    )


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
