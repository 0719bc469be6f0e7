"""A sweep directory read back once: ``SweepResults.read(sweep_dir)``.

It reads each run's summary.json once (run/results.read_run_summary), its outcomes/test.jsonl once per field and its
metrics.jsonl at most once (``series``, for the plots, which also gives the last step), and computes the runs'
configurations, seeds, ranking and the comparisons (stats.compare) once, when first asked. Every renderer takes it:
the end-of-sweep table and the per-configuration lines (tables.py), report.md, runs.csv and the plots (report.py),
status (status.py), verdicts.json (sweep_end.py; the W&B callback reads that file) and the Optuna study report
(search/optuna/report.py). A configuration is a run's swept overrides other than seeds, as typed; its seed is the rest.
No torch, nothing imported beyond numpy until a comparison is asked for.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..run.record import OUTCOME_FIELDS, RunSummary
from ..run.results import METRICS, lookup, read_outcomes, read_run_summary
from . import stats

# The end of a sweep writes its verdicts here (sweep_end.py): the comparisons as JSON, for W&B and other readers.
VERDICTS_FILE = "verdicts.json"
# A run whose summary.json exists but cannot be read: its status, the reason its ``error``.
UNREADABLE = "unreadable"
NO_CONFIGURATION = "(defaults)"


def run_name(run_dir: Path, sweep_dir: Path) -> str:
    """A run as the tables name it: its path under the sweep (``3``, or ``trials/5/seed44`` for a replicated Optuna
    trial, whose runs' own directory names repeat across trials)."""
    try:
        return Path(run_dir).relative_to(sweep_dir).as_posix()
    except ValueError:
        return Path(run_dir).name


def last_step(run_dir: Path, tail_bytes: int = 16384) -> int | None:
    """The last logged step: read from the end of metrics.jsonl (a long run's file is hundreds of KB, and the status
    command reads one per run), the whole file only when its tail holds no step."""
    path = Path(run_dir) / METRICS
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - tail_bytes))
            lines = f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines):
        try:
            return json.loads(line)["step"]
        except (ValueError, KeyError, TypeError):
            continue  # the first line of the tail may be cut; a row without a step
    return last_step(run_dir, size + 1) if size > tail_bytes else None


def varying_overrides(all_sets: list[list[str] | None]) -> list[list[str]]:
    """Each run's overrides, keeping only those that differ across the sweep (the swept axes)."""
    all_sets = [overrides or [] for overrides in all_sets]
    common = set.intersection(*map(set, all_sets)) if len(all_sets) > 1 else set()
    return [[o for o in overrides if o not in common] for overrides in all_sets]


def param_text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _is_seed(override: str) -> bool:
    return stats.is_seed(override.partition("=")[0])


def _hydra_overrides(run_dir: Path) -> list[str]:
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "overrides.yaml"
    try:
        return [str(o) for o in OmegaConf.load(path)] if path.exists() else []
    except Exception:  # a half-written overrides.yaml: the run is still listed, without its overrides
        return []


def _order(name: str):
    return (0, int(name)) if name.isdigit() else (1, name)


@dataclass
class SweepRun:
    """One run of the sweep as every table sees it."""

    dir: Path
    summary: RunSummary  # status ``running`` without a summary.json, ``unreadable`` (reason in ``error``) for a bad one
    name: str  # its path under the sweep (run_name)
    overrides: list[str]  # the swept ones (varying_overrides)
    params: dict  # swept parameter -> value (the overrides, and an Optuna trial's params)
    label: str  # its overrides, or ``trial 5: lr=0.001`` for an Optuna trial
    config: str  # its configuration: the swept overrides other than seeds
    seed: tuple  # its seed overrides (``("trainer.seed=3",)``): what pairs runs across configurations

    @property
    def state(self) -> str:
        trial = self.summary.trial or {}
        return str(trial.get("state") or self.summary.status or "running")

    @property
    def objective(self) -> float | None:
        value = self.summary.objective
        if value is None:
            value = (self.summary.trial or {}).get("value")
        return value if isinstance(value, (int, float)) and math.isfinite(value) else None

    @property
    def seed_values(self) -> list[str]:
        return [o.partition("=")[2] for o in self.seed]


