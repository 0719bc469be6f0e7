"""A sweep's report from its run directories alone: ``python -m grpo_sweep.sweeps.report <sweep_dir>``.

Writes ``report.md``, ``runs.csv`` and PNG plots into the sweep directory: mean ± std per configuration when seeds
were swept with the paired difference from the best configuration and its verdict, the best runs by validation
(validation and test accuracy side by side, training and validation reward means, what each cost), runs whose
summary cannot be read, failures; every run in ``runs.csv`` (overrides as columns, every summary value); the plots
of ``plots.py`` (the comparison as a forest plot, validation accuracy during training, each reward term on its own
axis, validation and test accuracy per swept parameter). Legible and fast at thousands of runs. Reads
``summary.json`` and ``metrics.jsonl`` (plus an Optuna ``trial`` block in the summary when there is one: number,
state, params, value). No account, no network, no torch.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..run.cost import cost_line
from ..run.files import write_text_atomic
from ..run.summary import RunSummary
from . import plots as figures
from .stats import SEED_HINT, Comparison, ci_text, compare, is_seed, signed
from .tables import markdown_table, number
from .runs import UNREADABLE, best_cell, collect_runs, last_step, run_name, run_record, sweep_direction, varying_overrides

REPORT = "report.md"
PLOTS = "plots"


@dataclass
class Run:
    dir: Path
    summary: RunSummary
    label: str
    params: dict  # swept parameter -> value (overrides, or an Optuna trial's params)
    name: str = ""  # its path under the sweep (runs.run_name)

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


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _hydra_overrides(run_dir: Path) -> list[str]:
    from omegaconf import OmegaConf

    path = run_dir / ".hydra" / "overrides.yaml"
    try:
        return [str(o) for o in OmegaConf.load(path)] if path.exists() else []
    except Exception:  # a half-written overrides.yaml: the run is still listed, without its overrides
        return []


def load_runs(sweep_dir: Path) -> list[Run]:
    """Every run's summary and swept parameters; the metrics are read later, only for the plots."""
    # a run still running (or killed) has no overrides in its summary: Hydra wrote them when it started
    found = [(run_dir, summary if summary.overrides is not None else replace(summary, overrides=_hydra_overrides(run_dir)))
             for run_dir, summary in collect_runs(sweep_dir)]
    swept = varying_overrides([summary.overrides for _, summary in found])
    runs = []
    for (run_dir, summary), overrides in zip(found, swept):
        params = {}
        for override in overrides:
            key, _, value = override.partition("=")
            params[key.lstrip("+~")] = _parse_value(value)
        trial = summary.trial or {}
        params.update(trial.get("params") or {})
        if trial.get("number") is not None:
            label = f"trial {trial['number']}: " + " ".join(f"{k}={_param(v)}" for k, v in (trial.get("params") or {}).items())
        else:
            label = " ".join(overrides) or run_name(run_dir, sweep_dir)
        runs.append(Run(run_dir, summary, label, params, run_name(run_dir, sweep_dir)))
    return runs


def _direction(sweep_dir: Path, runs: list[Run], direction: str | None) -> str:
    return direction or sweep_direction(sweep_dir, [run.summary for run in runs])


def rank(runs: list[Run], direction: str) -> list[Run]:
    """Best first; runs without an objective (failed, pruned early, still running) last."""
    sign = -1 if direction == "maximize" else 1
    return sorted(runs, key=lambda r: (r.objective is None, sign * (r.objective or 0.0)))


