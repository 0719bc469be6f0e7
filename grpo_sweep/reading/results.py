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
from ..run.results import METRICS, OutcomesDamaged, lookup, outcomes_path, read_outcomes, read_run_summary
from . import stats

# The end of a sweep writes its verdicts here (sweep_end.py): the comparisons as JSON, for W&B and other readers.
VERDICTS_FILE = "verdicts.json"
# A run whose summary.json exists but cannot be read: its status, the reason its ``error``.
UNREADABLE = "unreadable"
NO_CONFIGURATION = "(defaults)"
# what the notes on damaged or missing files say a damaged outcomes file changed
NOT_PAIRED = "left out: the comparisons with this run use each run's {split} figure, not its per-question outcomes"


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
    except OSError as exc:  # a directory in its place, no permission: the caller names it
        raise OSError(f"{METRICS} cannot be read ({type(exc).__name__}: {exc.strerror or exc})") from None
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


def _hydra_overrides(run_dir: Path) -> tuple[list[str], str | None]:
    """The overrides Hydra wrote when the run started, and why they could not be read (None: they could)."""
    from omegaconf import ListConfig, OmegaConf

    path = run_dir / ".hydra" / "overrides.yaml"
    try:
        loaded = OmegaConf.load(path) if path.exists() else []
        if not isinstance(loaded, (list, ListConfig)):
            raise ValueError(f"a {type(loaded).__name__}, not a list")
        return [str(o) for o in loaded], None
    except Exception as exc:  # a half-written overrides.yaml: the run is still listed, without its overrides
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return [], f".hydra/overrides.yaml cannot be read ({why}): listed without its overrides, as (defaults)"


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
        # the damaged or missing files met while reading, each naming its file and what was done instead: every
        # output shows them (``problems``); some are met only when asked for (outcomes, metrics)
        self.notes: list[str] = []

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
        notes: list[str] = []  # every damaged or missing file met, named, with what was done instead
        run_dirs = [config.parent.parent for config in sorted(sweep_dir.glob("**/.hydra/config.yaml"))]
        seen = {run_dir.resolve() for run_dir in run_dirs}
        # a job (multiruns/<time>/<n>) whose .hydra is gone still has its summary, with its overrides: read, and named
        for path in sorted(sweep_dir.glob("*/summary.json")):
            if path.parent.resolve() not in seen and not (path.parent / ".hydra").is_dir():
                notes.append(
                    f"{run_name(path.parent, sweep_dir)}: .hydra/config.yaml is missing; read from its summary"
                )
                run_dirs.append(path.parent)
                seen.add(path.parent.resolve())
        for d in also:
            if Path(d).resolve() in seen:
                continue
            if Path(d).is_dir():
                run_dirs.append(Path(d))
            elif Path(d).exists():
                notes.append(f"{run_name(Path(d), sweep_dir)}: the run's directory is a file; not read")
        for entry in sorted(sweep_dir.iterdir()) if sweep_dir.is_dir() else []:
            numbered = entry.name.isdigit() and Path(entry).resolve() not in {Path(d).resolve() for d in also}
            if numbered and not entry.is_dir():  # a job's directory (multiruns/<time>/<n>) replaced by a file
                notes.append(f"{entry.name}: a run's directory is a file; not read")
        found = []
        for run_dir in run_dirs:
            if any((run_dir / marker).exists() for marker in not_runs):
                continue
            summary, problem = read_run_summary(run_dir)
            if problem:  # one bad run must not stop the table or the report of the others
                summary = RunSummary(status=UNREADABLE, error=problem)
            summary = summary or RunSummary(status="running")
            if summary.overrides is None:  # still running (or killed): Hydra wrote its overrides when it started
                overrides, why = _hydra_overrides(run_dir)
                if why:
                    notes.append(f"{run_name(run_dir, sweep_dir)}: {why}")
                summary = replace(summary, overrides=overrides)
            found.append((run_dir, summary))
        found.sort(key=lambda item: _order(item[0].name))
        swept = varying_overrides([summary.overrides for _, summary in found])
        runs = [
            _sweep_run(run_dir, summary, overrides, sweep_dir) for (run_dir, summary), overrides in zip(found, swept)
        ]
        direction = direction or _direction([summary for _, summary in found])
        if verdicts is None:
            verdicts, why = _verdicts_of(sweep_dir)
            notes += [why] if why else []
        results = cls(sweep_dir, runs, direction, judge, verdicts)
        results.notes[:0] = notes
        return results

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
        """read_outcomes of ``run``, read once per (split, field). A damaged file is left out (None, as for a run
        that has none) and named in ``notes``; so is a missing one where other runs of the sweep have theirs."""
        key = (run.dir, split, field)
        if key not in self._outcomes:
            expected = run.summary.test_samples if split == "test" else run.summary.val_samples
            try:
                self._outcomes[key] = read_outcomes(run.dir, split, field=field, expected=expected)
            except OutcomesDamaged as exc:
                self._outcomes[key] = None
                self.note(f"{run.name}: {exc}; {NOT_PAIRED.format(split=split)}")
            else:
                if self._outcomes[key] is None and run.summary.status == "completed" and self._others_have(split):
                    path = outcomes_path(run.dir, split)
                    self.note(
                        f"{run.name}: {path.parent.name}/{path.name} is missing; {NOT_PAIRED.format(split=split)}"
                    )
        return self._outcomes[key]

    def _others_have(self, split: str) -> bool:
        return self.derived(f"outcomes:{split}", lambda: any(outcomes_path(r.dir, split).exists() for r in self.runs))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    @property
    def problems(self) -> list[str]:
        """The damaged or missing files met so far, each with what was done instead (``notes``): a renderer shows
        them after what it read (the verdicts read the outcomes, the plots and steps the metrics)."""
        return list(self.notes)

    def series(self, run_dir: Path, keys: Sequence[str]) -> tuple[dict[str, dict], int | None]:
        """plots.read_series of a run's metrics.jsonl, its last step kept for ``steps``: the file is opened once
        for both (the report draws its plots before it writes its runs table)."""
        from .plots import read_series

        try:
            series, last = read_series(run_dir, keys)
        except OSError as exc:  # a directory in its place, no permission
            self.note(f"{run_name(Path(run_dir), self.sweep_dir)}: {METRICS} cannot be read ({exc}); no curves")
            series, last = {key: {} for key in keys}, None
        self._last_steps[Path(run_dir)] = last
        return series, last

    def last_logged(self, run_dir: Path) -> int | None:
        """The last step a run logged (metrics.jsonl), read once; an unreadable file is named in ``notes``."""
        run_dir = Path(run_dir)
        if run_dir not in self._last_steps:
            try:
                self._last_steps[run_dir] = last_step(run_dir)
            except OSError as exc:
                self.note(f"{run_name(run_dir, self.sweep_dir)}: {exc}; its step is not shown")
                self._last_steps[run_dir] = None
        return self._last_steps[run_dir]

    def steps(self, run: SweepRun) -> int | None:
        """Its steps: the summary's, else the last logged one."""
        if run.summary.steps is not None:
            return run.summary.steps
        return self.last_logged(run.dir)

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
    return _verdicts_of(sweep_dir)[0]


def _verdicts_of(sweep_dir: Path) -> tuple[str, str | None]:
    """``verdicts_of``, and the note naming a multirun.yaml that cannot be read (None: none)."""
    from omegaconf import OmegaConf

    for folder in [Path(sweep_dir), *list(Path(sweep_dir).parents)[:2]]:
        path = folder / "multirun.yaml"
        if path.exists():
            try:
                mode = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.verdicts")
            except Exception as exc:  # a half-written multirun.yaml: the default, as for a sweep that names none
                why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                return stats.DEFAULT_VERDICTS, (
                    f"{path} cannot be read ({why}): read as a grid, with {stats.DEFAULT_VERDICTS} verdicts"
                )
            return (str(mode) if mode is not None else stats.DEFAULT_VERDICTS), None
    return stats.DEFAULT_VERDICTS, None


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
