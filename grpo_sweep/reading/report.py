"""A sweep's report from its run directories alone (``python -m grpo_sweep.sweeps.report <sweep_dir>`` asks for it).

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

import math
import shlex
import statistics
from pathlib import Path
from typing import Any

from ..run.cost import cost_line
from ..run.files import write_text_atomic
from ..run.record import VAL_ACCURACY, RunSummary, test_counterpart
from ..run.results import lookup
from . import plots as figures
from .results import UNREADABLE, SweepResults, SweepRun
from .stats import Comparison, is_seed, sd
from .tables import TOP_RUNS, best_cell, markdown_table, number, objective_is_val
from .wording import ci_text, signed

REPORT = "report.md"
PLOTS = "plots"


def reward_names(runs: list[SweepRun]) -> list[str]:
    return sorted({name for r in runs for name in (r.summary.train_rewards or {})})


def runs_table(results: SweepResults, runs: list[SweepRun], names: list[str]) -> list[str]:
    """One row per run: validation (what ranks) and test (what the verdicts are about) side by side."""
    own_objective = not objective_is_val(results.summaries)
    header = ["#", "run", "configuration", "state"] + (["objective"] if own_objective else [])
    header += [
        VAL_ACCURACY if own_objective else f"{VAL_ACCURACY} (objective)",
        "val before",
        "best (step)",
        "test_accuracy",
        "test before",
        "test lenient",
        "pass@k",
        "maj@k",
        "reward",
        "reward (start)",
    ]
    header += [f"rewards/{n}" for n in names] + [f"val {n}" for n in names] + ["steps", "runtime (s)"]
    header += ["device (s)", "tokens", "tokens/s"]
    rows = []
    for i, run in enumerate(runs, 1):
        s = run.summary
        train, val = s.train_rewards or {}, s.val_rewards or {}
        rows.append(
            [i, run.name, run.label, run.state]
            + ([number(run.objective)] if own_objective else [])
            + [
                number(s.val_accuracy if own_objective else run.objective),
                number(s.val_accuracy_before),
                best_cell(s),
                number(s.test_accuracy),
                number(s.test_accuracy_before),
                number(s.test_accuracy_lenient),
                number(s.test_pass_at_k),
                number(s.test_maj_at_k),
                number(s.reward),
                number(s.reward_first),
            ]
            + [number(train.get(n)) for n in names]
            + [number(val.get(n)) for n in names]
            + [
                number(results.steps(run)),
                number(s.runtime_s, 1) if isinstance(s.runtime_s, float) else number(s.runtime_s),
                number(s.device_seconds, 1),
                number(s.generated_tokens),
                number(s.tokens_per_s, 1),
            ]
        )
    return markdown_table(header, rows)


def _mean_std(values: list) -> str:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not values:
        return "-"
    if len(values) == 1:
        return number(float(values[0]))
    return f"{statistics.mean(values):.3f} ± {sd(values):.3f}"


def seeds_table(results: SweepResults, names: list[str]) -> list[str]:
    """Per configuration: its seeds, validation and test mean ± std, the test difference from the reference with its
    family-wise interval, the verdict, what the design could detect; then how the intervals were made."""
    if not results.seeds_swept:
        return []
    groups = results.configurations
    header = [
        "configuration",
        "seeds",
        "objective (validation, mean ± std)",
        "test (mean ± std)",
        "Δ test vs reference",
        "95% family-wise CI",
        "verdict",
        "detectable (80% power)",
        "seeds to resolve",
        VAL_ACCURACY,
        "test before",
        "best",
        "reward",
    ] + [f"rewards/{n}" for n in names]
    header += [f"val {n}" for n in names]
    rows = []
    compared = results.comparisons
    for row in compared:
        group = groups[row.config]
        seeds = ",".join(v for r in group for v in r.seed_values) or str(len(group))
        if row.stopped:
            seeds += f" ({row.stopped})"
        delta = "0 (reference)" if row.is_best else signed(row.delta)
        note = (
            f" ({row.note})"
            if row.note and (row.verdict in ("incomplete", "no verdict") or row.tied or row.stopped)
            else ""
        )
        rows.append(
            [
                row.config,
                seeds,
                _mean_std([r.objective for r in group]),
                _test_cell(row),
                delta,
                ci_text(row),
                row.verdict + note,
                "-" if row.mde is None else f"{row.mde:.3f}",
                "-" if row.seeds_needed is None else str(row.seeds_needed),
                _mean_std([r.summary.val_accuracy for r in group]),
                _mean_std([r.summary.test_accuracy_before for r in group]),
                _mean_std([r.summary.best_objective for r in group]),
                _mean_std([r.summary.reward for r in group]),
            ]
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


TOP_FAILURES = 20


def forest_rows(results: SweepResults) -> list[figures.ForestRow]:
    """The per-configuration comparisons as the forest plot's rows (config, delta, low, high, verdict)."""
    if not results.seeds_swept:
        return []
    return [
        figures.ForestRow(c.config, 0.0 if c.is_best else c.delta, c.low, c.high, c.verdict)
        for c in results.comparisons
        if c.mean is not None
    ]