def _param(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def reward_names(runs: list[Run]) -> list[str]:
    return sorted({name for r in runs for name in (r.summary.train_rewards or {})})


def objective_is_val(runs: list[Run]) -> bool:
    """Whether every run's objective is its validation accuracy (the default): then one column shows both."""
    return all(r.summary.optimized_metric in (None, "val_accuracy") for r in runs)


def runs_table(runs: list[Run], names: list[str]) -> list[str]:
    """One row per run: validation (what ranks) and test (what the verdicts are about) side by side."""
    own_objective = not objective_is_val(runs)
    header = ["#", "run", "configuration", "state"] + (["objective"] if own_objective else [])
    header += ["val_accuracy" if own_objective else "val_accuracy (objective)", "val before", "best (step)",
               "test_accuracy", "test before", "test lenient", "pass@k", "maj@k", "reward", "reward (start)"]
    header += [f"rewards/{n}" for n in names] + [f"val {n}" for n in names] + ["steps", "runtime (s)"]
    header += ["device (s)", "tokens", "tokens/s"]
    rows = []
    for i, run in enumerate(runs, 1):
        s = run.summary
        train, val = s.train_rewards or {}, s.val_rewards or {}
        rows.append(
            [i, run.name, run.label, run.state] + ([number(run.objective)] if own_objective else [])
            + [number(s.val_accuracy if own_objective else run.objective), number(s.val_accuracy_before), best_cell(s),
               number(s.test_accuracy), number(s.test_accuracy_before), number(s.test_accuracy_lenient),
               number(s.test_pass_at_k), number(s.test_maj_at_k), number(s.reward), number(s.reward_first)]
            + [number(train.get(n)) for n in names]
            + [number(val.get(n)) for n in names]
            + [number(run.summary.steps if run.summary.steps is not None else last_step(run.dir)),
               number(s.runtime_s, 1) if isinstance(s.runtime_s, float) else number(s.runtime_s),
               number(s.device_seconds, 1), number(s.generated_tokens), number(s.tokens_per_s, 1)]
        )
    return markdown_table(header, rows)


def seed_groups(runs: list[Run]) -> dict[str, list[Run]]:
    """Runs that differ only in a seed, keyed by the rest of their configuration."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        key = " ".join(f"{k}={_param(v)}" for k, v in run.params.items() if not is_seed(k)) or "(defaults)"
        groups.setdefault(key, []).append(run)
    return groups


def seed_of(run: Run) -> tuple:
    """What pairs runs across configurations: the values of all its seed parameters."""
    return tuple(sorted((k, _param(v)) for k, v in run.params.items() if is_seed(k)))


def seeds_swept(runs: list[Run]) -> bool:
    return any(is_seed(k) for r in runs for k in r.params) and any(len(g) > 1 for g in seed_groups(runs).values())


def comparisons(runs: list[Run], direction: str) -> list[Comparison]:
    """stats.compare over the configurations: ranked by the objective (validation), verdicts on its test
    counterpart with per-question outcomes where the runs saved them."""
    groups = {key: [run_record(r.dir, r.summary, seed_of(r), r.objective) for r in group]
              for key, group in seed_groups(runs).items()}
    seed_keys = sorted({k for r in runs for k in r.params if is_seed(k)})
    return compare(groups, direction, seed_hint=f"{seed_keys[0]}=1,2,3" if seed_keys else SEED_HINT)


def _mean_std(values: list) -> str:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not values:
        return "-"
    if len(values) == 1:
        return number(float(values[0]))
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def seeds_table(runs: list[Run], names: list[str], direction: str) -> list[str]:
    """Per configuration: its seeds, validation and test mean ± std, the test difference from the reference with its
    family-wise interval, the verdict, what the design could detect; then how the intervals were made."""
    if not seeds_swept(runs):
        return []
    groups = seed_groups(runs)
    header = ["configuration", "seeds", "objective (validation, mean ± std)", "test (mean ± std)",
              "Δ test vs reference", "95% family-wise CI", "verdict", "detectable (80% power)", "seeds to resolve",
              "val_accuracy", "test before", "best", "reward"] + [f"rewards/{n}" for n in names]
    header += [f"val {n}" for n in names]
    rows = []
    compared = comparisons(runs, direction)
    for row in compared:
        group = groups[row.config]
        seeds = ",".join(_param(v) for r in group for k, v in r.params.items() if is_seed(k)) or str(len(group))
        delta = "0 (reference)" if row.is_best else signed(row.delta)
        note = f" ({row.note})" if row.note and row.verdict in ("incomplete", "no verdict") else ""
        rows.append(
            [row.config, seeds, _mean_std([r.objective for r in group]), _test_cell(row), delta, ci_text(row),
             row.verdict + note, "-" if row.mde is None else f"{row.mde:.3f}",
             "-" if row.seeds_needed is None else str(row.seeds_needed),
             _mean_std([r.summary.val_accuracy for r in group]),
             _mean_std([r.summary.test_accuracy_before for r in group]),
             _mean_std([r.summary.best_objective for r in group]),
             _mean_std([r.summary.reward for r in group])]
            + [_mean_std([(r.summary.train_rewards or {}).get(n) for r in group]) for n in names]
            + [_mean_std([(r.summary.val_rewards or {}).get(n) for r in group]) for n in names]
        )
    method = next((r.method for r in compared if r.method), "")
    return markdown_table(header, rows) + (["", f"Intervals: {method}."] if method else [])


def _test_cell(row: Comparison) -> str:
    """The compared value's mean ± sd over the seeds compared (the mean over the common questions when paired by
    question)."""
    if row.mean is None:
        return "-"
    return f"{row.mean:.3f}" + ("" if row.std is None else f" ± {row.std:.3f}")


TOP_RUNS = 20  # runs listed in report.md (every run is in runs.csv)
TOP_FAILURES = 20


def ranked_configs(runs: list[Run], direction: str) -> list[tuple[str, list[Run], float | None]]:
    """(configuration, its runs, mean objective over them), best mean first; configurations without one last."""
    sign = -1 if direction == "maximize" else 1
    rows = []
    for key, group in seed_groups(runs).items():
        values = [r.objective for r in group if r.objective is not None]
        rows.append((key, group, statistics.mean(values) if values else None))
    return sorted(rows, key=lambda row: (row[2] is None, sign * (row[2] or 0.0)))


def forest_rows(runs: list[Run], direction: str) -> list[figures.ForestRow]:
    """The per-configuration comparisons as the forest plot's rows (config, delta, low, high, verdict)."""
    if not seeds_swept(runs):
        return []
    return [figures.ForestRow(c.config, 0.0 if c.is_best else c.delta, c.low, c.high, c.verdict)
            for c in comparisons(runs, direction) if c.mean is not None]


