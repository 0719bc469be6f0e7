"""A sweep's report from its run directories alone: ``python -m grpo_sweep.report <sweep_dir>``.

Writes ``report.md`` and PNG plots into the sweep directory: the runs ranked by objective (with training and
held-out reward means and what each cost), mean ± std per configuration when seeds were swept with the paired
difference from the best configuration and whether it is more than seed noise, reward curves and per-reward
components per run, and held-out accuracy against each swept parameter. Reads ``summary.json`` and ``metrics.jsonl`` (plus an Optuna ``trial`` block in
the summary when there is one: number, state, params, value). No account, no network, no torch.
"""
from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .results import METRICS, cost_line, read_jsonl, write_text_atomic
from .stats import Comparison, ci_text, compare_to_best, is_seed, seed_means, signed
from .tables import markdown_table
from .sweep import best_cell, collect_runs, sweep_direction, varying_overrides

REPORT = "report.md"
PLOTS = "plots"


@dataclass
class Run:
    dir: Path
    summary: dict
    label: str
    params: dict  # swept parameter -> value (overrides, or an Optuna trial's params)
    history: list = field(default_factory=list)

    @property
    def state(self) -> str:
        trial = self.summary.get("trial") or {}
        return str(trial.get("state") or self.summary.get("status") or "running")

    @property
    def objective(self) -> float | None:
        value = self.summary.get("objective")
        if value is None:
            value = (self.summary.get("trial") or {}).get("value")
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
    return [str(o) for o in OmegaConf.load(path)] if path.exists() else []


def load_runs(sweep_dir: Path) -> list[Run]:
    found = collect_runs(sweep_dir)
    for run_dir, summary in found:
        if "overrides" not in summary:  # still running (or killed): Hydra wrote its overrides when it started
            summary["overrides"] = _hydra_overrides(run_dir)
    swept = varying_overrides([summary for _, summary in found])
    runs = []
    for (run_dir, summary), overrides in zip(found, swept):
        params = {}
        for override in overrides:
            key, _, value = override.partition("=")
            params[key.lstrip("+~")] = _parse_value(value)
        trial = summary.get("trial") or {}
        params.update(trial.get("params") or {})
        if trial.get("number") is not None:
            label = f"trial {trial['number']}: " + " ".join(f"{k}={_param(v)}" for k, v in (trial.get("params") or {}).items())
        else:
            label = " ".join(overrides) or run_dir.name
        runs.append(Run(run_dir, summary, label, params, read_jsonl(run_dir / METRICS)))
    return runs


def _direction(sweep_dir: Path, runs: list[Run], direction: str | None) -> str:
    return direction or sweep_direction(sweep_dir, [run.summary for run in runs])


def rank(runs: list[Run], direction: str) -> list[Run]:
    """Best first; runs without an objective (failed, pruned early, still running) last."""
    sign = -1 if direction == "maximize" else 1
    return sorted(runs, key=lambda r: (r.objective is None, sign * (r.objective or 0.0)))


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-2 and value != 0 else f"{value:.{digits}f}"
    return str(value)