class SweepResults:
    """A sweep's runs (run order), read once; what is derived from them computed once, when first asked."""

    def __init__(
        self,
        sweep_dir: Path,
        runs: list[SweepRun],
        direction: str,
        judge: Callable[[SweepResults], list[stats.Comparison]] | None = None,
        verdicts: str = stats.DEFAULT_VERDICTS,
    ):
        self.sweep_dir, self.runs, self.direction = Path(sweep_dir), runs, direction
        self.verdicts = stats.check_mode(verdicts)  # how the comparisons estimate noise (stats.VERDICT_MODES)
        # the strategy that ran the sweep judges its configurations (search/base.py Strategy.comparisons); none: a
        # plain comparison of the configurations' seeds
        self._judge = judge
        self._by_dir = {run.dir.resolve(): run for run in runs}
        self._outcomes: dict = {}
        self._last_steps: dict = {}
        self._derived: dict = {}

    @classmethod
    def read(
        cls,
        sweep_dir: Path,
        direction: str | None = None,
        also: Sequence[Path] = (),
        judge: Callable[[SweepResults], list[stats.Comparison]] | None = None,
        not_runs: Sequence[str] = (),
        verdicts: str | None = None,
    ) -> SweepResults:
        """Every run directory under ``sweep_dir`` (those with .hydra/config.yaml), and the existing run directories
        ``also`` names (a submitted sweep's jobs.json names its runs; one may not have written its .hydra yet).
        ``direction``: how the objective ranks (default: a trial's, else maximize); ``judge``: the strategy's
        verdicts; ``not_runs``: files that mark a Hydra job directory holding no run (an Optuna worker's); ``verdicts``:
        strict or moderated (default: the sweep's hydra.sweeper.verdicts, verdicts_of)."""
        sweep_dir = Path(sweep_dir)
        run_dirs = [config.parent.parent for config in sorted(sweep_dir.glob("**/.hydra/config.yaml"))]
        seen = {run_dir.resolve() for run_dir in run_dirs}
        run_dirs += [Path(d) for d in also if Path(d).is_dir() and Path(d).resolve() not in seen]
        found = []
        for run_dir in run_dirs:
            if any((run_dir / marker).exists() for marker in not_runs):
                continue
            summary, problem = read_run_summary(run_dir)
            if problem:  # one bad run must not stop the table or the report of the others
                summary = RunSummary(status=UNREADABLE, error=problem)
            summary = summary or RunSummary(status="running")
            if summary.overrides is None:  # still running (or killed): Hydra wrote its overrides when it started
                summary = replace(summary, overrides=_hydra_overrides(run_dir))
            found.append((run_dir, summary))
        found.sort(key=lambda item: _order(item[0].name))
        swept = varying_overrides([summary.overrides for _, summary in found])
        runs = [
            _sweep_run(run_dir, summary, overrides, sweep_dir) for (run_dir, summary), overrides in zip(found, swept)
        ]
        direction = direction or _direction([summary for _, summary in found])
        return cls(sweep_dir, runs, direction, judge, verdicts or verdicts_of(sweep_dir))

    def derived(self, key: str, make: Callable[[], Any]) -> Any:
        """What a strategy derives from these runs (a seeds sweep's replayed design), made once."""
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]

    @property
    def summaries(self) -> list[RunSummary]:
        return [run.summary for run in self.runs]

    def run_at(self, run_dir: Path) -> SweepRun | None:
        return self._by_dir.get(Path(run_dir).resolve())

    @functools.cached_property
    def ranked(self) -> list[SweepRun]:
        """Best objective first; runs without one (failed, pruned early, still running) last, in run order."""
        sign = -1 if self.direction == "maximize" else 1
        return sorted(self.runs, key=lambda r: (r.objective is None, sign * (r.objective or 0.0)))

    @functools.cached_property
    def configurations(self) -> dict[str, list[SweepRun]]:
        """{configuration: its runs}, in order of first run."""
        groups: dict[str, list[SweepRun]] = {}
        for run in self.runs:
            groups.setdefault(run.config, []).append(run)
        return groups

    @property
    def seed_keys(self) -> list[str]:
        return sorted({o.partition("=")[0] for run in self.runs for o in run.seed})

    @property
    def seeds_swept(self) -> bool:
        """Some run has a seed override and some configuration more than one run."""
        return bool(self.seed_keys) and any(len(g) > 1 for g in self.configurations.values())

    @property
    def seed_hint(self) -> str:
        keys = self.seed_keys
        from .wording import DEFAULT_SEED_HINT

        return f"{keys[0]}=1,2,3" if keys else DEFAULT_SEED_HINT

    @functools.cached_property
    def comparisons(self) -> list[stats.Comparison]:
        """The configurations' verdicts, worded: the strategy's (``judge``), else ``compare``."""
        from .wording import describe

        return describe(self._judge(self) if self._judge else self.compare_configurations(), self.seed_hint)

    def compare_configurations(self) -> list[stats.Comparison]:
        """stats.compare over the configurations (ranked on validation, verdicts on its test counterpart with
        per-question outcomes where the runs saved them); none without a seed override (nothing to pair)."""
        if not self.seed_keys:
            return []
        groups = {config: [self.record(run) for run in group] for config, group in self.configurations.items()}
        return stats.compare(groups, self.direction, mode=self.verdicts)

    @property
    def why_none(self) -> str | None:
        """Why several configurations have no verdicts (one seed each), or None."""
        if len(self.configurations) >= 2 and not self.seed_keys:
            return (
                f"No verdicts: one seed per configuration cannot tell a difference from seed noise; add seeds "
                f"({self.seed_hint}) to compare them."
            )
        return None

    def record(self, run: SweepRun, split: str = "test") -> stats.RunRecord:
        """One run for stats.compare: its objective ranks (finished runs only: a pruned trial's is mid-training);
        its objective's test counterpart, per question when the objective is an accuracy, is what the verdict is
        about."""
        summary = run.summary
        value_key, field, accuracy = stats.verdict_source(summary.optimized_metric)
        if split == "val":  # the objective itself, per question where it is an accuracy
            field = OUTCOME_FIELDS.get(summary.optimized_metric)
            return stats.RunRecord(
                seed=run.seed,
                rank_value=summary.objective,
                value=summary.objective,
                n_questions=summary.val_samples if field else None,
                outcomes=self.outcomes(run, field, "val") if field else None,
            )
        return stats.RunRecord(
            seed=run.seed,
            rank_value=summary.objective if summary.status == "completed" else None,
            value=lookup(summary.to_dict(), value_key) if value_key else None,
            n_questions=summary.test_samples if accuracy else None,
            outcomes=self.outcomes(run, field) if field else None,
            rank_n_questions=summary.val_samples if accuracy else None,
        )

    def outcomes(self, run: SweepRun, field: str, split: str = "test") -> dict | None:
        """read_outcomes of ``run``, read once per (split, field)."""
        key = (run.dir, split, field)
        if key not in self._outcomes:
            self._outcomes[key] = read_outcomes(run.dir, split, field=field)
        return self._outcomes[key]

    def series(self, run_dir: Path, keys: Sequence[str]) -> tuple[dict[str, dict], int | None]:
        """plots.read_series of a run's metrics.jsonl, its last step kept for ``steps``: the file is opened once
        for both (the report draws its plots before it writes its runs table)."""
        from .plots import read_series

        series, last = read_series(run_dir, keys)
        self._last_steps[Path(run_dir)] = last
        return series, last

    def steps(self, run: SweepRun) -> int | None:
        """Its steps: the summary's, else the last logged one."""
        if run.summary.steps is not None:
            return run.summary.steps
        if run.dir not in self._last_steps:
            self._last_steps[run.dir] = last_step(run.dir)
        return self._last_steps[run.dir]

    def verdict_records(self) -> list[dict]:
        """The comparisons as JSON rows (verdicts.json, which W&B and other readers take without this package)."""
        from .wording import verdict_text

        keys = (
            "config",
            "rank_mean",
            "mean",
            "std",
            "delta",
            "low",
            "high",
            "verdict",
            "note",
            "mde",
            "seeds_needed",
            "method",
            "stopped",
            "reason",
            "se",
            "mde_one_more",
        )
        out = []
        for row in self.comparisons if len(self.configurations) >= 2 else []:
            record = {key: getattr(row, key, None) for key in keys}
            record["seeds"] = [stats.seed_text(seed) for seed in row.seeds]
            record["missing_seeds"] = [stats.seed_text(seed) for seed in row.missing_seeds]
            record["verdict_text"] = verdict_text(row)
            record["verdicts"] = row.design.mode if row.design is not None else None
            record["spread"] = row.spread
            out.append(record)
        return out


