"""A seeds sweep's state read back: its design (seeds.json: settings, configurations, the seed key) and the runs on
disk replayed through the sequential design (``Adaptive``: which seeds each configuration got, why it stopped, the
next round, the verdicts); ``GridSeeds``: a plain grid with seeds read the same way, for ``next_seeds``. The sweeper
reads the same to choose its next round, so what it ran and what the report says agree. No torch here.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from ...reading import stats
from ...reading.results import NO_CONFIGURATION, SweepResults, SweepRun, varying_overrides
from . import sequential

# hydra/sweeper=seeds writes its design here (search/seeds/sweeper.py): settings, configurations, the seed key; its
# runs are <sweep>/<configuration index>/seed<seed>
SEEDS_FILE = "seeds.json"

# a grid given more seeds by search/seeds/next_seeds.py: the added runs, apart from the grid's numbered run directories
# (a run inside another run's directory would be read as both), and the settings of the design they follow
MORE_SEEDS = "more_seeds"

GRID_SEEDS_FILE = f"{MORE_SEEDS}/settings.json"


class Adaptive:
    """A hydra/sweeper=seeds sweep read back: ``plan`` (sequential.plan over the runs on disk: the seeds each
    configuration got, why it stopped, the next round's runs), ``verdicts`` and the table's ``comparisons``.
    The sweeper reads the same to choose its next round, so what it ran and what the report says agree."""

    def __init__(self, results: SweepResults, design: dict):
        self.results, self.design = results, design
        self.configs: list[list[str]] = design["configs"]
        self.labels = (
            [" ".join(o) or NO_CONFIGURATION for o in varying_overrides(self.configs)]
            if len(self.configs) > 1
            else [" ".join(self.configs[0]) or NO_CONFIGURATION]
        )
        self.settings = sequential.recorded_settings(design["settings"])
        self.plan = sequential.plan(
            len(self.configs), self.settings, self._outcome("val"), results.direction, sequential.stack_records
        )
        self.verdicts = (
            sequential.verdicts(
                self.plan,
                len(self.configs),
                self.settings,
                self._outcome("val"),
                self._outcome("test"),
                results.direction,
                sequential.stack_records,
            )
            if self.plan.done
            else {}
        )

    def seed(self, i: int) -> int:
        return int(self.design["first_seed"]) + i

    def run_dir(self, c: int, i: int) -> Path:
        return seeds_run_dir(self.results.sweep_dir, c, self.seed(i))

    def run(self, c: int, i: int) -> SweepRun | None:
        return self.results.run_at(self.run_dir(c, i))

    def _outcome(self, split: str):
        def outcome(c: int, i: int):
            run = self.run(c, i)
            if run is None or run.summary.status in ("running", "paused"):
                return None
            if run.summary.status != "completed":
                return sequential.RUN_FAILED
            return self.results.record(run, split)

        return outcome

    def stopped_text(self, c: int) -> str:
        state, s = self.plan.states[c], self.settings
        leader = f" than {self.labels[state.leader]}" if state.leader is not None and state.leader != c else ""
        return {
            sequential.DECIDED: f"decided after {state.seeds} seeds (worse{leader} on validation)",
            sequential.ALL_DECIDED: f"every comparison decided after {state.seeds} seeds",
            sequential.MAX_SEEDS: f"reached max_seeds={s.max_seeds}",
            sequential.BUDGET: f"budget: max_runs={s.max_runs} spent ({self.plan.runs} runs)",
            sequential.FAILED: self._failed_text(c, state.seeds),
        }.get(state.stop, f"running ({state.seeds} seeds)")

    def _failed_text(self, c: int, seeds: int) -> str:
        """Why configuration c stopped at a failed run: that run (its configuration's own, or the run of another
        configuration that stopped the look c was in), what it is (failed, or its summary unreadable) and why."""
        ended = ("completed", "running", "paused")
        bad = [
            (k, run)
            for k in range(len(self.configs))
            for i in range(seeds)
            if (run := self.run(k, i)) is not None and run.summary.status not in ended
        ]
        own = [(k, run) for k, run in bad if k == c]
        if not bad:
            return f"a run failed (of seeds 1..{seeds}); to try it again remove its directory and run the same command"
        named = "; ".join(
            f"run {run.name} ({self.labels[k]}) {run.summary.status}: {(run.summary.error or '?').splitlines()[0]}"
            for k, run in (own or bad)
        )
        fix = "to try it again remove its directory and run the same command"
        if not own:
            return f"stopped with its look at {named}; {fix}"
        failed = any(run.summary.status == "failed" for _, run in own)
        return f"{'a run failed' if failed else 'a run cannot be read'}: {named}; {fix}"

    def comparisons(self) -> list[stats.Comparison]:
        """One row per configuration, as stats.compare's: the reference (the last look's leader) first, then the
        others of the last look, then those decided earlier (later looks first); each with its seeds, why it
        stopped, and its verdict against its look's leader (numbers and reasons; reading/wording.py words them)."""
        plan, s = self.plan, self.settings
        sign = -1.0 if self.results.direction == "maximize" else 1.0
        rows = []
        for c, state in enumerate(plan.states):
            runs = [self.run(c, i) for i in range(state.seeds)]
            done = [r for r in runs if r is not None and r.summary.status == "completed"]
            rank = [r.summary.objective for r in done if r.objective is not None]
            test = [self.results.record(r).value for r in done]
            test = [v for v in test if isinstance(v, (int, float)) and math.isfinite(v)]
            row = stats.Comparison(
                self.labels[c],
                tuple(r.seed for r in done),
                sum(rank) / len(rank) if rank else None,
                sum(test) / len(test) if test else None,
                stats.sd(test),
            )
            row.stopped = self.stopped_text(c)
            verdict = self.verdicts.get(c)
            row.is_best = c == plan.reference and plan.done
            if verdict is not None:
                judged, i = verdict.test, verdict.row
                row.design = stats.Design(
                    len(self.configs),
                    judged.seeds,
                    judged.questions if judged.questions > 1 else None,
                    s.alpha,
                    adaptive=(s.min_seeds, s.max_seeds),
                    mode=judged.mode,
                    paired=judged.paired,
                    prior_df=None if judged.prior_df is None else float(judged.prior_df),
                )
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
                        row.verdict = (
                            "better" if (verdict.call > 0) == (self.results.direction == "maximize") else "worse"
                        )
                    else:
                        row.verdict = "indistinguishable"
                        row.reason = (
                            ("not confirmed" if verdict.validation else "validation does not call it")
                            if verdict.on_test
                            else "indistinguishable"
                        )
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
            return (
                not row.is_best,
                group.get(state.stop, 0),
                -state.seeds,
                sign * (row.rank_mean if row.rank_mean is not None else 0.0),
            )

        return [row for _, row in sorted(rows, key=order)]