def _param(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def reward_names(runs: list[Run]) -> list[str]:
    return sorted({name for r in runs for name in (r.summary.get("train_rewards") or {})})


def runsmarkdown_table(runs: list[Run], names: list[str]) -> list[str]:
    header = ["#", "run", "configuration", "state", "objective", "eval_accuracy", "before", "lenient", "pass@k", "maj@k",
              "best (step)", "reward", "reward (start)"]
    header += [f"rewards/{n}" for n in names] + [f"held-out {n}" for n in names] + ["steps", "runtime (s)"]
    header += ["device (s)", "tokens", "tokens/s"]
    rows = []
    for i, run in enumerate(runs, 1):
        s = run.summary
        train, held_out = s.get("train_rewards") or {}, s.get("eval_rewards") or {}
        rows.append(
            [i, run.dir.name, run.label, run.state, _fmt(run.objective), _fmt(s.get("eval_accuracy")),
             _fmt(s.get("eval_accuracy_before")), _fmt(s.get("eval_accuracy_lenient")), _fmt(s.get("eval_pass_at_k")),
             _fmt(s.get("eval_maj_at_k")), best_cell(s), _fmt(s.get("reward")), _fmt(s.get("reward_first"))]
            + [_fmt(train.get(n)) for n in names]
            + [_fmt(held_out.get(n)) for n in names]
            + [_fmt(s.get("steps") or (run.history[-1].get("step") if run.history else None)),
               _fmt(s.get("runtime_s"), 1) if isinstance(s.get("runtime_s"), float) else _fmt(s.get("runtime_s")),
               _fmt(s.get("device_seconds"), 1), _fmt(s.get("generated_tokens")), _fmt(s.get("tokens_per_s"), 1)]
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
    groups = seed_groups(runs)
    return compare_to_best({key: seed_means((seed_of(r), r.objective) for r in group) for key, group in groups.items()},
                           direction)


def _mean_std(values: list) -> str:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not values:
        return "-"
    if len(values) == 1:
        return _fmt(float(values[0]))
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def seedsmarkdown_table(runs: list[Run], names: list[str], direction: str) -> list[str]:
    """Per configuration: its seeds, mean ± std, and the paired difference from the best configuration."""
    if not seeds_swept(runs):
        return []
    groups = seed_groups(runs)
    header = ["configuration", "seeds", "objective (mean ± std)", "Δ vs best (paired)", "95% CI", "verdict",
              "eval_accuracy", "lenient", "best", "reward"] + [f"rewards/{n}" for n in names]
    header += [f"held-out {n}" for n in names]
    rows = []
    for row in comparisons(runs, direction):
        group = groups[row.config]
        seeds = ",".join(_param(v) for r in group for k, v in r.params.items() if is_seed(k)) or str(len(group))
        delta = "0 (reference)" if row.is_best else signed(row.delta)
        if row.n and not row.is_best:
            delta += f" (n={row.n})"
        rows.append(
            [row.config, seeds, _mean_std([r.objective for r in group]), delta, ci_text(row), row.verdict,
             _mean_std([r.summary.get("eval_accuracy") for r in group]),
             _mean_std([r.summary.get("eval_accuracy_lenient") for r in group]),
             _mean_std([r.summary.get("best_objective") for r in group]),
             _mean_std([r.summary.get("reward") for r in group])]
            + [_mean_std([(r.summary.get("train_rewards") or {}).get(n) for r in group]) for n in names]
            + [_mean_std([(r.summary.get("eval_rewards") or {}).get(n) for r in group]) for n in names]
        )
    return markdown_table(header, rows)


def _series(history: list[dict], key: str) -> tuple[list, list]:
    points = [(row["step"], row[key]) for row in history
              if isinstance(row.get(key), (int, float)) and "step" in row and "train_runtime" not in row]
    return [p[0] for p in points], [p[1] for p in points]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "param"


def write_plots(runs: list[Run], names: list[str], out_dir: Path, optimized_metric: str) -> list[tuple[str, str]]:
    """PNG files (title, relative path) for the report; Agg backend, nothing shown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    plots = []
    many = len(runs) > 8

    fig, ax = plt.subplots(figsize=(9, 5))
    for run in runs:
        steps, values = _series(run.history, "reward")
        if steps:
            ax.plot(steps, values, label=run.label[:60], linewidth=1.2)
    ax.set(xlabel="step", ylabel="reward (weighted sum)", title="Training reward per run")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize=6 if many else 8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.savefig(out_dir / "reward_curves.png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    plots.append(("Training reward per run", f"{out_dir.name}/reward_curves.png"))

    cols = min(4, max(1, len(runs)))
    rows = math.ceil(len(runs) / cols) if runs else 1
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.6 * rows), squeeze=False, sharey=True)
    for ax, run in zip(axes.flat, runs):
        for name in names:
            steps, values = _series(run.history, f"rewards/{name}/mean")
            if steps:
                ax.plot(steps, values, label=name, linewidth=1.1)
        ax.set_title(f"{run.dir.name}: {run.label}"[:48], fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(runs):]:
        ax.axis("off")
    fig.supxlabel("step", fontsize=9)
    fig.supylabel("reward component (unweighted mean)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_dir / "reward_components.png", dpi=90)
    plt.close(fig)
    plots.append(("Reward components per run", f"{out_dir.name}/reward_components.png"))

    metrics = [("eval_accuracy", "held-out accuracy")]
    if optimized_metric and optimized_metric != "eval_accuracy":
        metrics.append(("objective", f"objective ({optimized_metric})"))
    for param in sorted({k for r in runs for k in r.params if not is_seed(k)}):  # seeds are replicates, not a knob
        points = [(r.params[param], r) for r in runs if param in r.params]
        numeric = all(isinstance(v, (int, float)) for v, _ in points)
        categories = sorted({str(v) for v, _ in points}) if not numeric else []
        fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.6), squeeze=False)
        for ax, (key, title) in zip(axes.flat, metrics):
            xs, ys = [], []
            for value, run in points:
                y = run.objective if key == "objective" else run.summary.get(key)
                if isinstance(y, (int, float)):
                    xs.append(value if numeric else categories.index(str(value)))
                    ys.append(y)
            ax.scatter(xs, ys, alpha=0.7)
            means = {}
            for x, y in zip(xs, ys):
                means.setdefault(x, []).append(y)
            line = sorted((x, statistics.mean(v)) for x, v in means.items())
            if line:
                ax.plot([p[0] for p in line], [p[1] for p in line], color="tab:orange", linewidth=1, label="mean")
            if not numeric:
                ax.set_xticks(range(len(categories)), categories, rotation=30, ha="right", fontsize=8)
            elif len({x for x in xs if x > 0}) > 2 and min(xs, default=0) > 0 and max(xs) / min(xs) >= 100:
                ax.set_xscale("log")
            ax.set(xlabel=param, ylabel=title, title=f"{title} vs {param}")
            ax.grid(alpha=0.3)
        fig.tight_layout()
        path = out_dir / f"accuracy_vs_{_safe(param)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        plots.append((f"Held-out accuracy vs {param}", f"{out_dir.name}/{path.name}"))
    written = {Path(rel).name for _, rel in plots}
    for stale in out_dir.glob("*.png"):  # plots/ is the report's own: drop what an earlier report drew
        if stale.name not in written:
            stale.unlink()
    return plots


def build_report(sweep_dir: Path, direction: str | None = None, plots: bool = True) -> Path:
    """Write report.md (and plots/) into ``sweep_dir``; return the report's path."""
    sweep_dir = Path(sweep_dir)
    runs = load_runs(sweep_dir)
    if not runs:
        raise FileNotFoundError(f"no run directories (with .hydra/config.yaml) under {sweep_dir}")
    direction = _direction(sweep_dir, runs, direction)
    ranked = rank(runs, direction)
    names = reward_names(runs)
    metric = next((r.summary.get("optimized_metric") for r in runs if r.summary.get("optimized_metric")), "eval_accuracy")
    states: dict[str, int] = {}
    for run in runs:
        states[run.state] = states.get(run.state, 0) + 1

    lines = [f"# Sweep report: {sweep_dir.name}", ""]
    lines.append(f"{len(runs)} runs in `{sweep_dir}` — " + ", ".join(f"{n} {s}" for s, n in sorted(states.items())))
    lines.append(f"Objective: `{metric}` ({direction}); held-out accuracy is `eval_accuracy` (greedy, answer in the asked "
                 "format) after training, `before` the same before training, `lenient` the last answer anywhere in the "
                 "completion, `pass@k`/`maj@k` from k samples per prompt; `best (step)` is the best held-out evaluation of "
                 "`best_metric` during training and its step (its adapter is kept: `best.adapter`).")
    best = ranked[0] if ranked[0].objective is not None else None
    if best is not None:
        lines.append(f"Best: run `{best.dir.name}` ({best.label}) with objective {_fmt(best.objective)}.")
    cost = cost_line([run.summary for run in runs])
    if cost:
        lines.append(cost + " (device-seconds: training with its evaluations, saving and the final evaluation; "
                     "tokens: completions sampled in training).")
    lines += ["", "## Runs, best first", ""] + runsmarkdown_table(ranked, names)
    per_config = seedsmarkdown_table(runs, names, direction)
    if per_config:
        lines += ["", "## Mean ± std over seeds, per configuration, and the paired difference from the best", "",
                  "Δ vs best: the mean over the seeds both configurations ran of (this configuration's objective − "
                  "the best configuration's), the same seed paired with itself; 95% CI: Student t on those "
                  "differences, n−1 degrees of freedom. Verdict: `better`/`worse` when the CI excludes 0 "
                  f"({'higher' if direction == 'maximize' else 'lower'} is better), else `indistinguishable` — "
                  "with fewer than 2 shared seeds there is no CI. The best configuration (best mean objective) is "
                  "the reference.", ""] + per_config
    if plots:
        try:
            images = write_plots(ranked, names, sweep_dir / PLOTS, metric)
        except ImportError as exc:  # matplotlib is optional for the table
            images = []
            lines += ["", f"(no plots: {exc})"]
        lines += ["", "## Plots", ""]
        for title, rel in images:
            lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    failed = [r for r in ranked if r.state.lower() in ("failed", "fail")]
    if failed:
        lines += ["", "## Failures", ""] + [f"- `{r.dir.name}` ({r.label}): {r.summary.get('error', '?')}" for r in failed]
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
    parser = argparse.ArgumentParser(prog="python -m grpo_sweep.report", description=__doc__.splitlines()[0])
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
