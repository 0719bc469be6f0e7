"""A worker job: pull trials from the shared study and train each in-process until the budget is spent.

Runs on the compute node (torch is imported by training). Every process builds the same sampler and pruner
from config: Optuna does not store them, and a worker that guessed would silently get defaults.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ...adapters.optuna import TrialBudgetSpent, load_budgeted_study, trial_id, trial_of
from ...run.context import RunContext
from ...run.files import write_json_atomic
from ...run.lifecycle import run_one
from ...run.record import RunSummary
from ...run.results import lookup
from ..base import merge_overrides, searchpath_overrides
from .config import PRUNERS, SAMPLERS, TRIALS_DIR, WORKER_MARKER, grid_of, objectives_and_directions
from .space import SearchSpace
from .storage import open_storage, resolve_url

log = logging.getLogger(__name__)

# the lock the workers of a study take to count its trials and make the next one (adapters/optuna.py)
BUDGET_LOCK = "trial_budget"


def build_sampler(spec: Any, worker_index: int, space: SearchSpace):
    import optuna

    name = spec.name
    seed = None if spec.seed is None else int(spec.seed) + worker_index  # same seed in two workers = same trials
    if name == "tpe":
        # constant_liar: workers in parallel avoid suggesting the points others are running
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=spec.n_startup_trials, constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler(grid_of(space), seed=seed)
    raise ValueError(f"hydra.sweeper.sampler.name={name!r}; use one of: {', '.join(SAMPLERS)}")


def build_pruner(spec: Any, multi_objective: bool, max_steps: int, every: int):
    import optuna

    if spec.name not in PRUNERS:
        raise ValueError(f"hydra.sweeper.pruner.name={spec.name!r}; use one of: {', '.join(PRUNERS)}")
    if spec.name == "none" or multi_objective:  # Optuna cannot prune multi-objective studies
        return optuna.pruners.NopPruner()
    if spec.name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=spec.n_startup_trials, n_warmup_steps=spec.n_warmup_steps)
    return optuna.pruners.HyperbandPruner(min_resource=every, max_resource=max_steps, reduction_factor=3)


def _failed(study) -> list:
    import optuna

    return [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]


def _last_error(failed: list) -> str:
    error = failed[-1].user_attrs.get("error") or "its worker died (failed by heartbeat)"
    return f"last error: {error.strip().splitlines()[0]} (each trial's summary.json has its traceback)"


def too_many_failures(study, max_failures: int) -> str | None:
    """Why the study must stop, in one line: more than ``max_failures`` trials failed."""
    failed = _failed(study)
    if len(failed) <= max_failures:
        return None
    return (
        f"Optuna study {study.study_name!r} stopped: {len(failed)} trials failed, more than "
        f"hydra.sweeper.max_failures={max_failures}; {_last_error(failed)}"
    )


def study_failed(study, max_failures: int) -> str | None:
    """Why a study that ended failed, in one line: every trial failed, or more than ``max_failures`` did (a few
    failed trials within ``max_failures`` are a search's normal cost)."""
    failed = _failed(study)
    if failed and len(failed) == len(study.trials):
        which = f"every one of the {len(failed)} trials" if len(failed) > 1 else "the only trial"
        return f"{which} failed (Optuna study {study.study_name!r}); {_last_error(failed)}"
    return too_many_failures(study, max_failures)


class _OneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        return True


class _Stderr(logging.StreamHandler):
    """The stderr of the moment (a test may redirect it after the handler is made)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


_OPTUNA_HANDLER = _Stderr()
_OPTUNA_HANDLER.setFormatter(logging.Formatter("[%(levelname)1.1s %(asctime)s] %(message)s"))  # Optuna's own
_OPTUNA_HANDLER.addFilter(_OneLine())


def log_trials_in_one_line() -> None:
    """Optuna logs a failed trial with its traceback, a screenful per trial; the run's summary.json keeps that
    traceback (run_one), so the terminal gets Optuna's one line: the trial, its parameters, the error."""
    import optuna

    optuna.logging.disable_default_handler()
    logger = logging.getLogger("optuna")  # the library's root logger (optuna.logging)
    if _OPTUNA_HANDLER not in logger.handlers:
        logger.addHandler(_OPTUNA_HANDLER)


def config_groups(
    config_loader, choices, config_name: str | None = None, searchpath: list[str] = ()
) -> dict[str, list[str]]:
    """Every config group of the job (``hydra.runtime.choices``) with its options, hydra's own left out; with the
    sweep's ``searchpath_overrides``, the options in the user's own config directories too."""
    return {
        str(group): list(
            config_loader.get_group_options(str(group), config_name=config_name, overrides=list(searchpath))
        )
        for group in choices
        if not str(group).startswith("hydra/")
    }


class Objective:
    """Train one trial: ``seeds_per_trial`` runs of one configuration, seeds the configuration has not had yet,
    each in ``trials/<number>/seed<seed>/``; the value told to Optuna is the mean over all the configuration's
    seeds so far (those of earlier complete trials of the same parameters included)."""

    def __init__(
        self,
        cfg,
        space: SearchSpace,
        sweep_dir: Path,
        base_overrides: list[str],
        objectives: list[str],
        settings,
        compose=None,
        context: RunContext | None = None,
        train_fn=None,
        worker_index: int = 0,
    ):
        self.cfg, self.space, self.sweep_dir = cfg, space, sweep_dir
        self.worker_index = worker_index  # which of the study's worker jobs this is (recorded with each trial)
        # the worker job's context; each trial's is derived from it
        self.context = context or RunContext(sweep_dir, list(base_overrides), sweep_dir, optuna_worker=True)
        self.base_overrides, self.objectives, self.settings = base_overrides, objectives, settings
        # composes the job config for overrides; needed when a parameter chooses a config group
        self.compose = compose
        # run.train.train unless a test gives another (same signature; lifecycle.run_one)
        self.train_fn = train_fn

    def trial_config(self, values: dict, overrides: list[str]):
        if self.space.groups:
            # a group choice replaces a whole subtree (and may bring defaults of its own): compose it as the
            # command line would, so the trial's config is exactly what its reproduce command gives
            return self.compose(overrides)
        return self.space.apply(self.cfg, values)

    def __call__(self, trial):
        import optuna

        values = self.space.suggest(trial, self.cfg)
        point = self.space.as_overrides(values)
        overrides = merge_overrides(self.base_overrides, point)
        trial.set_user_attr("overrides", point)
        same = same_configuration(trial)
        complete = [t for t in same if t.state == optuna.trial.TrialState.COMPLETE]
        if same:
            trial.set_user_attr("repeat_of", same[0].number)
        if not complete and any(t.state == optuna.trial.TrialState.PRUNED for t in same):
            # the pruner already stopped this configuration; training it again would spend steps to be stopped again
            raise optuna.TrialPruned(f"same parameters as pruned trial {same[0].number}")
        seed_key = self.settings.get("seed_key", "trainer.seed")
        base_seed = OmegaConf.select(self.cfg, seed_key)
        if not isinstance(base_seed, int):
            raise ValueError(
                f"hydra.sweeper.seed_key={seed_key!r}: the config's value {base_seed!r} is not a whole number"
            )
        claimed = {int(seed) for t in same for seed in t.user_attrs.get("seeds", [])}
        # Two workers drawing the same configuration at the same moment could claim the same seeds: constant_liar
        # makes TPE avoid points in flight, and a duplicate seed would only weigh one seed twice in the mean.
        seeds = next_seeds(claimed, base_seed, int(self.settings.get("seeds_per_trial", 1)))
        trial.set_user_attr("seeds", seeds)
        # Pruning reads the first replica only. The replicas run one after another, so a mean over them at step s
        # exists only once the last replica has reached s, after most of the trial's cost is spent; the first
        # replica's probes are compared with every other trial's first replica (like with like), and a bad
        # configuration stops after part of one run. A configuration that already completed is not pruned again:
        # it passed the pruner once, and its repeat is there to add seeds to an estimate the sampler finds good.
        monitor_first = len(self.objectives) == 1 and self.settings.pruner.name != "none" and not complete
        trial_dir = self.sweep_dir / TRIALS_DIR / str(trial.number)
        seed_values: dict[str, list[float]] = {}
        for i, seed in enumerate(seeds):
            run_overrides = merge_overrides(overrides, [f"{seed_key}={seed}"])
            summary = self._run(
                trial,
                values,
                {seed_key: seed},
                run_overrides,
                trial_dir / f"seed{seed}",
                monitored=monitor_first and i == 0,
                replica={"seed": seed, "replica": i},
            )
            if summary.status == "pruned":
                raise optuna.TrialPruned(f"pruned at step {summary.get('pruned_at_step')} (seed {seed})")
            figures = summary.to_dict()
            results = [lookup(figures, metric) for metric in self.objectives]
            missing = [m for m, v in zip(self.objectives, results) if not isinstance(v, (int, float))]
            if missing:
                raise ValueError(f"objective {missing} missing from summary.json (keys: {sorted(figures)})")
            seed_values[str(seed)] = [float(v) for v in results]
            trial.set_user_attr("seed_values", seed_values)
        everything = {**configuration_seed_values(complete), **seed_values}
        trial.set_user_attr("configuration_seeds", sorted(int(k) for k in everything))
        means = [sum(v[j] for v in everything.values()) / len(everything) for j in range(len(self.objectives))]
        return means[0] if len(means) == 1 else means

    def _run(
        self, trial, values: dict, seed: dict, overrides: list[str], run_dir: Path, monitored: bool, replica: dict
    ) -> RunSummary:
        """One replica of the trial: run it in ``run_dir`` (run_one records how it ended there); a failure is
        raised."""
        from ...launching.gate import check_run
        from ...tracking import open_logger

        cfg = self.trial_config({**values, **seed}, overrides)
        hydra_dir = run_dir / ".hydra"
        hydra_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, hydra_dir / "config.yaml")
        OmegaConf.save(OmegaConf.create(overrides), hydra_dir / "overrides.yaml")
        info = {"number": trial.number, "params": values, "worker": self.worker_index, **replica}
        try:
            # the gate, for this run: its config is made here, and it trains here, now
            return run_one(
                cfg,
                self.context.for_trial(run_dir, overrides),
                gate=lambda c: check_run(c, run_dir, trains_here=True),
                open_tracker=open_logger,
                monitor=self._monitor(trial, cfg) if monitored else None,
                trial=info,
                train_fn=self.train_fn,
            )
        except Exception as exc:
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}"[:2000])
            raise

    def _monitor(self, trial, cfg):
        """The trial's pruning monitor, as ``monitor(rank)`` (called once the backend is imported: the monitor
        imports transformers): one process reports to ``trial`` itself; a trial's ranks (distributed=...), started
        from here, load it from the study's storage (RankMonitor)."""
        if cfg.distributed.strategy != "none":
            return RankMonitor(
                resolve_url(self.settings.storage, self.sweep_dir),
                self.settings.study_name,
                trial_id(trial),
                OmegaConf.to_container(self.settings.pruner, resolve=True),
                cfg.trainer.max_steps,
                self.objectives[0],
                self.settings.prune_every,
                self.settings.prune_eval_samples,
            )

        def monitor(rank: int):
            from .pruning import TrialMonitor

            return TrialMonitor(trial, self.objectives[0], self.settings.prune_every, self.settings.prune_eval_samples)

        return monitor