def verdicts_of(sweep_dir: Path) -> str:
    """The verdict mode a sweep asked for: hydra.sweeper.verdicts of its multirun.yaml, or of the sweep it lies in
    (a PBT's head_to_head/), else stats.DEFAULT_VERDICTS."""
    from omegaconf import OmegaConf

    for folder in [Path(sweep_dir), *list(Path(sweep_dir).parents)[:2]]:
        path = folder / "multirun.yaml"
        if path.is_file():
            try:
                mode = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.verdicts")
            except Exception:  # a half-written multirun.yaml: the default, as for a sweep that names none
                mode = None
            return str(mode) if mode is not None else stats.DEFAULT_VERDICTS
    return stats.DEFAULT_VERDICTS


def _sweep_run(run_dir: Path, summary: RunSummary, overrides: list[str], sweep_dir: Path) -> SweepRun:
    params = {}
    for override in overrides:
        key, _, value = override.partition("=")
        params[key.lstrip("+~")] = _parse_value(value)
    trial = summary.trial or {}
    params.update(trial.get("params") or {})
    name = run_name(run_dir, sweep_dir)
    if trial.get("number") is not None:
        label = f"trial {trial['number']}: " + " ".join(
            f"{k}={param_text(v)}" for k, v in (trial.get("params") or {}).items()
        )
    else:
        label = " ".join(overrides) or name
    config = " ".join(o for o in overrides if not _is_seed(o)) or NO_CONFIGURATION
    return SweepRun(
        run_dir, summary, name, overrides, params, label, config, tuple(sorted(o for o in overrides if _is_seed(o)))
    )


def _direction(summaries: list[RunSummary]) -> str:
    for summary in summaries:
        trial_direction = (summary.trial or {}).get("direction")
        if trial_direction:
            return str(trial_direction).lower()
    return "maximize"
