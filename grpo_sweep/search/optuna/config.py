"""The sweeper's settings, as a dataclass (the schema of ``hydra.sweeper``), and writing its study file
(reading/results.py reads it)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...reading.stats import DEFAULT_VERDICTS, is_seed
from ...run.files import write_json_atomic
from ...run.results import without_best

SWEEPER_TARGET = "hydra_plugins.grpo_sweep_optuna.sweeper.GRPOOptunaSweeper"
SAMPLERS = ("tpe", "random", "grid", "cmaes")
PRUNERS = ("median", "hyperband", "none")
VAL_PREFIX, TEST_PREFIX = "val_", "test_"
# a study's runs: trials/<trial number>/seed<seed>/, one run directory per replica
TRIALS_DIR = "trials"

# An Optuna study's sweep directory holds it (directions, objectives, the reproduce command), written by its sweeper.
STUDY_FILE = "study.json"


class StudyFileError(ValueError):
    """A study.json that cannot be read as a study's (cut short, hand-edited): the message names the file."""


# study.json's fields its readers use, and what each must be: a wrong one is named, not a traceback later
_FIELDS = {
    "study_name": (str,),
    "storage": (str, type(None)),
    "objectives": (list,),
    "directions": (list,),
    "max_failures": (int,),
    "seeds_per_trial": (int,),
    "seed_key": (str,),
    "reproduce_overrides": (list,),
    "scales": (dict,),
}
_REQUIRED = ("study_name", "objectives", "directions")


def read_study_file(sweep_dir: Path) -> dict:
    path = Path(sweep_dir) / STUDY_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{sweep_dir} holds no {STUDY_FILE}; is it the directory of an Optuna sweep?")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StudyFileError(f"{path} cannot be read as a study's: {type(exc).__name__}: {exc}") from None
    if not isinstance(data, dict):
        raise StudyFileError(f"{path} holds a JSON {type(data).__name__}, not a study's object")
    missing = [key for key in _REQUIRED if key not in data]
    if missing:
        raise StudyFileError(f"{path} has no {', '.join(missing)}: it is not a study's {STUDY_FILE}")
    for key, types in _FIELDS.items():
        value = data.get(key)
        wrong = key in data and (not isinstance(value, types) or isinstance(value, bool))
        if wrong or (key in ("objectives", "directions") and not (value and all(isinstance(v, str) for v in value))):
            raise StudyFileError(f"{path}: {key}={value!r} is not what a study writes there")
    if len(data["objectives"]) != len(data["directions"]) or not set(data["directions"]) <= {"maximize", "minimize"}:
        raise StudyFileError(
            f"{path}: directions={data['directions']!r} do not match objectives={data['objectives']!r}"
        )
    return data


# Written by an Optuna worker job into its Hydra run dir: it holds no run, its trials are under trials/.
WORKER_MARKER = "optuna_worker.json"


@dataclass
class SamplerConfig:
    name: str = "tpe"
    seed: int = 42
    n_startup_trials: int = 5


@dataclass
class PrunerConfig:
    name: str = "median"
    # median: trials completed before pruning starts, and steps before a trial can be pruned
    n_startup_trials: int = 3
    n_warmup_steps: int = 0


@dataclass
class GRPOOptunaSweeperConf:
    _target_: str = SWEEPER_TARGET
    study_name: str = "grpo"
    # null: SQLite file in the sweep dir; "journal": journal file there; or any RDB URL
    storage: str | None = None
    # one direction, or a list for multi-objective (then `objectives` lists the summary keys)
    direction: Any = "maximize"
    objectives: list[str] | None = None
    # total budget, counting every trial the study already has (resume adds up to it)
    n_trials: int = 20
    # trials in flight at once (worker jobs on the launcher)
    n_workers: int = 1
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    pruner: PrunerConfig = field(default_factory=PrunerConfig)
    # replicas: each trial trains this many runs, seeds <seed_key's value> + 0, 1, ... (a configuration tried again
    # gets the next unused seeds); the trial's value is the mean over every seed its configuration has so far
    seeds_per_trial: int = 1
    # how verdicts estimate noise: moderated (seed-paired, borrowing strength across configurations) or strict
    verdicts: str = DEFAULT_VERDICTS
    # the config key that picks a run's seed (its last dotted part must be `seed`: runs differing only in it are
    # replicates for the sweep table and report)
    seed_key: str = "trainer.seed"
    # report the objective every N steps, measured on this many validation prompts (the first replica only)
    prune_every: int = 10
    prune_eval_samples: int = 16
    # stop the study once more than this many trials failed
    max_failures: int = 3
    heartbeat_interval: int = 30
    grace_period: int = 120
    params: dict[str, Any] = field(default_factory=dict)
    # search the mix's weights on the simplex: {rewards: [names] or null for all}; null: don't
    reward_weights: dict[str, Any] | None = None