# The forest plot's defaults say what its rows are: the test difference from the reference, family-wise intervals.
FOREST_OPTIONS: dict = {}


def write_plots(
    results: SweepResults,
    names: list[str],
    out_dir: Path,
    forest_options: dict | None = None,
    scales: dict | None = None,
) -> list[tuple[str, str]]:
    """The report's PNGs (plots.write_plots), configurations best first by their mean objective; the runs in rank
    order within a configuration. ``scales``: the scale each sampled parameter was drawn on (an Optuna study's)."""
    groups: dict[str, list[SweepRun]] = {}
    for run in results.ranked:  # ties between configurations' means: the one with the better run first
        groups.setdefault(run.config, []).append(run)
    sign = -1 if results.direction == "maximize" else 1
    means = {
        key: statistics.mean(values) if values else None
        for key, values in (
            (key, [r.objective for r in group if r.objective is not None]) for key, group in groups.items()
        )
    }
    ranked = sorted(groups, key=lambda key: (means[key] is None, sign * (means[key] or 0.0)))
    # the per-parameter plots show what the sweep optimized (a study's val_rewards.<term>), and its test counterpart
    metric = next((r.summary.optimized_metric for r in results.runs if r.summary.optimized_metric), VAL_ACCURACY)
    test_key = test_counterpart(metric)

    def point(run: SweepRun) -> figures.RunPoint:
        summary = run.summary.to_dict()
        return figures.RunPoint(
            run.dir,
            run.params,
            _finite(lookup(summary, metric)),
            _finite(lookup(summary, test_key)) if test_key else None,
        )

    configs = [figures.ConfigRuns(key, [point(r) for r in groups[key]]) for key in ranked]
    best = [r.dir for r in results.ranked[:5] if r.objective is not None]
    return figures.write_plots(
        configs,
        names,
        out_dir,
        forest_rows(results),
        forest_options,
        is_seed=is_seed,
        best_runs=best,
        read=results.series,
        metric=(metric, test_key),
        scales=scales or {},
    )


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
    terms = ", ".join(
        f"{name} {_percent(statistics.mean(v))} (max {_percent(max(v))}, {len(v)} runs)" for name, v in ordered
    )
    return (
        f"Reward cost (each term's share of training time: wall time inside the reward over the training steps' "
        f"wall time, periodic evaluations left out; mean over runs): {terms}. Per run: `reward_cost.<term>.share` "
        f"in [{RUNS_CSV}]({RUNS_CSV})."
    )


RUNS_CSV = "runs.csv"
_FIRST = (
    "objective",
    VAL_ACCURACY,
    "val_accuracy_before",
    "best_step",
    "best_objective",
    "test_accuracy",
    "test_accuracy_before",
    "test_accuracy_lenient",
    "test_accuracy_lenient_before",
    "test_pass_at_k",
    "test_maj_at_k",
    "test_k",
    "val_accuracy_lenient",
    "val_samples",
    "test_samples",
    "reward",
    "reward_first",
    "steps",
    "runtime_s",
    "device_seconds",
    "generated_tokens",
    "tokens_per_s",
    "status",
    "error",
)
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


