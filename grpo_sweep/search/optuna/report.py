"""What a study found: every trial's state, the best configuration (the best mean over all its seeds; or the
Pareto front) with its test figures and an interval, how many configurations were tried, best.yaml with the
single-run command that reproduces it, and PNG plots. Works on a finished or a running study."""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ...reading.results import UNREADABLE, SweepResults
from ...reading.stats import test_interval
from ...reading.tables import markdown_table, number, seed_block
from ...run.files import cannot_write, write_text_atomic
from ...run.record import OUTCOME_FIELDS, test_counterpart
from ...run.results import lookup, without_best
from ..base import merge_overrides, override_key
from .config import TRIALS_DIR, WORKER_MARKER, read_study_file
from .space import MIX, SIMPLEX
from .storage import dashboard_argument, load_study_read_only, shown, study_url

log = logging.getLogger(__name__)


def reproduce_command(study_info: dict, trial, extra: list[str] = (), multirun: bool = False) -> str:
    """The command that trains ``trial``'s configuration as a plain run (``extra``: e.g. its seed)."""
    overrides = merge_overrides(study_info.get("reproduce_overrides", []), trial.user_attrs.get("overrides", []))
    overrides = merge_overrides(overrides, list(extra))
    # quoted for a POSIX shell where needed (``hydra.searchpath=[...]``, a Hydra-quoted string): runs as printed
    return "python launch.py " + ("-m " if multirun else "") + shlex.join(overrides)


def study_report(sweep_dir: Path, plots: bool = True, results: SweepResults | None = None) -> str:
    """study.md (printed and written), best.yaml and the plots, in ``sweep_dir`` alone (its own database, as
    study.json records it: storage.study_url); in a directory that cannot be written, printed only, and said so.
    ``results``: the sweep's runs read once (SweepResults.read), when the caller has them."""
    import optuna

    sweep_dir = Path(sweep_dir)
    info = read_study_file(sweep_dir)
    study, url = load_study_read_only(info["study_name"], info.get("storage"), sweep_dir)
    results = results or SweepResults.read(sweep_dir, info["directions"][0], not_runs=(WORKER_MARKER,))
    read_only = cannot_write(sweep_dir)
    trials = study.trials
    states = {}
    for t in trials:
        states[t.state.name] = states.get(t.state.name, 0) + 1
    configs = configurations(trials)
    seeds_per_trial = info.get("seeds_per_trial", 1)
    lines = [
        f"Optuna study {info['study_name']!r}: {len(trials)} trials ("
        + ", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items()))
        + f"), {len(configs)} configurations, {seeds_per_trial} seed(s) per trial, objective "
        + f"{' / '.join(info['objectives'])} ({' / '.join(info['directions'])})",
        "",
    ]
    if not study_url(info.get("storage"), sweep_dir)[1]:
        lines[-1:] = [f"(its trials are read from {shown(url)}, hydra.sweeper.storage, not from {sweep_dir})", ""]
    param_names = sorted({p for t in trials for p in t.user_attrs.get("overrides", [])})
    keys = sorted({override_key(o) for o in param_names})
    header = ["trial", "state", "value", "seeds", "config", "last report"] + keys + ["error"]
    rows = []
    config_of = {t.number: c.number for c in configs for t in c.trials}
    for t in trials:
        params = _params(t)
        # a pruned trial's Optuna value is its last report (one replica, mid-training): "last report" shows its step
        value = None if t.state.name != "COMPLETE" else t.values if len(t.values) > 1 else t.value
        last = max(t.intermediate_values) if t.intermediate_values else "-"
        seeds = ",".join(str(x) for x in t.user_attrs.get("seeds", [])) or "-"
        rows.append(
            [str(t.number), t.state.name, number(value), seeds, str(config_of.get(t.number, "-")), str(last)]
            + [params.get(k, "-") for k in keys]
            + [t.user_attrs.get("error", "")[:60]]
        )
    lines += markdown_table(header, rows)
    lines.append("(value: the mean over every seed of the trial's configuration so far; config: its first trial)")
    multi = len(info["objectives"]) > 1
    if not multi:
        lines += compared_configurations(results)
    best = None
    if multi:
        front = study.best_trials if any(t.state == optuna.trial.TrialState.COMPLETE for t in trials) else []
        if front:
            lines += ["", "Pareto front:"]
            for t in front:
                lines.append(
                    f"  trial {t.number}: value {number(t.values)}  {' '.join(t.user_attrs.get('overrides', []))}"
                )
            best = next(c for c in configs if front[0] in c.trials)
    else:
        best = best_configuration(configs, info["directions"][0])
    if best is not None:
        outcome = best_outcome(results, info, best, configs)
        lines += [""] + outcome["lines"]
        command = reproduce_command(info, best.last, seed_override(info, best.seeds[0]))
        if not read_only:
            _write_best(sweep_dir, info, best, command, outcome["best_yaml"])
        lines += [
            "",
            f"Reproduce configuration {best.number} (seed {best.seeds[0]}) as a single run:",
            f"  {command}",
        ]
        if not read_only:
            lines.append(f"  (saved with its params, seeds and test figures in {sweep_dir / 'best.yaml'})")
    if plots and not read_only:
        written = _plots(study, sweep_dir, info["objectives"], multi=multi)
        if written:
            lines.append(f"Plots: {', '.join(str(p) for p in written)}")
    stored = info.get("storage")
    lines.append(f"Browse it: optuna-dashboard {dashboard_argument(stored if stored and '${' in stored else url)}")
    if read_only:
        lines.append(f"{sweep_dir} cannot be written ({read_only}): study.md, best.yaml and the plots were not written")
        return "\n".join(lines)
    text = "\n".join(lines)
    write_text_atomic(sweep_dir / "study.md", text + "\n")
    return text


