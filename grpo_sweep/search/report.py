"""What a study found: best trial (or Pareto front), every trial's state, best.yaml with the single-run
command that reproduces it, and PNG plots. Works on a finished or a running study."""
from __future__ import annotations

import logging
from pathlib import Path

from ..run.results import write_text_atomic
from ..sweeps.runs import read_study_file
from .space import merge_overrides, override_key
from .storage import open_storage
from ..sweeps.tables import markdown_table

log = logging.getLogger(__name__)


def _fmt(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return str(value)


def reproduce_command(study_info: dict, trial) -> str:
    overrides = merge_overrides(study_info.get("reproduce_overrides", []), trial.user_attrs.get("overrides", []))
    return "python launch.py " + " ".join(overrides)


def study_report(sweep_dir: Path, plots: bool = True) -> str:
    import optuna

    sweep_dir = Path(sweep_dir)
    info = read_study_file(sweep_dir)
    study = optuna.load_study(study_name=info["study_name"], storage=open_storage(info["storage"]))
    trials = study.trials
    states = {}
    for t in trials:
        states[t.state.name] = states.get(t.state.name, 0) + 1
    lines = [
        f"Optuna study {info['study_name']!r}: {len(trials)} trials ("
        + ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items()))
        + f"), objective {' / '.join(info['objectives'])} ({' / '.join(info['directions'])})",
        "",
    ]
    param_names = sorted({p for t in trials for p in t.user_attrs.get("overrides", [])})
    keys = sorted({override_key(o) for o in param_names})
    header = ["trial", "state", "value", "last report"] + keys + ["error"]
    rows = []
    for t in trials:
        params = _params(t)
        value = t.values if t.values and len(t.values) > 1 else t.value
        last = max(t.intermediate_values) if t.intermediate_values else "-"
        rows.append([str(t.number), t.state.name, _fmt(value), str(last)] + [params.get(k, "-") for k in keys]
                    + [t.user_attrs.get("error", "")[:60]])
    lines += markdown_table(header, rows)
    completed = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    best_trials = []
    if completed:
        best_trials = study.best_trials if len(info["objectives"]) > 1 else [study.best_trial]
    if best_trials:
        label = "Pareto front" if len(best_trials) > 1 or len(info["objectives"]) > 1 else "Best"
        lines += ["", f"{label}:"]
        for t in best_trials:
            lines.append(f"  trial {t.number}: value {_fmt(t.values if len(t.values) > 1 else t.value)}  "
                         f"{' '.join(t.user_attrs.get('overrides', []))}")
        best = best_trials[0]
        command = reproduce_command(info, best)
        _write_best(sweep_dir, info, best, command)
        lines += ["", f"Reproduce trial {best.number} as a single run:", f"  {command}",
                  f"  (saved with its params in {sweep_dir / 'best.yaml'})"]
    if plots:
        written = _plots(study, sweep_dir, multi=len(info["objectives"]) > 1)
        if written:
            lines.append(f"Plots: {', '.join(str(p) for p in written)}")
    lines.append(f"Browse it: optuna-dashboard {info['storage'].replace('journal:', '')}")
    text = "\n".join(lines)
    write_text_atomic(sweep_dir / "study.md", text + "\n")
    return text


def _params(trial) -> dict:
    return {override_key(o): o.split("=", 1)[1] for o in trial.user_attrs.get("overrides", [])}


def _write_best(sweep_dir: Path, info: dict, trial, command: str) -> None:
    from omegaconf import OmegaConf

    data = {
        "trial": trial.number,
        "values": list(trial.values),
        "objectives": info["objectives"],
        "params": _params(trial),
        # exactly as given on the command line: a group choice (`reward_mix=format`) then values
        "overrides": list(trial.user_attrs.get("overrides", [])),
        "command": command,
    }
    tmp = sweep_dir / "best.yaml.tmp"
    OmegaConf.save(OmegaConf.create(data), tmp)
    tmp.replace(sweep_dir / "best.yaml")


def _plots(study, sweep_dir: Path, multi: bool) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna
    from optuna.visualization import matplotlib as vis

    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    out = []
    jobs = []
    if complete and not multi:
        jobs.append(("optimization_history.png", lambda: vis.plot_optimization_history(study)))
        if any(t.intermediate_values for t in study.trials):
            jobs.append(("intermediate_values.png", lambda: vis.plot_intermediate_values(study)))
        if len(complete) >= 2 and len({tuple(sorted(t.params.items())) for t in complete}) >= 2:
            jobs.append(("param_importances.png", lambda: vis.plot_param_importances(study)))
    if multi and len(complete) >= 1:
        jobs.append(("pareto_front.png", lambda: vis.plot_pareto_front(study)))
    import warnings

    for name, plot in jobs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # optuna marks its matplotlib backend experimental
                ax = plot()
            fig = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
            fig.set_size_inches(8, 5)
            fig.tight_layout()
            fig.savefig(sweep_dir / name, dpi=100)
            plt.close(fig)
            out.append(sweep_dir / name)
        except Exception as exc:  # a plot that cannot be drawn (e.g. too few trials) must not hide the table
            log.warning("could not draw %s: %s", name, exc)
    return out