def _plot_section(results: SweepResults, names: list[str], options: dict, unwritten: list[str]) -> list[str]:
    try:
        images = write_plots(results, names, results.sweep_dir / PLOTS, FOREST_OPTIONS, options.get("scales"))
    except ImportError as exc:  # matplotlib is optional for the table
        images = []
        lines = ["", f"(no plots: {exc})"]
    except OSError as exc:  # a read-only sweep directory
        images = []
        unwritten.append(f"{PLOTS}/ ({exc.strerror or exc})")
        lines = ["", f"(no plots: {PLOTS}/ could not be written: {exc.strerror or exc})"]
    else:
        lines = []
    lines += ["", "## Plots", ""]
    for title, rel in images:
        lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    return lines


def write_runs_csv(ranked: list[SweepRun], path: Path) -> None:
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
        writer.writerow(
            [
                i,
                run.name,
                run.state,
                run.label,
                *(run.params.get(p, "") for p in params),
                *("" if row.get(k) is None else row[k] for k in metrics),
            ]
        )
    write_text_atomic(path, buffer.getvalue())


def wandb_section(sweep_dir: Path) -> list[str]:
    """The command that uploads every offline W&B run under the directory: each run's, and a ``-m`` sweep's
    ``verdicts`` run (``<sweep>/wandb``), which the sweep's end logs after this report is written, so no list or
    glob made now could name it (and a glob that matches nothing fails the whole command in zsh). ``find`` looks
    when the command runs, at any depth (an Optuna study's ``trials/<n>/<seed>``); wandb skips runs already synced."""
    offline = list(sweep_dir.glob("**/wandb/offline-run-*"))
    if not offline:
        return []
    return [
        "",
        "## W&B",
        "",
        f"{len(offline)} offline W&B run(s) were written; this uploads every offline run under "
        "the directory (at the end of a `-m` sweep also its `verdicts` run, logged into `wandb/` after this "
        "report):",
        "",
        f"    find {shlex.quote(str(sweep_dir))} -type d -name 'offline-run-*' -prune -exec wandb sync {{}} +",
    ]


