"""A sweep directory read back once: ``SweepResults.read(sweep_dir)``.

It reads each run's summary.json once (run/results.read_run_summary), its outcomes/test.jsonl once per field and its
metrics.jsonl at most once (``series``, for the plots, which also gives the last step), and computes the runs'
configurations, seeds, ranking and the comparisons (stats.compare) once, when first asked. Every renderer takes it:
the end-of-sweep table and the per-configuration lines (tables.py), report.md, runs.csv and the plots (report.py),
status (status.py), verdicts.json (sweep_end.py; the W&B callback reads that file) and the Optuna study report
(search/report.py). A configuration is a run's swept overrides other than seeds, as typed; its seed is the rest.
No torch, nothing imported beyond numpy until a comparison is asked for.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from ..run.results import METRICS, lookup, read_outcomes, read_run_summary
from ..run.record import OUTCOME_FIELDS, RunSummary
from . import stats

# An Optuna study's sweep directory holds it (directions, objectives), written by its sweeper (search/).
# a population-based training's lineage (search/pbt.py): its members are rounds of changing configs, not a grid
PBT_LINEAGE = "pbt.jsonl"
STUDY_FILE = "study.json"
# hydra/sweeper=seeds writes its design here (search/seeds_sweeper.py): settings, configurations, the seed key; its
# runs are <sweep>/<configuration index>/seed<seed>
SEEDS_FILE = "seeds.json"
# a grid given more seeds by sweeps/next_seeds.py: the added runs, apart from the grid's numbered run directories
# (a run inside another run's directory would be read as both), and the settings of the design they follow
MORE_SEEDS = "more_seeds"
GRID_SEEDS_FILE = f"{MORE_SEEDS}/settings.json"
# Written by an Optuna worker job into its Hydra run dir: it holds no run, its trials are under trials/.
WORKER_MARKER = "optuna_worker.json"
# The end of a sweep writes its verdicts here (sweep_end.py): the comparisons as JSON, for W&B and other readers.
VERDICTS_FILE = "verdicts.json"
# A run whose summary.json exists but cannot be read: its status, the reason its ``error``.
UNREADABLE = "unreadable"
NO_CONFIGURATION = "(defaults)"


def read_study_file(sweep_dir: Path) -> dict:
    path = Path(sweep_dir) / STUDY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{sweep_dir} holds no {STUDY_FILE}; is it the directory of an Optuna sweep?")
    return json.loads(path.read_text())


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

    def __init__(self, sweep_dir: Path, runs: list[SweepRun], direction: str, study: dict | None = None):
        self.sweep_dir, self.runs, self.direction, self.study = Path(sweep_dir), runs, direction, study
        self._by_dir = {run.dir.resolve(): run for run in runs}
        self._outcomes: dict = {}
        self._last_steps: dict = {}
        self.seeds_design: dict | None = None  # hydra/sweeper=seeds: its SEEDS_FILE
        self.grid_seeds: dict | None = None  # a grid given seeds by next_seeds: its GRID_SEEDS_FILE's settings

    @classmethod
    def read(cls, sweep_dir: Path, direction: str | None = None, also: Sequence[Path] = ()) -> "SweepResults":
        """Every run directory under ``sweep_dir`` (those with .hydra/config.yaml; not an Optuna worker's), and the
        existing run directories ``also`` names (a submitted sweep's jobs.json names its runs; one may not have
        written its .hydra yet).
        ``direction``: how the objective ranks (default: the Optuna study's first direction, else a trial's, else
        maximize)."""
        sweep_dir = Path(sweep_dir)
        run_dirs = [config.parent.parent for config in sorted(sweep_dir.glob("**/.hydra/config.yaml"))]
        seen = {run_dir.resolve() for run_dir in run_dirs}
        run_dirs += [Path(d) for d in also if Path(d).is_dir() and Path(d).resolve() not in seen]
        found = []
        for run_dir in run_dirs:
            if (run_dir / WORKER_MARKER).exists():
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
        runs = [_sweep_run(run_dir, summary, overrides, sweep_dir)
                for (run_dir, summary), overrides in zip(found, swept)]
        try:
            study = read_study_file(sweep_dir)
        except FileNotFoundError:
            study = None
        results = cls(sweep_dir, runs, direction or _direction(study, [summary for _, summary in found]), study)
        design = sweep_dir / SEEDS_FILE
        results.seeds_design = json.loads(design.read_text()) if design.is_file() else None
        # a grid whose added seeds were run: the design they followed decides its verdicts (asking alone changes
        # nothing)
        grid = sweep_dir / GRID_SEEDS_FILE
        if results.seeds_design is None and grid.is_file() and any(
                run.dir.is_relative_to(sweep_dir / MORE_SEEDS) for run in runs):
            results.grid_seeds = json.loads(grid.read_text())
        return results

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
        """stats.compare over the configurations (ranked on validation, verdicts on its test counterpart with
        per-question outcomes where the runs saved them); none without a seed override (nothing to pair)."""
        from .wording import describe

        if self.seeds_design is not None:
            return describe(self.adaptive.comparisons(), self.seed_hint)
        if self.grid_seeds is not None:  # the design its added seeds followed, not the seeds the configurations share
            from .sequential import Settings

            return describe(GridSeeds(self, Settings(**self.grid_seeds)).comparisons(), self.seed_hint)
        if not self.seed_keys:
            return []
        groups = {config: [self._record(run) for run in group] for config, group in self.configurations.items()}
        return describe(stats.compare(groups, self.direction), self.seed_hint)

    @functools.cached_property
    def adaptive(self) -> "Adaptive":
        """hydra/sweeper=seeds: its design replayed from the runs (which seeds each configuration got, why it
        stopped) and the verdicts (sweeps/sequential.py)."""
        return Adaptive(self, self.seeds_design)

    @property
    def why_none(self) -> str | None:
        """Why several configurations have no verdicts (one seed each), or None."""
        if len(self.configurations) >= 2 and not self.seed_keys:
            return (f"No verdicts: one seed per configuration cannot tell a difference from seed noise; add seeds "
                    f"({self.seed_hint}) to compare them.")
        return None

    def _record(self, run: SweepRun, split: str = "test") -> stats.RunRecord:
        """One run for stats.compare: its objective ranks (finished runs only: a pruned trial's is mid-training);
        its objective's test counterpart, per question when the objective is an accuracy, is what the verdict is
        about."""
        summary = run.summary
        value_key, field, accuracy = stats.verdict_source(summary.optimized_metric)
        if split == "val":  # the objective itself, per question where it is an accuracy
            field = OUTCOME_FIELDS.get(summary.optimized_metric)
            return stats.RunRecord(seed=run.seed, rank_value=summary.objective, value=summary.objective,
                                   n_questions=summary.val_samples if field else None,
                                   outcomes=self.outcomes(run, field, "val") if field else None)
        return stats.RunRecord(
            seed=run.seed, rank_value=summary.objective if summary.status == "completed" else None,
            value=lookup(summary.to_dict(), value_key) if value_key else None,
            n_questions=summary.test_samples if accuracy else None,
            outcomes=self.outcomes(run, field) if field else None,
            rank_n_questions=summary.val_samples if accuracy else None)

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

        keys = ("config", "rank_mean", "mean", "std", "delta", "low", "high", "verdict", "note", "mde",
                "seeds_needed", "method", "stopped", "reason", "se", "mde_one_more")
        out = []
        for row in self.comparisons if len(self.configurations) >= 2 else []:
            record = {key: getattr(row, key, None) for key in keys}
            record["seeds"] = [stats.seed_text(seed) for seed in row.seeds]
            record["missing_seeds"] = [stats.seed_text(seed) for seed in row.missing_seeds]
            record["verdict_text"] = verdict_text(row)
            out.append(record)
        return out


def _sweep_run(run_dir: Path, summary: RunSummary, overrides: list[str], sweep_dir: Path) -> SweepRun:
    params = {}
    for override in overrides:
        key, _, value = override.partition("=")
        params[key.lstrip("+~")] = _parse_value(value)
    trial = summary.trial or {}
    params.update(trial.get("params") or {})
    name = run_name(run_dir, sweep_dir)
    if trial.get("number") is not None:
        label = f"trial {trial['number']}: " + " ".join(f"{k}={param_text(v)}"
                                                          for k, v in (trial.get("params") or {}).items())
    else:
        label = " ".join(overrides) or name
    config = " ".join(o for o in overrides if not _is_seed(o)) or NO_CONFIGURATION
    return SweepRun(run_dir, summary, name, overrides, params, label, config,
                    tuple(sorted(o for o in overrides if _is_seed(o))))


def _direction(study: dict | None, summaries: list[RunSummary]) -> str:
    try:
        return str(study["directions"][0]).lower()
    except (TypeError, KeyError, IndexError):
        pass
    for summary in summaries:
        trial_direction = (summary.trial or {}).get("direction")
        if trial_direction:
            return str(trial_direction).lower()
    return "maximize"



class Adaptive:
    """A hydra/sweeper=seeds sweep read back: ``plan`` (sequential.plan over the runs on disk: the seeds each
    configuration got, why it stopped, the next round's runs), ``verdicts`` and the table's ``comparisons``.
    The sweeper reads the same to choose its next round, so what it ran and what the report says agree."""

    def __init__(self, results: SweepResults, design: dict):
        from . import sequential

        self.results, self.design = results, design
        self.configs: list[list[str]] = design["configs"]
        self.labels = [" ".join(o) or NO_CONFIGURATION for o in varying_overrides(self.configs)] \
            if len(self.configs) > 1 else [" ".join(self.configs[0]) or NO_CONFIGURATION]
        self.settings = sequential.Settings(**design["settings"])
        self.plan = sequential.plan(len(self.configs), self.settings, self._outcome("val"), results.direction,
                                    sequential.stack_records)
        self.verdicts = sequential.verdicts(self.plan, len(self.configs), self.settings, self._outcome("val"),
                                            self._outcome("test"), results.direction, sequential.stack_records) \
            if self.plan.done else {}

    def seed(self, i: int) -> int:
        return int(self.design["first_seed"]) + i

    def run_dir(self, c: int, i: int) -> Path:
        return seeds_run_dir(self.results.sweep_dir, c, self.seed(i))

    def run(self, c: int, i: int) -> SweepRun | None:
        return self.results.run_at(self.run_dir(c, i))

    def _outcome(self, split: str):
        from .sequential import RUN_FAILED

        def outcome(c: int, i: int):
            run = self.run(c, i)
            if run is None or run.summary.status in ("running", "paused"):
                return None
            if run.summary.status != "completed":
                return RUN_FAILED
            return self.results._record(run, split)
        return outcome

    def stopped_text(self, c: int) -> str:
        from . import sequential

        state, s = self.plan.states[c], self.settings
        leader = f" than {self.labels[state.leader]}" if state.leader is not None and state.leader != c else ""
        return {
            sequential.DECIDED: f"decided after {state.seeds} seeds (worse{leader} on validation)",
            sequential.ALL_DECIDED: f"every comparison decided after {state.seeds} seeds",
            sequential.MAX_SEEDS: f"reached max_seeds={s.max_seeds}",
            sequential.BUDGET: f"budget: max_runs={s.max_runs} spent ({self.plan.runs} runs)",
            sequential.FAILED: f"a run failed (of seeds 1..{state.seeds}); to try it again remove its directory "
                               "and run the same command",
        }.get(state.stop, f"running ({state.seeds} seeds)")

    def comparisons(self) -> list[stats.Comparison]:
        """One row per configuration, as stats.compare's: the reference (the last look's leader) first, then the
        others of the last look, then those decided earlier (later looks first); each with its seeds, why it
        stopped, and its verdict against its look's leader (numbers and reasons; sweeps/wording.py words them)."""
        from . import sequential

        plan, s = self.plan, self.settings
        sign = -1.0 if self.results.direction == "maximize" else 1.0
        rows = []
        for c, state in enumerate(plan.states):
            runs = [self.run(c, i) for i in range(state.seeds)]
            done = [r for r in runs if r is not None and r.summary.status == "completed"]
            rank = [r.summary.objective for r in done if r.objective is not None]
            test = [self.results._record(r).value for r in done]
            test = [v for v in test if isinstance(v, (int, float)) and math.isfinite(v)]
            row = stats.Comparison(self.labels[c], tuple(r.seed for r in done),
                                   sum(rank) / len(rank) if rank else None, sum(test) / len(test) if test else None,
                                   stats.sd(test))
            row.stopped = self.stopped_text(c)
            verdict = self.verdicts.get(c)
            row.is_best = c == plan.reference and plan.done
            if verdict is not None:
                judged, i = verdict.test, verdict.row
                row.design = stats.Design(len(self.configs), judged.seeds, judged.questions
                                          if judged.questions > 1 else None, s.alpha,
                                          adaptive=(s.min_seeds, s.max_seeds))
                if state.leader is not None and state.leader != plan.reference:
                    row.against = self.labels[state.leader]
            if row.is_best:
                row.verdict, row.reason = stats.REFERENCE, stats.REFERENCE
            elif verdict is not None:
                row.delta, row.se = float(judged.delta[i]), float(judged.se[i])
                row.validation = verdict.validation
                if row.se <= 0:
                    row.verdict, row.reason = "no verdict", "no noise"
                else:
                    row.low, row.high = float(judged.low[i]), float(judged.high[i])
                    row.mde, row.seed_share = float(judged.mde[i]), float(judged.seed_share[i])
                    if verdict.call:
                        row.verdict = "better" if (verdict.call > 0) == (self.results.direction == "maximize") \
                            else "worse"
                    else:
                        row.verdict = "indistinguishable"
                        row.reason = ("not confirmed" if verdict.validation else "validation does not call it") \
                            if verdict.on_test else "indistinguishable"
            elif state.stop is None or not plan.done:
                row.verdict, row.reason = "-", "running"
                row.note = f"still running: {len(plan.todo)} run(s) to go"
            else:
                row.verdict, row.reason = "no verdict", "no look"
            rows.append((c, row))
        group = {sequential.DECIDED: 1, sequential.FAILED: 2, None: 2}

        def order(item):
            c, row = item
            state = plan.states[c]
            return (not row.is_best, group.get(state.stop, 0), -state.seeds,
                    sign * (row.rank_mean if row.rank_mean is not None else 0.0))
        return [row for _, row in sorted(rows, key=order)]


class GridSeeds(Adaptive):
    """A plain grid with seeds read as a seeds sweep: its configurations in the sweep's order (results.configurations),
    seed index i the i-th seed value the grid used (sorted), then the largest + 1, + 2, ...; a configuration's run
    of a seed is its run with that seed override (a completed one, where the grid holds two). Adaptive does the
    rest: the outcomes it judges, the plan, the reasons a configuration stopped."""

    def __init__(self, results: "SweepResults", settings):
        keys = results.seed_keys
        if not keys:
            raise ValueError(f"{results.sweep_dir}: no run has a seed override that varies (e.g. "
                             f"{results.seed_hint}): a grid without seeds has no seed noise to judge a difference "
                             "against; sweep seeds first")
        if len(keys) > 1:
            raise ValueError(f"{results.sweep_dir}: the grid sweeps several seed keys ({', '.join(keys)}); "
                             "next_seeds adds seeds of one")
        self.seed_key = keys[0]
        self._runs: dict = {}
        configs = []
        for c, group in enumerate(results.configurations.values()):
            for run in group:
                if not run.seed:
                    raise ValueError(f"{results.sweep_dir}: run {run.name} ({run.label}) has no {self.seed_key} "
                                     "override: next_seeds cannot place it among the seeds")
                value = run.seed_values[0]
                try:
                    seed = int(value)
                except ValueError:
                    raise ValueError(f"{self.seed_key}={value} (run {run.name}): next_seeds numbers the seeds "
                                     "after the grid's, so they must be whole numbers") from None
                if (c, seed) not in self._runs or run.summary.status == "completed":
                    self._runs[c, seed] = run
            # the whole command line of the configuration (a key every run shares included), less its seed
            configs.append([o for o in group[0].summary.overrides or [] if o.partition("=")[0] != self.seed_key])
        self.values = sorted({seed for _, seed in self._runs})
        design = {"settings": dataclasses.asdict(settings), "configs": configs, "seed_key": self.seed_key,
                  "first_seed": self.values[0]}
        super().__init__(results, design)
        self.labels = list(results.configurations)

    def seed(self, i: int) -> int:
        n = len(self.values)
        return self.values[i] if i < n else self.values[-1] + i - n + 1

    def run_dir(self, c: int, i: int) -> Path:
        run = self.run(c, i)
        return run.dir if run is not None else seeds_run_dir(self.results.sweep_dir / MORE_SEEDS, c, self.seed(i))

    def run(self, c: int, i: int):
        return self._runs.get((c, self.seed(i)))


def seeds_run_dir(sweep_dir: Path, config: int, seed: int) -> Path:
    """A hydra/sweeper=seeds run's directory: <sweep>/<configuration index>/seed<seed>."""
    return Path(sweep_dir) / str(config) / f"seed{seed}"