class GridSeeds(Adaptive):
    """A plain grid with seeds read as a seeds sweep: its configurations in the sweep's order (results.configurations),
    seed index i the i-th seed value the grid used (sorted), then the largest + 1, + 2, ...; a configuration's run
    of a seed is its run with that seed override (a completed one, where the grid holds two). Adaptive does the
    rest: the outcomes it judges, the plan, the reasons a configuration stopped."""

    def __init__(self, results: SweepResults, settings):
        keys = results.seed_keys
        if not keys:
            raise ValueError(
                f"{results.sweep_dir}: no run has a seed override that varies (e.g. "
                f"{results.seed_hint}): a grid without seeds has no seed noise to judge a difference "
                "against; sweep seeds first"
            )
        if len(keys) > 1:
            raise ValueError(
                f"{results.sweep_dir}: the grid sweeps several seed keys ({', '.join(keys)}); "
                "next_seeds adds seeds of one"
            )
        self.seed_key = keys[0]
        self._runs: dict = {}
        configs = []
        for c, group in enumerate(results.configurations.values()):
            for run in group:
                if not run.seed:
                    raise ValueError(
                        f"{results.sweep_dir}: run {run.name} ({run.label}) has no {self.seed_key} "
                        "override: next_seeds cannot place it among the seeds"
                    )
                value = run.seed_values[0]
                try:
                    seed = int(value)
                except ValueError:
                    raise ValueError(
                        f"{self.seed_key}={value} (run {run.name}): next_seeds numbers the seeds "
                        "after the grid's, so they must be whole numbers"
                    ) from None
                if (c, seed) not in self._runs or run.summary.status == "completed":
                    self._runs[c, seed] = run
            # the whole command line of the configuration (a key every run shares included), less its seed
            configs.append([o for o in group[0].summary.overrides or [] if o.partition("=")[0] != self.seed_key])
        self.values = sorted({seed for _, seed in self._runs})
        design = {
            "settings": dataclasses.asdict(settings),
            "configs": configs,
            "seed_key": self.seed_key,
            "first_seed": self.values[0],
        }
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