# The forest plot's defaults say what its rows are: the test difference from the reference, family-wise intervals.
FOREST_OPTIONS: dict = {}


def write_plots(runs: list[Run], names: list[str], out_dir: Path, direction: str = "maximize",
                forest: list | None = None, forest_options: dict | None = None) -> list[tuple[str, str]]:
    """The report's PNGs (plots.write_plots), configurations best first by their mean objective."""
    configs = [figures.ConfigRuns(key, [figures.RunPoint(r.dir, r.params, _finite(r.summary.val_accuracy),
                                                     _finite(r.summary.test_accuracy)) for r in group])
               for key, group, _ in ranked_configs(runs, direction)]
    best = [r.dir for r in rank(runs, direction)[:5] if r.objective is not None]
    return figures.write_plots(configs, names, out_dir, forest, forest_options, is_seed=is_seed, best_runs=best)


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _percent(share: float) -> str:
    return f"{share:.1%}" if share >= 0.01 else f"{share:.2%}"


def reward_cost_line(summaries: list[RunSummary]) -> str | None:
    """``Reward cost: ...``: each reward term's share of training time (summary.json ``reward_cost``), mean and
    largest over the runs that recorded it, costliest first; None when no run recorded one."""
    shares: dict[str, list[float]] = {}
    for summary in summaries:
        for name, cost in (summary.reward_cost or {}).items():
            share = cost.get("share") if isinstance(cost, dict) else None
            if isinstance(share, (int, float)) and math.isfinite(share):
                shares.setdefault(name, []).append(float(share))
    if not shares:
        return None
    ordered = sorted(shares.items(), key=lambda item: -statistics.mean(item[1]))
    terms = ", ".join(f"{name} {_percent(statistics.mean(v))} (max {_percent(max(v))}, {len(v)} runs)" for name, v in ordered)
    return (f"Reward cost (each term's share of training time: wall time inside the reward over the training steps' "
            f"wall time, periodic evaluations left out; mean over runs): {terms}. Per run: `reward_cost.<term>.share` "
            f"in [{RUNS_CSV}]({RUNS_CSV}).")


