"""The Optuna study's sweeper (``hydra/sweeper=grpo_optuna``, chosen by ``hparams_search=*``): check the space,
create or resume the study, launch the worker jobs. The study's report and its exit status are the end of the sweep's
(the package's ``STRATEGY``: ``before_table`` and ``failure``), from the same reading of its runs as the table.

It runs on the submitting (login) node: Optuna and SQLAlchemy only, no torch.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ...config.grpo_fields import check_args
from ...config.show import first_line
from ...run.context import OPTUNA_WORKER, ROLE_ENV
from ...run.files import check_path_name
from ...run.results import check_metric_name
from ..base import StrategySweeper, merge_overrides
from .config import (
    check_counts,
    check_replicas,
    check_sampler_and_pruner,
    objectives_and_directions,
    write_study_file,
)
from .space import EDGE_COMBINATIONS, MIX, PASSTHROUGH, SearchSpace, SearchSpaceError
from .storage import check_no_password, check_storage_url, open_storage, resolve_url, saved, shown

log = logging.getLogger(__name__)


class OptunaSweeperImpl(StrategySweeper):
    # its base config and every config-group choice of its space pass the gate before a worker starts; each
    # trial passes it in its worker (Objective)

    def sweep(self, arguments: list[str]) -> Any:
        import optuna

        from ...launching.gate import check_config, check_study_engine, check_study_processes, plan_runs

        s = self.settings
        sweep_dir = Path(self.config.hydra.sweep.dir)
        job_cfg = self._compose(arguments)
        # the setting as written: an interpolation (${oc.env:...}) stays one in every file the study saves
        given = OmegaConf.to_container(self.config.hydra.sweeper, resolve=False).get("storage")
        # told, not guessed: each worker job knows from its environment (Hydra's env_set) that it trains trials
        worker_job = [*arguments, f"+hydra.job.env_set.{ROLE_ENV}={OPTUNA_WORKER}"]
        with self._refusals("no worker was started"):
            # the study's name is its directory's (hparams_search/common/study_dir.yaml): one directory, under its root
            check_path_name("hydra.sweeper.study_name", s.study_name)
            check_counts(s)
            check_no_password(given)
            check_study_engine(job_cfg, s.n_trials, s.seeds_per_trial)
            check_study_processes(job_cfg, self.launcher)
            check_config(job_cfg, self._trains_here())
            space = self._check_space(arguments, job_cfg)
            check_sampler_and_pruner(s, space)  # fail here, not in every worker
            check_replicas(s)
            # the launcher's part of the gate (its resources, a worker's processes) before anything is written: a
            # refused study leaves no directory; the launcher keeps the plan for its call below
            plan_runs(
                self.launcher,
                [worker_job] * max(1, s.n_workers),
                0,
                config=self.config,
                loader=self.hydra_context.config_loader,
            )
            seed = OmegaConf.select(job_cfg, s.seed_key)
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise SearchSpaceError(
                    f"hydra.sweeper.seed_key={s.seed_key!r}: the config's value there is {seed!r}, "
                    "not a whole number (the first replica's seed)"
                )
            objectives, directions = objectives_and_directions(s, job_cfg.optimized_metric)
            self._check_objectives(objectives, job_cfg, space, arguments)
            url = resolve_url(s.storage, sweep_dir)
            check_storage_url(url)  # last: the default SQLite file is made in the study's directory
        # the study is made after the dry run, which writes nothing
        if self.config.hydra.launcher.get("dry_run"):
            import shlex

            print(
                "dry run: a trial's configuration replays as a plain run: python launch.py "
                + shlex.join(self._reproduce_overrides(arguments, job_cfg))
                + " <the trial's overrides>"
            )
        if self._dry_run_or_begin(sweep_dir, [worker_job] * max(1, s.n_workers)):
            return []
        with self._refusals("no worker was started"):
            study = optuna.create_study(
                study_name=s.study_name, storage=open_storage(url), directions=directions, load_if_exists=True
            )
            have = [d.name.lower() for d in study.directions]
            if have != directions:
                raise ValueError(
                    f"hydra.sweeper.direction={directions if len(directions) > 1 else directions[0]}: "
                    f"study {s.study_name!r} in {shown(url)} was made to {', '.join(have)}; keep its "
                    "direction or give another hydra.sweeper.study_name"
                )
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
            s.study_name,
            shown(url),
            done,
            s.n_trials,
            s.n_workers,
            sweep_dir,
        )
        returns = []
        if done < s.n_trials:
            workers = max(1, min(s.n_workers, s.n_trials - done))
            # a worker that crashed: its trials are failed by heartbeat
            returns = self.launch([worker_job] * workers, 0, "an Optuna worker")
        else:
            log.info("study %r already has %d trials (budget %d): nothing to run", s.study_name, done, s.n_trials)
        return returns

    def _check_objectives(self, objectives: list[str], job_cfg: DictConfig, space: SearchSpace, arguments) -> None:
        """Each objective names a figure a trial's run reports (a reward term of any mix the space chooses among):
        else every trial would train and then have no value."""
        setting = "hydra.sweeper.objectives" if self.settings.objectives else "optimized_metric"
        terms = list(job_cfg.reward_mix)
        mixes = space.params[MIX]["choices"] if MIX in space.groups else []
        for mix in mixes:  # composed for their terms' names only where searched (each composition ~0.3 s)
            terms += [str(t) for t in self._compose(merge_overrides(arguments, [f"{MIX}={mix}"])).reward_mix]
        for metric in objectives:
            check_metric_name(metric, list(dict.fromkeys(terms)), setting)

    def _check_space(self, arguments: list[str], job_cfg: DictConfig) -> SearchSpace:
        """Build the space as the workers will, and compose and validate the config of every combination of
        config-group choices, so that no trial fails because of the space itself."""
        import itertools

        from ...launching.gate import check_config, check_study_engine
        from .worker import config_groups

        s = self.settings
        groups = config_groups(
            self.hydra_context.config_loader,
            self.config.hydra.runtime.choices,
            self.config.hydra.job.config_name,
            self._searchpath(),
        )
        compose = lambda extra: self._compose(merge_overrides(arguments, extra))  # noqa: E731
        space = SearchSpace.from_config(s.params, s.reward_weights, job_cfg, groups=groups, compose=compose)
        for key, spec in space.params.items():  # GRPOConfig fields the space adds are in no composed config
            if key.startswith(PASSTHROUGH):
                for value in spec.get("choices") or [spec.get("low"), spec.get("high")]:
                    check_args(
                        {key[len(PASSTHROUGH) :]: value},
                        job_cfg.backend.name,
                        where=f"hydra.sweeper.params.{PASSTHROUGH[:-1]}",
                    )
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
        # the plain parameters' ends and choices, in every combination (a value no run can take, learning_rate=-1,
        # or two that no run can take together, would fail every trial that samples them)
        every, points = space.edge_points(job_cfg)
        if not every:
            log.warning(
                "hydra.sweeper.params: over %d combinations of the parameters' ends and choices; each is checked "
                "with the others at their base values only",
                EDGE_COMBINATIONS,
            )
        for picked, point in points:
            try:
                check_config(space.apply(job_cfg, point), self._trains_here())
            except Exception as exc:
                raise _refused([f"{key}={value}" for key, value in picked.items()], exc) from None
        return space


def _refused(label: list[str], exc: Exception) -> SearchSpaceError:
    return SearchSpaceError(f"hydra.sweeper.params: {' '.join(label)} is refused: {first_line(exc)}")
