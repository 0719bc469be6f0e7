"""The Hydra sweeper: create or resume the study, launch worker jobs, then report the study.

It runs on the submitting (login) node: Optuna and SQLAlchemy only, no torch.
"""
from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Iterator, List

from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

from ..config.grpo_fields import check_args
from ..config.show import first_line
from ..run.context import OPTUNA_WORKER, ROLE_ENV
from .config import check_replicas, check_sampler_and_pruner, objectives_and_directions, write_study_file
from .space import PASSTHROUGH, SearchSpace, SearchSpaceError, group_overrides, merge_overrides
from .storage import check_no_password, check_storage_url, open_storage, resolve_url, saved, shown

log = logging.getLogger(__name__)


class ComposingSweeper(Sweeper):
    """What grpo-sweep's own sweepers (Optuna's, PBT's) share: the launcher Hydra configured, and composing a job's
    config for overrides as the launch would (with the sweep's search path)."""

    def __init__(self, **settings: Any):
        self.settings = OmegaConf.create(settings)
        self.config: DictConfig | None = None
        self.launcher = None
        self.hydra_context = None

    def setup(self, *, hydra_context, task_function, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def _compose(self, overrides: List[str], with_hydra_overrides: bool = True) -> DictConfig:
        """The job config for ``overrides`` (optionally without this sweep's hydra.* overrides but its search path,
        as a single run would compose it)."""
        with_hydra = OmegaConf.to_container(self._load(overrides, with_hydra_overrides), resolve=False)
        with_hydra.pop("hydra", None)
        return OmegaConf.create(with_hydra)

    def _load(self, overrides: List[str], with_hydra_overrides: bool = True) -> DictConfig:
        """The config for ``overrides``, its hydra node included (``hydra.runtime.choices``)."""
        if with_hydra_overrides:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        else:
            from hydra.types import RunMode

            cfg = self.hydra_context.config_loader.load_configuration(
                config_name=self.config.hydra.job.config_name, overrides=[*self._searchpath(), *overrides],
                run_mode=RunMode.RUN,
            )
        return cfg

    def _searchpath(self) -> list[str]:
        from .worker import searchpath_overrides

        return searchpath_overrides(self.config.hydra)

    def _trains_here(self) -> bool:
        from ..sweeps.gate import GatedLauncher

        return isinstance(self.launcher, GatedLauncher) and self.launcher.trains_here

    @contextlib.contextmanager
    def _refusals(self) -> Iterator[None]:
        """A check that fails inside stops the launch in one line, before anything is written."""
        from ..run.validate import ConfigError
        from ..sweeps.gate import Refused, stop

        try:
            yield
        except Refused as exc:
            stop(exc)
        except (ConfigError, ValueError) as exc:
            stop(ConfigError(f"{exc}; no run was started"))

    def _dry_run_or_begin(self, sweep_dir: Path, first: list[list[str]]) -> bool:
        """``hydra.launcher.dry_run``: the launcher prints the first round's jobs (the later ones depend on its
        results), True; else the sweep's directory and its multirun.yaml are written, False."""
        if self.config.hydra.launcher.get("dry_run"):
            self.launcher.launch(first, initial_job_idx=0)
            return True
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        return False

    def _reproduce_overrides(self, arguments: List[str], job_cfg: DictConfig) -> list[str]:
        """Overrides that give a single run the sweep's base config (hparams_search dropped, its settings kept), its
        search path first: the user's own config directories hold the options it names."""
        plain = [a for a in arguments if not a.split("=", 1)[0].lstrip("+~").startswith(("hparams_search", "hydra"))]
        plain += group_overrides(self._load(plain, with_hydra_overrides=False).hydra.runtime.choices,
                                 self.config.hydra.runtime.choices)
        single = self._compose(plain, with_hydra_overrides=False)
        return self._searchpath() + plain + diff_overrides(single, job_cfg)


class OptunaSweeperImpl(ComposingSweeper):
    # its base config and every config-group choice of its space pass the gate before a worker starts; each
    # trial passes it in its worker (Objective)
    gates_sweep = True

    def sweep(self, arguments: List[str]) -> Any:
        import optuna

        from ..sweeps.gate import Refused, check_config, check_study_engine, check_study_processes, plan_runs, stop
        from ..run.validate import ConfigError

        s = self.settings
        sweep_dir = Path(self.config.hydra.sweep.dir)
        job_cfg = self._compose(arguments)
        # the setting as written: an interpolation (${oc.env:...}) stays one in every file the study saves
        given = OmegaConf.to_container(self.config.hydra.sweeper, resolve=False).get("storage")
        # told, not guessed: each worker job knows from its environment (Hydra's env_set) that it trains trials
        worker_job = [*arguments, f"+hydra.job.env_set.{ROLE_ENV}={OPTUNA_WORKER}"]
        try:
            check_no_password(given)
            check_study_engine(job_cfg, s.n_trials, s.seeds_per_trial)
            check_study_processes(job_cfg, self.launcher)
            check_config(job_cfg, self._trains_here())
            space = self._check_space(arguments, job_cfg)
            check_sampler_and_pruner(s, space)  # fail here, not in every worker
            check_replicas(s)
            # the launcher's part of the gate (its resources, a worker's processes) before anything is written: a
            # refused study leaves no directory; the launcher keeps the plan for its call below
            plan_runs(self.launcher, [worker_job] * max(1, s.n_workers), 0, config=self.config,
                      loader=self.hydra_context.config_loader)
            seed = OmegaConf.select(job_cfg, s.seed_key)
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise SearchSpaceError(f"hydra.sweeper.seed_key={s.seed_key!r}: the config's value there is {seed!r}, "
                                       "not a whole number (the first replica's seed)")
            objectives, directions = objectives_and_directions(s, job_cfg.optimized_metric)
            url = resolve_url(s.storage, sweep_dir)
            check_storage_url(url)  # last: the default SQLite file is made in the study's directory
            study = optuna.create_study(
                study_name=s.study_name, storage=open_storage(url), directions=directions, load_if_exists=True
            )
            have = [d.name.lower() for d in study.directions]
            if have != directions:
                raise ValueError(f"hydra.sweeper.direction={directions if len(directions) > 1 else directions[0]}: "
                                 f"study {s.study_name!r} in {shown(url)} was made to {', '.join(have)}; keep its "
                                 "direction or give another hydra.sweeper.study_name")
        except Refused as exc:  # it names the worker job and says that nothing was started
            stop(exc)
        except (ConfigError, SearchSpaceError, ValueError) as exc:
            stop(ConfigError(f"{exc}; no worker was started"))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        done = len(study.trials)
        write_study_file(
            sweep_dir,
            {
                "study_name": s.study_name,
                "storage": saved(given, url),
                "objectives": objectives,
                "directions": directions,
                "n_trials": s.n_trials,
                "max_failures": s.max_failures,
                "seeds_per_trial": s.seeds_per_trial,
                "seed_key": s.seed_key,
                "reproduce_overrides": self._reproduce_overrides(arguments, job_cfg),
                "scales": space.scales(),  # the report's plots draw sampled values on a continuous axis
            },
        )
        log.info(
            "Optuna study %r (%s): %d trials so far, budget %d, %d worker(s) -> %s",
            s.study_name, shown(url), done, s.n_trials, s.n_workers, sweep_dir,
        )
        returns = []
        if done < s.n_trials:
            workers = max(1, min(s.n_workers, s.n_trials - done))
            returns = self.launcher.launch([worker_job] * workers, initial_job_idx=0)
            for r in returns:
                try:
                    _ = r.return_value
                except Exception as exc:  # a worker crashed: its trials are failed by heartbeat; report it
                    log.error("an Optuna worker failed: %s: %s", type(exc).__name__, exc)
        else:
            log.info("study %r already has %d trials (budget %d): nothing to run", s.study_name, done, s.n_trials)

        print_study_report(sweep_dir)
        from .worker import study_failed

        message = study_failed(optuna.load_study(study_name=s.study_name, storage=open_storage(url)), s.max_failures)
        if message:  # after the report: the trials' table says which failed and why
            stop(ConfigError(message))
        return returns

    def _check_space(self, arguments: List[str], job_cfg: DictConfig) -> SearchSpace:
        """Build the space as the workers will, and compose and validate the config of every combination of
        config-group choices, so that no trial fails because of the space itself."""
        import itertools

        from ..sweeps.gate import check_config, check_study_engine
        from .worker import config_groups

        s = self.settings
        groups = config_groups(self.hydra_context.config_loader, self.config.hydra.runtime.choices,
                               self.config.hydra.job.config_name, self._searchpath())
        compose = lambda extra: self._compose(merge_overrides(arguments, extra))  # noqa: E731
        space = SearchSpace.from_config(s.params, s.reward_weights, job_cfg, groups=groups, compose=compose)
        for key, spec in space.params.items():  # GRPOConfig fields the space adds are in no composed config
            if key.startswith(PASSTHROUGH):
                for value in spec.get("choices") or [spec.get("low"), spec.get("high")]:
                    check_args({key[len(PASSTHROUGH):]: value}, job_cfg.backend.name, where=f"hydra.sweeper.params.{PASSTHROUGH[:-1]}")
        options = [[f"{key}={choice}" for choice in space.params[key]["choices"]] for key in space.groups]
        # a space may turn vLLM generation on itself (backend.fast_inference: {choices: [false, true]})
        engine_choice = True in (space.params.get("backend.fast_inference") or {}).get("choices", [])
        for combination in itertools.product(*options):
            label = list(combination)
            try:
                cfg = compose(label) if label else job_cfg  # no group searched: the base config, checked already
                if label:
                    check_config(cfg, self._trains_here())
                if engine_choice and cfg.backend.name == "unsloth":
                    label.append("backend.fast_inference=true")
                    cfg = OmegaConf.merge(cfg, {"backend": {"fast_inference": True}})
                check_study_engine(cfg, s.n_trials, s.seeds_per_trial)
            except Exception as exc:  # composition errors (Hydra's) as well as ConfigError: each would fail trials
                raise _refused(label, exc) from None
        # each plain parameter's ends and choices, the others at their base values: a value no run can take
        # (learning_rate=-1) would fail every trial that samples it
        for key, value, point in space.corners(job_cfg):
            try:
                check_config(space.apply(job_cfg, point), self._trains_here())
            except Exception as exc:
                raise _refused([f"{key}={value}"], exc) from None
        return space


def _refused(label: List[str], exc: Exception) -> SearchSpaceError:
    return SearchSpaceError(f"hydra.sweeper.params: {' '.join(label)} is refused: {first_line(exc)}")


def diff_overrides(base: DictConfig, target: DictConfig) -> list[str]:
    """``key=value`` overrides turning ``base`` into ``target`` (leaves only; lists as a whole)."""
    a, b = _flatten(OmegaConf.to_container(base, resolve=True)), _flatten(OmegaConf.to_container(target, resolve=True))
    out = []
    for key in b:
        if key not in a:
            out.append(f"+{key}={_value(b[key])}")
        elif a[key] != b[key]:
            out.append(f"{key}={_value(b[key])}")
    return out


def _flatten(node: Any, prefix: str = "") -> dict:
    if isinstance(node, dict) and node:
        out = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def _value(value: Any) -> str:
    import json

    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    if isinstance(value, str) and any(c in value for c in " ,=[]{}()'\"\\:"):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


def print_study_report(sweep_dir: Path, plots: bool = True) -> None:
    """Print the study report from one reading of the sweep's runs, and hand that reading to the multirun-end
    callbacks (sweep_end.SweepTable: the table, verdicts.json, report.md), which Hydra calls next."""
    from ..sweeps.results import SweepResults
    from ..sweeps.sweep_end import hand_over
    from .report import study_report

    results = SweepResults.read(sweep_dir)  # the direction: the study's (study.json), as study_report's own read
    hand_over(results)
    print(study_report(sweep_dir, plots=plots, results=results))