RUNS_CSV = "runs.csv"
_FIRST = ("objective", "val_accuracy", "val_accuracy_before", "best_step", "best_objective", "test_accuracy",
          "test_accuracy_before", "test_accuracy_lenient", "test_accuracy_lenient_before", "test_pass_at_k",
          "test_maj_at_k", "test_k", "val_accuracy_lenient", "val_samples", "test_samples", "reward", "reward_first", "steps", "runtime_s",
          "device_seconds", "generated_tokens", "tokens_per_s", "status", "error")
_SKIP = {"overrides", "versions", "traceback", "device", "trial.params"}  # overrides are columns; the rest not metrics


def _flatten(node: Any, prefix: str, out: dict) -> None:
    for key, value in node.items():
        name = f"{prefix}{key}"
        if name in _SKIP:
            continue
        if isinstance(value, dict):
            _flatten(value, name + ".", out)
        elif isinstance(value, list):
            if all(not isinstance(v, (dict, list)) for v in value):
                out[name] = " ".join(map(str, value))
        else:
            out[name] = value


def write_runs_csv(ranked: list[Run], path: Path) -> None:
    """One row per run, best first: rank, run, state, configuration, each swept parameter, every summary value
    (nested ones as dotted columns, e.g. ``train_rewards.format``). The file to load into pandas."""
    import csv
    import io

    params = sorted({k for r in ranked for k in r.params})
    flat = []
    for run in ranked:
        row: dict = {}
        _flatten(run.summary.to_dict(), "", row)
        flat.append(row)
    seen = dict.fromkeys(k for row in flat for k in row)
    metrics = [k for k in _FIRST if k in seen] + sorted(k for k in seen if k not in _FIRST)
    metrics = [k for k in metrics if k not in params]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["rank", "run", "state", "configuration", *params, *metrics])
    for i, (run, row) in enumerate(zip(ranked, flat), 1):
        writer.writerow([i, run.name, run.state, run.label, *(run.params.get(p, "") for p in params),
                         *("" if row.get(k) is None else row[k] for k in metrics)])
    write_text_atomic(path, buffer.getvalue())