@dataclass(frozen=True)
class RankMonitor:
    """Each rank's pruning monitor for a trial trained as several processes (sent to them; ``__call__(rank)`` runs
    there): rank 0 reports to the trial, loaded from the study's storage, the others follow its decision."""

    storage_url: str
    study_name: str
    trial_id: int
    pruner: dict
    max_steps: int
    metric: str
    every: int
    eval_samples: int

    def __call__(self, rank: int):
        from .pruning import TrialMonitor

        trial = None
        if rank == 0:
            import optuna

            # single objective: a monitored trial has one (Objective.__call__)
            pruner = build_pruner(OmegaConf.create(self.pruner), False, self.max_steps, self.every)
            study = optuna.load_study(study_name=self.study_name, storage=open_storage(self.storage_url), pruner=pruner)
            trial = trial_of(study, self.trial_id)
        return TrialMonitor(trial, self.metric, self.every, self.eval_samples, shared=True)


def next_seeds(claimed: set[int], base: int, n: int) -> list[int]:
    """The ``n`` smallest seeds from ``base`` up that ``claimed`` does not hold."""
    seeds, seed = [], base
    while len(seeds) < n:
        if seed not in claimed:
            seeds.append(seed)
        seed += 1
    return seeds


def same_configuration(trial) -> list:
    """The study's other trials with exactly this trial's parameters (any state), oldest first."""
    return [
        other
        for other in trial.study.get_trials(deepcopy=False)
        if other.number != trial.number and other.params == trial.params
    ]