def write_report(
    results: SweepResults, plots: bool = True, seeds_heading: list[str] | None = None, plot_options: dict | None = None
) -> Path:
    """Write report.md (and plots/) into the sweep's directory from a sweep read once; return the report's path.
    ``seeds_heading``, ``plot_options``: the strategy's (search/base.py Strategy), from whoever asked it."""
    sweep_dir, runs, direction = results.sweep_dir, results.runs, results.direction
    if not runs:
        raise FileNotFoundError(f"no run directories (with .hydra/config.yaml) under {sweep_dir}")
    ranked = results.ranked
    names = reward_names(runs)
    metric = next((r.summary.optimized_metric for r in runs if r.summary.optimized_metric), VAL_ACCURACY)
    states: dict[str, int] = {}
    for run in runs:
        states[run.state] = states.get(run.state, 0) + 1

    lines = [f"# Sweep report: {sweep_dir.name}", ""]
    lines.append(f"{len(runs)} runs in `{sweep_dir}` — " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
    lines.append(
        f"Objective: `{metric}` ({direction}), on the validation split: it ranks the runs and configurations. "
        f"`{VAL_ACCURACY}` is validation accuracy (greedy, answer in the asked format) at the step the run "
        "reports, `best (step)`: the best validation evaluation of `best_metric` during training and its step "
        "(its adapter is the one reported); `val before` the same before training. `test_accuracy` is the "
        "test split, evaluated once after training on the reported adapter (it chooses nothing), `test "
        "before` the test split on the weights before training, `test lenient` the last answer anywhere in "
        "the completion, `pass@k`/`maj@k` from k samples per test prompt."
    )
    best = ranked[0] if ranked[0].objective is not None else None
    if best is not None:
        lines.append(f"Best: run `{best.name}` ({best.label}) with objective {number(best.objective)}.")
    cost = cost_line([run.summary for run in runs])
    if cost:
        lines.append(
            cost + " (device-seconds: training with its evaluations, saving and the final evaluation; "
            "tokens: completions sampled in training)."
        )
    reward_cost = reward_cost_line([run.summary for run in runs])
    if reward_cost:
        lines.append(reward_cost)
    lines.append(
        f"Every run — its overrides as columns, every summary value, its state — is in [{RUNS_CSV}]({RUNS_CSV}) "
        "(`pandas.read_csv`)."
    )
    damaged_at = len(lines)  # the damaged files section goes here, once everything has been read
    unwritten: list[str] = []
    try:
        write_runs_csv(ranked, sweep_dir / RUNS_CSV)
    except OSError as exc:  # a read-only sweep directory: the report is still made
        unwritten.append(f"{RUNS_CSV} ({exc.strerror or exc})")
    # the plots first: they read each run's metrics.jsonl, which also gives the runs table the steps of a run that
    # did not finish (one read per file); the report shows them last
    plot_lines = _plot_section(results, names, plot_options or {}, unwritten) if plots else []
    per_config = seeds_table(results, names)
    if per_config and seeds_heading:
        lines += ["", *seeds_heading, ""] + per_config
    elif per_config:
        lines += [
            "",
            "## Mean ± std over seeds, per configuration, and the verdict against the reference",
            "",
            "Ranked by the objective on validation (mean over the seeds every complete configuration ran); the "
            "best is the reference. The verdict is about the test split (the objective's test counterpart, on "
            "the questions every run answered where the runs saved per-question outcomes; each configuration "
            "with its own run-to-run noise): `better`/`worse` "
            f"({'higher' if direction == 'maximize' else 'lower'} is better) when the 95% family-wise interval "
            "of Δ excludes 0 — at most a 5% chance of any false `better`/`worse` in the whole table, whichever "
            "configuration is the reference and however noisy each is — else `indistinguishable`: no difference "
            "larger than the "
            "`detectable` one (80% power), and `seeds to resolve` the observed Δ. A configuration missing a "
            "seed the others ran is `incomplete`; with one seed there is `no verdict`.",
            "",
        ] + per_config
    shown = ranked[:TOP_RUNS]
    lines += ["", "## Runs, best first", ""]
    if len(ranked) > len(shown):
        lines += [f"The {len(shown)} best of {len(ranked)} runs; all of them: [{RUNS_CSV}]({RUNS_CSV}).", ""]
    lines += runs_table(results, shown, names)
    unreadable = [r for r in runs if r.state == UNREADABLE]
    if unreadable:
        lines += [
            "",
            "## Unreadable runs",
            "",
            f"{len(unreadable)} run(s) left a summary.json that cannot be read; they are reported without results:",
            "",
        ]
        lines += [f"- `{r.name}` ({r.label}): {r.summary.error or '?'}" for r in unreadable]
    lines += plot_lines
    failed = [r for r in ranked if r.state.lower() in ("failed", "fail")]
    if failed:
        lines += ["", "## Failures", ""] + [
            f"- `{r.name}` ({r.label}): {r.summary.error or '?'}" for r in failed[:TOP_FAILURES]
        ]
        if len(failed) > TOP_FAILURES:
            lines.append(f"- ... and {len(failed) - TOP_FAILURES} more: [{RUNS_CSV}]({RUNS_CSV}), column `error`")
    lines += wandb_section(sweep_dir)
    if results.problems:
        lines[damaged_at:damaged_at] = [
            "",
            "## Damaged or missing files",
            "",
            "Files the report met damaged or missing, each with what was done instead (the figures above are "
            "what is left):",
            "",
            *(f"- {line}" for line in results.problems),
        ]
    path = sweep_dir / REPORT
    text = "\n".join(lines).rstrip() + "\n"
    try:
        write_text_atomic(path, text)
    except OSError as exc:
        raise ReportNotWritten(path, text, [f"{REPORT} ({exc.strerror or exc})", *unwritten]) from None
    if unwritten:
        raise ReportNotWritten(path, text, unwritten)
    return path


class ReportNotWritten(OSError):
    """The report was made but some of its files could not be written (a read-only sweep directory): ``text`` is
    report.md's, ``unwritten`` each file not written with why; report.md itself was written if it is not among them."""

    def __init__(self, path: Path, text: str, unwritten: list[str]) -> None:
        super().__init__(f"could not write into {path.parent}: {', '.join(unwritten)}")
        self.path, self.text, self.unwritten = path, text, unwritten