def compared_configurations(results: SweepResults) -> list[str]:
    """The sweep table's verdicts (tables.seed_block: one logic for the table, report.md, this report and W&B):
    the study's configurations with a finished run, ranked by validation, judged on test, family-wise."""
    block = seed_block(results, shown=lambda row: row.rank_mean is not None)
    if len(block) < 2:
        return []
    return [
        "",
        "Configurations compared on the seeds they share (ranked by validation; verdicts on test, 95% family-wise):",
    ] + block[1:]


@dataclass
class Configuration:
    """The trials of one point of the space (a sampler that repeats a point adds seeds to it)."""

    trials: list
    # {seed: objective values} over its complete trials
    seed_values: dict = field(default_factory=dict)

    @property
    def number(self) -> int:
        return self.trials[0].number

    @property
    def last(self):
        """Its latest complete trial (the one whose value covers every seed), else its latest trial."""
        complete = [t for t in self.trials if t.state.name == "COMPLETE"]
        return (complete or self.trials)[-1]

    @property
    def seeds(self) -> list[int]:
        return sorted(int(s) for s in self.seed_values)

    def mean(self, j: int = 0) -> float | None:
        if not self.seed_values:
            return None
        return sum(v[j] for v in self.seed_values.values()) / len(self.seed_values)

    def runs(self, sweep_dir: Path) -> list[tuple[int, Path]]:
        """(seed, run dir) of every seed in ``seed_values``."""
        out = []
        for t in self.trials:
            if t.state.name != "COMPLETE":
                continue
            for seed in t.user_attrs.get("seed_values") or {}:
                out.append((int(seed), Path(sweep_dir) / TRIALS_DIR / str(t.number) / f"seed{seed}"))
        return sorted(out)


def configurations(trials) -> list[Configuration]:
    """The study's configurations in order of first trial: trials grouped by identical parameters."""
    by_params: dict = {}
    for t in sorted(trials, key=lambda t: t.number):
        if t.state.name in ("RUNNING", "WAITING") and not t.params:
            continue  # not sampled yet
        key = tuple(sorted((k, repr(v)) for k, v in t.params.items()))
        config = by_params.setdefault(key, Configuration(trials=[]))
        config.trials.append(t)
        if t.state.name == "COMPLETE":
            config.seed_values.update(t.user_attrs.get("seed_values") or {})
    return list(by_params.values())