def build_report(sweep_dir: Path, direction: str | None = None, plots: bool = True) -> Path:
    """Write report.md (and plots/) into ``sweep_dir``; return the report's path."""
    sweep_dir = Path(sweep_dir)
    runs = load_runs(sweep_dir)
    if not runs:
        raise FileNotFoundError(f"no run directories (with .hydra/config.yaml) under {sweep_dir}")
    direction = _direction(sweep_dir, runs, direction)
    ranked = rank(runs, direction)
    names = reward_names(runs)
    metric = next((r.summary.optimized_metric for r in runs if r.summary.optimized_metric), "val_accuracy")
    states: dict[str, int] = {}
    for run in runs:
        states[run.state] = states.get(run.state, 0) + 1

    lines = [f"# Sweep report: {sweep_dir.name}", ""]
    lines.append(f"{len(runs)} runs in `{sweep_dir}` — " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
    lines.append(f"Objective: `{metric}` ({direction}), on the validation split: it ranks the runs and configurations. "
                 "`val_accuracy` is validation accuracy (greedy, answer in the asked format) at the step the run "
                 "reports, `best (step)`: the best validation evaluation of `best_metric` during training and its step "
                 "(its adapter is the one reported); `val before` the same before training. `test_accuracy` is the "
                 "test split, evaluated once after training on the reported adapter (it chooses nothing), `test "
                 "before` the test split on the weights before training, `test lenient` the last answer anywhere in "
                 "the completion, `pass@k`/`maj@k` from k samples per test prompt.")
    best = ranked[0] if ranked[0].objective is not None else None
    if best is not None:
        lines.append(f"Best: run `{best.name}` ({best.label}) with objective {number(best.objective)}.")
    cost = cost_line([run.summary for run in runs])
    if cost:
        lines.append(cost + " (device-seconds: training with its evaluations, saving and the final evaluation; "
                     "tokens: completions sampled in training).")
    reward_cost = reward_cost_line([run.summary for run in runs])
    if reward_cost:
        lines.append(reward_cost)
    lines.append(f"Every run — its overrides as columns, every summary value, its state — is in [{RUNS_CSV}]({RUNS_CSV}) "
                 "(`pandas.read_csv`).")
    write_runs_csv(ranked, sweep_dir / RUNS_CSV)
    per_config = seeds_table(runs, names, direction)
    if per_config:
        lines += ["", "## Mean ± std over seeds, per configuration, and the verdict against the reference", "",
                  "Ranked by the objective on validation (mean over the seeds every complete configuration ran); the "
                  "best is the reference. The verdict is about the test split (the objective's test counterpart, "
                  "paired by seed and by question where the runs saved per-question outcomes): `better`/`worse` "
                  f"({'higher' if direction == 'maximize' else 'lower'} is better) when the 95% family-wise interval "
                  "of Δ excludes 0 — at most a 5% chance of any false `better`/`worse` in the whole table, whichever "
                  "configuration is the reference — else `indistinguishable`: no difference larger than the "
                  "`detectable` one (80% power), and `seeds to resolve` the observed Δ. A configuration missing a "
                  "seed the others ran is `incomplete`; with one seed there is `no verdict`.", ""] + per_config
    shown = ranked[:TOP_RUNS]
    lines += ["", "## Runs, best first", ""]
    if len(ranked) > len(shown):
        lines += [f"The {len(shown)} best of {len(ranked)} runs; all of them: [{RUNS_CSV}]({RUNS_CSV}).", ""]
    lines += runs_table(shown, names)
    unreadable = [r for r in runs if r.state == UNREADABLE]
    if unreadable:
        lines += ["", "## Unreadable runs", "", f"{len(unreadable)} run(s) left a summary.json that cannot be read; "
                  "they are reported without results:", ""]
        lines += [f"- `{r.name}` ({r.label}): {r.summary.error or '?'}" for r in unreadable]
    if plots:
        try:
            images = write_plots(ranked, names, sweep_dir / PLOTS, direction, forest_rows(runs, direction),
                                 FOREST_OPTIONS)
        except ImportError as exc:  # matplotlib is optional for the table
            images = []
            lines += ["", f"(no plots: {exc})"]
        lines += ["", "## Plots", ""]
        for title, rel in images:
            lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    failed = [r for r in ranked if r.state.lower() in ("failed", "fail")]
    if failed:
        lines += ["", "## Failures", ""] + [f"- `{r.name}` ({r.label}): {r.summary.error or '?'}"
                                            for r in failed[:TOP_FAILURES]]
        if len(failed) > TOP_FAILURES:
            lines.append(f"- ... and {len(failed) - TOP_FAILURES} more: [{RUNS_CSV}]({RUNS_CSV}), column `error`")
    offline = sorted(sweep_dir.glob("**/wandb/offline-run-*"))
    if offline:
        one_level = all(len(p.relative_to(sweep_dir).parts) == 3 for p in offline)  # <run>/wandb/offline-run-*
        target = f"{sweep_dir}/*/wandb/offline-run-*" if one_level and len(offline) > 1 else " ".join(map(str, offline))
        lines += ["", "## W&B", "", f"{len(offline)} offline W&B run(s) were written; upload them with:", "",
                  f"    wandb sync {target}"]
    path = sweep_dir / REPORT
    write_text_atomic(path, "\n".join(lines).rstrip() + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpo_sweep.sweeps.report", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path, help="a sweep (multirun) directory, or one run's directory")
    parser.add_argument("--direction", choices=("maximize", "minimize"), default=None,
                        help="how to rank the objective (default: the Optuna study's direction, else maximize)")
    parser.add_argument("--no-plots", action="store_true", help="write report.md only")
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        print(f"error: sweep_dir={args.sweep_dir} is not a directory", file=sys.stderr)
        return 2
    started = time.perf_counter()
    try:
        path = build_report(args.sweep_dir, args.direction, plots=not args.no_plots)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {path} ({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