def objectives_and_directions(sweeper: Any, optimized_metric: str) -> tuple[list[str], list[str]]:
    directions = sweeper.direction
    directions = [directions] if isinstance(directions, str) else list(directions)
    objectives = list(sweeper.objectives) if sweeper.objectives else [optimized_metric]
    if len(objectives) != len(directions):
        raise ValueError(
            f"hydra.sweeper: {len(objectives)} objectives {objectives} but {len(directions)} directions {directions}"
        )
    for d in directions:
        if d not in ("maximize", "minimize"):
            raise ValueError(f"hydra.sweeper.direction={d!r}; use maximize or minimize")
    for metric in objectives:
        if without_best(str(metric)).startswith(TEST_PREFIX):
            # the test split is reported once, after selection; an objective on it would select on it
            raise ValueError(f"objective {metric!r} reads the test split; search on validation (e.g. val_accuracy)")
    return objectives, directions


# the sweeper's whole-number settings and the least each may be: a study of 0 trials or 0 workers does nothing
COUNTS = {
    "n_trials": 1,
    "n_workers": 1,
    "max_failures": 0,
    "prune_every": 1,
    "prune_eval_samples": 1,
    "heartbeat_interval": 1,
    "grace_period": 1,
}


def check_counts(sweeper: Any) -> None:
    """One-line errors for the whole-number settings (``COUNTS``), before the study's directory is made."""
    for key, least in COUNTS.items():
        value = sweeper.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"hydra.sweeper.{key}={value!r}; use a whole number >= {least}")


def check_replicas(sweeper: Any) -> None:
    """One-line errors for ``seeds_per_trial`` and ``seed_key``."""
    n = sweeper.seeds_per_trial
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"hydra.sweeper.seeds_per_trial={n!r}; use a whole number >= 1")
    if not is_seed(str(sweeper.seed_key)):
        raise ValueError(
            f"hydra.sweeper.seed_key={sweeper.seed_key!r}: its last dotted part must be `seed` "
            "(e.g. trainer.seed), so that the sweep's tables see the runs as replicates"
        )


def check_sampler_and_pruner(sweeper: Any, space: Any) -> None:
    """One-line errors for the sampler and the pruner. The sweeper calls this before any worker starts: a worker
    that found them would fail every trial it pulls, and on SLURM every queued worker would."""
    if sweeper.sampler.name not in SAMPLERS:
        raise ValueError(f"hydra.sweeper.sampler.name={sweeper.sampler.name!r}; use one of: {', '.join(SAMPLERS)}")
    if sweeper.pruner.name not in PRUNERS:
        raise ValueError(f"hydra.sweeper.pruner.name={sweeper.pruner.name!r}; use one of: {', '.join(PRUNERS)}")
    if sweeper.sampler.name == "grid":
        grid_of(space)


def grid_of(space: Any) -> dict[str, list]:
    """The values sampler=grid walks for each searched key (a `SearchSpace`); a one-line error when the space
    cannot be a grid."""
    if space.simplex or any((space.simplex_by_mix or {}).values()):
        raise ValueError(
            "hydra.sweeper.sampler.name=grid cannot search reward weights on the simplex; "
            "set hydra.sweeper.reward_weights=null or use another sampler"
        )
    grid = {}
    for key, p in space.params.items():
        values = p.get("choices") or p.get("grid")
        if not values:
            raise ValueError(
                f"hydra.sweeper.sampler.name=grid: hydra.sweeper.params.{key} needs `choices` or a "
                "`grid` list of values"
            )
        grid[key] = list(values)
    return grid


def write_study_file(sweep_dir: Path, data: dict) -> None:
    write_json_atomic(Path(sweep_dir) / STUDY_FILE, data)