def best_configuration(configs: list[Configuration], direction: str) -> Configuration | None:
    """The configuration with the best mean over all its seeds (not a lucky trial of few seeds); ties: earlier."""
    scored = [c for c in configs if c.mean() is not None]
    if not scored:
        return None
    sign = 1 if direction == "maximize" else -1
    return max(scored, key=lambda c: (sign * c.mean(), -c.number))


def best_outcome(results: SweepResults, info: dict, best: Configuration, configs: list[Configuration]) -> dict:
    """The best configuration's validation value and its test figures with intervals: lines and best.yaml's part.

    ``configurations_compared``: those the best was selected from, i.e. that reached a validation value or were
    pruned for a worse one (a configuration that only failed took no part)."""
    compared = sum(any(t.state.name in ("COMPLETE", "PRUNED") for t in c.trials) for c in configs)
    metric = info["objectives"][0]
    runs = [(seed, results.run_at(run_dir)) for seed, run_dir in best.runs(results.sweep_dir)]
    summaries = {
        seed: run.summary if run is not None and run.summary.status not in ("running", UNREADABLE) else None
        for seed, run in runs
    }
    # the objective's test counterpart (``test_accuracy`` for ``val_accuracy``), else test accuracy
    tests = [test_counterpart(without_best(metric)) or "test_accuracy"]
    if tests[0] != "test_accuracy":
        tests.append("test_accuracy")
    validation = {
        "metric": metric,
        "mean": best.mean(0),
        "seeds": best.seeds,
        "per_seed": {int(s): v[0] for s, v in sorted(best.seed_values.items(), key=lambda kv: int(kv[0]))},
    }
    head = (
        f"Best of {compared} configurations ({len(configs)} tried): configuration {best.number} (trials "
        f"{', '.join(str(t.number) for t in best.trials if t.state.name == 'COMPLETE')}), "
        f"{metric} {number(best.mean(0))} over {len(best.seeds)} seed(s) {best.seeds}"
    )
    lines = [head]
    test_part = {}
    for name in tests:
        values = {seed: lookup(s.to_dict(), name) if s is not None else None for seed, s in summaries.items()}
        outcomes = None
        field_name = OUTCOME_FIELDS.get(name)
        if field_name:
            read = [results.outcomes(run, field_name) if run is not None else None for _, run in runs]
            outcomes = read if read and all(r for r in read) else None
        samples = [s.test_samples for s in summaries.values() if s is not None and s.test_samples]
        estimate = test_interval(
            [v for v in values.values() if isinstance(v, (int, float))],
            outcomes,
            min(samples) if samples else None,
            bounded=field_name is not None,
        )
        test_part[name] = {**estimate, "per_seed": values}
        lines.append(f"  test: {name} {describe(estimate)}")
    lines.append(
        f"  Its validation value is optimistic: it is the best of {compared} noisy estimates, the more "
        "configurations the more so. The test figure was not selected on."
    )
    return {
        "lines": lines,
        "best_yaml": {
            "configurations_tried": len(configs),
            "configurations_compared": compared,
            "validation": validation,
            "test": test_part,
        },
    }


def describe(estimate: dict) -> str:
    if estimate.get("mean") is None:
        return f"- ({estimate['method']})"
    interval = "" if estimate.get("low") is None else f" [{estimate['low']:.3f}, {estimate['high']:.3f}]"
    return f"{estimate['mean']:.3f}{interval} ({estimate['method']})"


def seed_override(info: dict, seed: int) -> list[str]:
    return [f"{info.get('seed_key', 'trainer.seed')}={seed}"]


def _params(trial) -> dict:
    return {override_key(o): o.split("=", 1)[1] for o in trial.user_attrs.get("overrides", [])}


