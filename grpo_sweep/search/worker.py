"""A worker job: pull trials from the shared study and train each in-process until the budget is spent.

Runs on the compute node (torch is imported by training). Every process builds the same sampler and pruner
from config: Optuna does not store them, and a worker that guessed would silently get defaults.
"""
from __future__ import annotations

import copy
import logging
import time
import traceback
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ..run.context import RunContext
from ..tracking.loggers import close_failed
from ..run.results import lookup, record_failure, write_json_atomic, write_summary
from ..sweeps.runs import WORKER_MARKER
from .config import PRUNERS, SAMPLERS, objectives_and_directions
from .space import SearchSpace, merge_overrides
from .storage import open_storage, resolve_url

log = logging.getLogger(__name__)

TRIALS_DIR = "trials"
STATE_BY_STATUS = {"completed": "COMPLETE", "pruned": "PRUNED", "failed": "FAIL"}


def build_sampler(spec: Any, worker_index: int, space: SearchSpace):
    import optuna

    name = spec.name
    if name not in SAMPLERS:
        raise ValueError(f"hydra.sweeper.sampler.name={name!r}; use one of {SAMPLERS}")
    seed = None if spec.seed is None else int(spec.seed) + worker_index  # same seed in two workers = same trials
    if name == "tpe":
        # constant_liar: workers in parallel avoid suggesting the points others are running
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=spec.n_startup_trials, constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    grid = {}
    for key, p in space.params.items():
        values = p.get("choices") or p.get("grid")
        if not values:
            raise ValueError(f"sampler grid: hydra.sweeper.params.{key} needs `choices` or a `grid` list of values")
        grid[key] = list(values)
    if space.simplex or any((space.simplex_by_mix or {}).values()):
        raise ValueError("sampler grid cannot search reward weights on the simplex; set hydra.sweeper.reward_weights=null")
    return optuna.samplers.GridSampler(grid, seed=seed)


def build_pruner(spec: Any, multi_objective: bool, max_steps: int, every: int):
    import optuna

    if spec.name not in PRUNERS:
        raise ValueError(f"hydra.sweeper.pruner.name={spec.name!r}; use one of {PRUNERS}")
    if spec.name == "none" or multi_objective:  # Optuna cannot prune multi-objective studies
        return optuna.pruners.NopPruner()
    if spec.name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=spec.n_startup_trials, n_warmup_steps=spec.n_warmup_steps)
    return optuna.pruners.HyperbandPruner(min_resource=every, max_resource=max_steps, reduction_factor=3)


def too_many_failures(study, max_failures: int) -> str | None:
    import optuna

    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    if len(failed) <= max_failures:
        return None
    last = failed[-1].user_attrs.get("error", "see the trial's summary.json")
    return (
        f"Optuna study {study.study_name!r} stopped: {len(failed)} trials failed, more than "
        f"hydra.sweeper.max_failures={max_failures}; last error: {last}"
    )


def config_groups(config_loader, choices) -> dict[str, list[str]]:
    """Every config group of the job (``hydra.runtime.choices``) with its options, hydra's own left out."""
    return {
        str(group): list(config_loader.get_group_options(str(group)))
        for group in choices if not str(group).startswith("hydra/")
    }