def configuration_seed_values(trials) -> dict[str, list[float]]:
    """{seed: objective values} over ``trials`` (complete trials of one configuration)."""
    out: dict[str, list[float]] = {}
    for t in sorted(trials, key=lambda t: t.number):
        out.update(t.user_attrs.get("seed_values") or {})
    return out


def hydra_composer(config_name: str, searchpath: list[str] = ()):
    """Compose job configs with Hydra's compose API: the worker runs inside the Hydra app (every launcher
    restores its global state, --config-dir included); ``searchpath``: the sweep's ``searchpath_overrides``."""

    def compose(overrides: list[str]):
        from hydra import compose as hydra_compose

        return hydra_compose(config_name=config_name, overrides=[*searchpath, *overrides])

    return compose


def hydra_groups(choices, config_name: str, searchpath: list[str]) -> dict[str, list[str]]:
    from hydra.core.global_hydra import GlobalHydra

    return config_groups(GlobalHydra.instance().config_loader(), choices, config_name, searchpath)


def run_worker(cfg, hydra_cfg, context: RunContext | None = None) -> float | None:
    """The task of a worker job: optimize until the study's trial budget is spent."""
    s = hydra_cfg.sweeper
    sweep_dir = Path(hydra_cfg.sweep.dir)
    worker_index = int(hydra_cfg.job.num or 0)
    objectives, _ = objectives_and_directions(s, cfg.optimized_metric)
    base_overrides = list(hydra_cfg.overrides.task)
    searchpath = searchpath_overrides(hydra_cfg)
    compose = hydra_composer(hydra_cfg.job.config_name, searchpath)
    space = SearchSpace.from_config(
        s.params,
        s.reward_weights,
        cfg,
        groups=hydra_groups(hydra_cfg.runtime.choices, hydra_cfg.job.config_name, searchpath),
        compose=lambda extra: compose(merge_overrides(base_overrides, extra)),
    )
    storage = open_storage(resolve_url(s.storage, sweep_dir), s.heartbeat_interval, s.grace_period)
    study = load_budgeted_study(
        s.study_name,
        storage,
        sampler=build_sampler(s.sampler, worker_index, space),
        pruner=build_pruner(s.pruner, len(objectives) > 1, cfg.trainer.max_steps, s.prune_every),
        n_trials=s.n_trials,
        lock_path=str(sweep_dir / BUDGET_LOCK),
    )
    objective = Objective(
        cfg, space, sweep_dir, base_overrides, objectives, s, compose, context, worker_index=worker_index
    )

    def stop_on_failures(study, trial):
        message = too_many_failures(study, s.max_failures)
        if message:
            log.error(message)
            study.stop()

    log_trials_in_one_line()
    marker = Path(hydra_cfg.runtime.output_dir) / WORKER_MARKER
    write_json_atomic(marker, {"worker": worker_index, "study": s.study_name, "state": "running"})
    try:
        study.optimize(
            objective,
            callbacks=[stop_on_failures],
            catch=(Exception,),  # a crashing trial is FAIL with its error; the study goes on
            gc_after_trial=True,
        )
    except TrialBudgetSpent:  # every trial of the budget is made (by this worker or another): the normal end
        pass
    write_json_atomic(
        marker, {"worker": worker_index, "study": s.study_name, "state": "done", "trials": len(study.trials)}
    )
    try:
        return study.best_value if len(objectives) == 1 else None
    except ValueError:  # no completed trial yet
        return None