def _write_best(sweep_dir: Path, info: dict, best: Configuration, command: str, outcome: dict) -> None:
    from omegaconf import OmegaConf

    trial = best.last
    seeds = best.seeds
    data = {
        "trial": trial.number,
        "trials": [t.number for t in best.trials if t.state.name == "COMPLETE"],
        # the mean over every seed of the configuration, per objective
        "values": [best.mean(j) for j in range(len(info["objectives"]))],
        "objectives": info["objectives"],
        "seeds": seeds,
        "params": _params(trial),
        # exactly as given on the command line: a group choice (`reward_mix=format`) then values
        "overrides": list(trial.user_attrs.get("overrides", [])),
        "command": command,
        "command_all_seeds": reproduce_command(
            info, trial, [f"{info.get('seed_key', 'trainer.seed')}={','.join(str(s) for s in seeds)}"], multirun=True
        ),
        **outcome,
    }
    write_text_atomic(sweep_dir / "best.yaml", OmegaConf.to_yaml(OmegaConf.create(_yaml_safe(data))))


def _yaml_safe(value):
    """YAML-safe: dict keys as strings (OmegaConf refuses int keys), floats as floats."""
    if isinstance(value, dict):
        return {str(k): _yaml_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_yaml_safe(v) for v in value]
    return value


def weights_study(study):
    """A copy of ``study`` (in memory, complete trials, the same values) whose trials carry the reward weights they
    trained with as parameters (``reward_mix.<term>.weight``, continuous on [0, 1]) instead of the simplex coordinates
    that drew them: k weights come from k-1 stick-breaking coordinates, so importances of the coordinates rank
    numbers no run was configured with and leave one term out. Optuna's own ``params``/``target`` options of
    ``plot_param_importances`` choose among a trial's parameters and its objective, not new parameters: hence a copy.
    The weights sum to 1, so their importances share what one fewer free number explains."""
    import optuna
    from optuna.distributions import FloatDistribution

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "A new study created in memory" line in the report
    try:
        copy = optuna.create_study(directions=study.directions)
    finally:
        optuna.logging.set_verbosity(verbosity)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        params = {k: v for k, v in t.params.items() if not k.startswith(SIMPLEX)}
        distributions = {k: t.distributions[k] for k in params}
        if len(params) < len(t.params):
            for key, value in _params(t).items():
                if key.startswith(f"{MIX}.") and key.endswith(".weight") and key not in params:
                    params[key], distributions[key] = float(value), FloatDistribution(0.0, 1.0)
        copy.add_trial(
            optuna.trial.create_trial(
                params=params,
                distributions=distributions,
                values=t.values,
                intermediate_values=t.intermediate_values,
                user_attrs=t.user_attrs,
            )
        )
    return copy


def study_plots(study, objectives: list[str], multi: bool) -> list[tuple[str, Callable]]:
    """(file name, draw) of each plot the study has data for; ``draw()`` returns Optuna's matplotlib Axes, its
    objective axis named after the study's objective(s), importances over the weights (``weights_study``)."""
    import optuna
    from optuna.visualization import matplotlib as vis

    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    jobs = []
    if complete and not multi:
        jobs.append(
            ("optimization_history.png", lambda: vis.plot_optimization_history(study, target_name=objectives[0]))
        )
        if any(t.intermediate_values for t in study.trials):
            jobs.append(("intermediate_values.png", lambda: vis.plot_intermediate_values(study)))
        if len(complete) >= 2 and len({tuple(sorted(t.params.items())) for t in complete}) >= 2:
            jobs.append(
                (
                    "param_importances.png",
                    lambda: vis.plot_param_importances(weights_study(study), target_name=objectives[0]),
                )
            )
    if multi and len(complete) >= 1:
        jobs.append(("pareto_front.png", lambda: vis.plot_pareto_front(study, target_names=list(objectives))))
    return jobs


def _plots(study, sweep_dir: Path, objectives: list[str], multi: bool) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import warnings

    import matplotlib.pyplot as plt

    out = []
    for name, plot in study_plots(study, objectives, multi):
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