class Objective:
    def __init__(self, cfg, space: SearchSpace, sweep_dir: Path, base_overrides: list[str], objectives: list[str],
                 settings, compose=None, context: RunContext | None = None):
        self.cfg, self.space, self.sweep_dir = cfg, space, sweep_dir
        # the worker job's context; each trial's is derived from it
        self.context = context or RunContext(sweep_dir, list(base_overrides), sweep_dir, optuna_worker=True)
        self.base_overrides, self.objectives, self.s = base_overrides, objectives, settings
        # composes the job config for overrides; needed when a parameter chooses a config group
        self.compose = compose

    def trial_config(self, values: dict, overrides: list[str]):
        if self.space.groups:
            # a group choice replaces a whole subtree (and may bring defaults of its own): compose it as the
            # command line would, so the trial's config is exactly what its reproduce command gives
            return self.compose(overrides)
        cfg = copy.deepcopy(self.cfg)
        for key, value in values.items():
            OmegaConf.update(cfg, key, value, merge=False, force_add=key in self.space.added)
        return cfg

    def __call__(self, trial):
        import optuna

        from ..sweeps.gate import check_run
        from ..run.train import train
        from ..tracking import open_logger

        values = self.space.suggest(trial, self.cfg)
        point = self.space.as_overrides(values)
        overrides = merge_overrides(self.base_overrides, point)
        trial.set_user_attr("overrides", point)
        earlier = _same_point(trial)
        if earlier is not None:
            # A discrete space repeats points; training one again would spend steps to learn nothing new.
            trial.set_user_attr("duplicate_of", earlier.number)
            if earlier.state == optuna.trial.TrialState.PRUNED:
                raise optuna.TrialPruned(f"same parameters as pruned trial {earlier.number}")
            return earlier.values[0] if len(earlier.values) == 1 else earlier.values
        trial_dir = self.sweep_dir / TRIALS_DIR / str(trial.number)
        cfg = self.trial_config(values, overrides)
        hydra_dir = trial_dir / ".hydra"
        hydra_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, hydra_dir / "config.yaml")
        OmegaConf.save(OmegaConf.create(overrides), hydra_dir / "overrides.yaml")
        started = time.time()
        info = {"number": trial.number, "params": values, "worker": self.s.get("_worker_index", 0)}
        try:
            check_run(cfg, trial_dir, trains_here=True)  # the gate, for this trial: it trains here, now
            monitor = None
            multi = len(self.objectives) > 1
            if not multi and self.s.pruner.name != "none":
                from .pruning import TrialMonitor

                monitor = TrialMonitor(trial, self.objectives[0], self.s.prune_every, self.s.prune_eval_samples)
            summary = train(cfg, self.context.for_trial(trial_dir, overrides), monitor=monitor, open_tracker=open_logger)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            trial.set_user_attr("error", error[:2000])
            close_failed({"status": "failed", "error": error})  # the next trial gets its own tracker run
            record_failure(trial_dir, error, overrides, traceback.format_exc(), time.time() - started,
                           trial={**info, "state": "FAIL"})
            raise
        summary["trial"] = {**info, "state": STATE_BY_STATUS[summary["status"]]}
        write_summary(trial_dir, summary)
        if summary["status"] == "pruned":
            raise optuna.TrialPruned(f"pruned at step {summary['pruned_at_step']}")
        results = [lookup(summary, metric) for metric in self.objectives]
        missing = [m for m, v in zip(self.objectives, results) if v is None]
        if missing:
            raise ValueError(f"objective {missing} missing from summary.json (keys: {sorted(summary)})")
        return results[0] if len(results) == 1 else results


def _same_point(trial):
    """An earlier finished (complete or pruned) trial of the study with exactly these parameters, if any."""
    import optuna

    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    for other in trial.study.get_trials(deepcopy=False, states=finished):
        if other.number != trial.number and other.params == trial.params:
            return other
    return None


def hydra_composer(config_name: str):
    """Compose job configs with Hydra's compose API: the worker runs inside the Hydra app (every launcher
    restores its global state), so the search path includes any --config-dir of the sweep."""

    def compose(overrides: list[str]):
        from hydra import compose as hydra_compose

        return hydra_compose(config_name=config_name, overrides=list(overrides))

    return compose


def hydra_groups(choices) -> dict[str, list[str]]:
    from hydra.core.global_hydra import GlobalHydra

    return config_groups(GlobalHydra.instance().config_loader(), choices)


def run_worker(cfg, hydra_cfg, context: RunContext | None = None) -> float | None:
    """The task of a worker job: optimize until the study's trial budget is spent."""
    import optuna
    from optuna.study import MaxTrialsCallback

    s = hydra_cfg.sweeper
    sweep_dir = Path(hydra_cfg.sweep.dir)
    worker_index = int(hydra_cfg.job.num or 0)
    objectives, _ = objectives_and_directions(s, cfg.optimized_metric)
    base_overrides = list(hydra_cfg.overrides.task)
    compose = hydra_composer(hydra_cfg.job.config_name)
    space = SearchSpace.from_config(
        s.params, s.reward_weights, cfg, groups=hydra_groups(hydra_cfg.runtime.choices),
        compose=lambda extra: compose(merge_overrides(base_overrides, extra)),
    )
    storage = open_storage(resolve_url(s.storage, sweep_dir), s.heartbeat_interval, s.grace_period)
    study = optuna.load_study(
        study_name=s.study_name,
        storage=storage,
        sampler=build_sampler(s.sampler, worker_index, space),
        pruner=build_pruner(s.pruner, len(objectives) > 1, cfg.trainer.max_steps, s.prune_every),
    )
    settings = OmegaConf.to_container(s, resolve=True)
    settings["_worker_index"] = worker_index
    objective = Objective(cfg, space, sweep_dir, base_overrides, objectives, OmegaConf.create(settings), compose, context)

    def stop_on_failures(study, trial):
        message = too_many_failures(study, s.max_failures)
        if message:
            log.error(message)
            study.stop()

    marker = Path(hydra_cfg.runtime.output_dir) / WORKER_MARKER
    write_json_atomic(marker, {"worker": worker_index, "study": s.study_name, "state": "running"})
    if len(study.trials) < s.n_trials:
        study.optimize(
            objective,
            callbacks=[MaxTrialsCallback(s.n_trials, states=None), stop_on_failures],
            catch=(Exception,),  # a crashing trial is FAIL with its error; the study goes on
            gc_after_trial=True,
        )
    write_json_atomic(marker, {"worker": worker_index, "study": s.study_name, "state": "done", "trials": len(study.trials)})
    try:
        return study.best_value if len(objectives) == 1 else None
    except ValueError:  # no completed trial yet
        return None

