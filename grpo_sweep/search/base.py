"""What every search strategy shares: the sweeper's base (composing a job's config as the launch would, the gate
before anything is written, the dry run, launching a batch and logging its failures, the same-design check of a
sweep that is continued), Hydra's override plumbing, and ``Strategy``: what the end of a sweep, its report,
``status`` and ``next_seeds`` ask of the strategy that ran it. A strategy is a package beside this module
(grid/, seeds/, optuna/, pbt/) registered in ``search/__init__.py``. No torch here: it runs on the login node.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from ..reading.results import SweepResults
    from ..reading.stats import Comparison

log = logging.getLogger(__name__)

_ABSENT = object()


class Strategy:
    """A search strategy as the rest of grpo-sweep sees a sweep it ran: its package's ``STRATEGY``. The defaults are
    a grid's (Hydra's basic sweep); a strategy overrides what it does otherwise. Nothing here tests for files: each
    strategy reads its own state on disk."""

    name = "grid"
    # the sweepers that run it: the class names hydra.sweeper._target_ ends with (multirun.yaml keeps it)
    sweepers: tuple[str, ...] = ()

    # hydra/sweeper=<name> options this strategy puts into Hydra's ConfigStore: (name, conf dataclass)
    def sweeper_configs(self) -> list[tuple[str, Any]]:
        return []

    # -- reading its sweep back -----------------------------------------------------------------------------
    def read(
        self, sweep_dir: Path, direction: str | None = None, also: Sequence[Path] = (), verdicts: str | None = None
    ) -> SweepResults:
        """The sweep's runs read once, with this strategy's verdicts (``also``: run directories jobs.json names;
        ``verdicts``: the mode, default the sweep's own)."""
        from ..reading.results import SweepResults

        return SweepResults.read(sweep_dir, direction, also, judge=self.comparisons, verdicts=verdicts)

    def comparisons(self, results: SweepResults) -> list[Comparison]:
        """The verdicts of the sweep's configurations (reading/stats.py's engine, before wording)."""
        return results.compare_configurations()

    def verdict_mode(self, results: SweepResults) -> str:
        """The verdict mode its comparisons use: the one asked for (a seeds sweep: its design's, seeds.json)."""
        return results.verdicts

    def finished(self, results: SweepResults) -> bool:
        """Whether the sweep has run all it will (a seeds sweep between rounds has not)."""
        return True

    # -- the end of a sweep and its report ------------------------------------------------------------------
    # True: a detached launch of it (hydra.launcher.detach=true) is run again by a job of its own until it is over
    # (a seeds sweep's driver), whose end prints the table; else a detached launch ends before its runs do
    continues_detached = False
    # False: the strategy prints its own end (a PBT: its members changed config every round, so a table of
    # configurations with verdicts would compare what was never compared)
    has_table = True
    # whether a failed run makes the launch exit 1 (a study expects some failed trials: its max_failures decides)
    failed_runs_fail = True

    def before_table(self, results: SweepResults) -> str | None:
        """What the end of the sweep prints before the comparison table (an Optuna study: its report)."""
        return None

    def failure(self, results: SweepResults) -> str | None:
        """Why the launch fails although the end was written (an Optuna study over its max_failures), or None."""
        return None

    def seeds_heading(self) -> list[str]:
        """report.md's heading and opening text of the per-configuration table and verdicts."""
        return []

    def plot_options(self, results: SweepResults) -> dict:
        """Options for report.md's plots (an Optuna study: the scale each sampled parameter was drawn on)."""
        return {}

    def status_line(self, results: SweepResults) -> str | None:
        """A line ``status`` adds when the runs on disk are not the whole sweep (a seeds sweep's due round)."""
        return None

    # why next_seeds cannot add seeds to this strategy's sweeps (None: it can)
    no_more_seeds: str | None = None


class StrategySweeper(Sweeper):
    """The base of grpo-sweep's own sweepers (seeds, Optuna, PBT): the launcher Hydra configured, composing a job's
    config for overrides as the launch would (with the sweep's search path), refusals in one line, the dry run,
    launching a batch and logging what failed, and the check that a continued sweep is the same one."""

    # the sweep passes the gate here, before anything is written (the Preflight callback leaves sweeps to it)
    gates_sweep = True

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

    def _compose(self, overrides: list[str], with_hydra_overrides: bool = True) -> DictConfig:
        """The job config for ``overrides`` (optionally without this sweep's hydra.* overrides but its search path,
        as a single run would compose it)."""
        with_hydra = OmegaConf.to_container(self._load(overrides, with_hydra_overrides), resolve=False)
        with_hydra.pop("hydra", None)
        return OmegaConf.create(with_hydra)

    def _load(self, overrides: list[str], with_hydra_overrides: bool = True) -> DictConfig:
        """The config for ``overrides``, its hydra node included (``hydra.runtime.choices``)."""
        if with_hydra_overrides:
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        else:
            from hydra.types import RunMode

            cfg = self.hydra_context.config_loader.load_configuration(
                config_name=self.config.hydra.job.config_name,
                overrides=[*self._searchpath(), *overrides],
                run_mode=RunMode.RUN,
            )
        return cfg

    def _searchpath(self) -> list[str]:
        return searchpath_overrides(self.config.hydra)

    def _trains_here(self) -> bool:
        from ..launching.gate import GatedLauncher

        return isinstance(self.launcher, GatedLauncher) and self.launcher.trains_here

    @contextlib.contextmanager
    def _refusals(self, nothing: str = "no run was started") -> Iterator[None]:
        """A check that fails inside stops the launch in one line (ending with ``nothing``), before anything is
        written."""
        from ..launching.gate import Refused, stop
        from ..run.validate import ConfigError

        try:
            check_verdicts(self.settings.get("verdicts"))
            yield
        except Refused as exc:
            stop(exc)
        except (ConfigError, ValueError) as exc:
            stop(ConfigError(f"{exc}; {nothing}"))

    def _dry_run_or_begin(self, sweep_dir: Path, first: list[list[str]]) -> bool:
        """``hydra.launcher.dry_run``: the launcher prints the first round's jobs (the later ones depend on its
        results), True; else the sweep's directory and its multirun.yaml are written, False."""
        if self.config.hydra.launcher.get("dry_run"):
            self.launcher.launch(first, initial_job_idx=0)
            return True
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        return False

    def _reproduce_overrides(self, arguments: list[str], job_cfg: DictConfig) -> list[str]:
        """Overrides that give a single run the sweep's base config (hparams_search dropped, its settings kept), its
        search path first: the user's own config directories hold the options it names."""
        plain = [a for a in arguments if not a.split("=", 1)[0].lstrip("+~").startswith(("hparams_search", "hydra"))]
        plain += group_overrides(
            self._load(plain, with_hydra_overrides=False).hydra.runtime.choices, self.config.hydra.runtime.choices
        )
        single = self._compose(plain, with_hydra_overrides=False)
        return self._searchpath() + plain + diff_overrides(single, job_cfg)

    def launch(self, jobs: list[list[str]], first_index: int, what: str) -> list:
        """Start ``jobs`` on the launcher and wait; a job that died is logged (``what`` names it), not raised: the
        runs on disk say what finished, and the strategy reads them."""
        returns = self.launcher.launch(jobs, initial_job_idx=first_index)
        for r in returns:
            try:
                _ = r.return_value
            except Exception as exc:  # noqa: BLE001 - a job that died: its run is failed on disk, or has no result
                log.error("%s failed: %s: %s", what, type(exc).__name__, exc)
        return list(returns)


def check_verdicts(mode: Any) -> None:
    """hydra.sweeper.verdicts names one of the engine's modes (None: the sweeper has no such setting)."""
    if mode is not None:
        from ..reading.stats import check_mode

        check_mode(mode, "hydra.sweeper.verdicts")


def same_design(
    path: Path, recorded: Mapping[str, Any] | None, now: Mapping[str, Any], keys: Sequence[str], what: str, again: str
) -> None:
    """A continued sweep must be the one ``path`` recorded (``what``: "a seeds sweep"): the same command continues
    it; ``again``: how to start another instead. Raises ValueError naming the first key that differs."""
    if recorded is None:
        return
    for key in keys:
        if recorded.get(key) != now.get(key):
            raise ValueError(
                f"{path} holds {what} started with other {key} ({recorded.get(key)} -> {now.get(key)}); "
                f"the same command continues it: keep them, or {again}"
            )


def read_json(path: Path) -> dict | None:
    """A strategy's own state file, or None where the sweep has not written it yet."""
    return json.loads(path.read_text()) if path.is_file() else None


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


def dotted_params(params: Mapping[str, Any], settings: Sequence[str]) -> dict[str, Any]:
    """``hydra.sweeper.params`` keyed by dotted config keys, however it was written: Hydra nests a dotted key given on
    the command line (``+hydra.sweeper.params.trainer.beta={...}`` is ``{trainer: {beta: {...}}}``), a YAML file may
    nest it too. A mapping is one parameter's spec when it holds one of ``settings`` (``type``, ``low``, ...); else its
    keys join the key (a value that is no spec is then named by its dotted key in the strategy's own check)."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, Mapping) and value and not any(k in settings for k in value):
            out.update({f"{key}.{k}": v for k, v in dotted_params(value, settings).items()})
        else:
            out[str(key)] = value
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


def override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def merge_overrides(base: Sequence[str], extra: Sequence[str]) -> list[str]:
    """``base`` then ``extra``, dropping base overrides of a key that ``extra`` sets: Hydra refuses two
    values for one config group (``reward_mix=smoke reward_mix=format``), and the later one is meant. A key that
    ``base`` adds (``+key=...``, or ``++key=...``: added or set) is absent from the config both start from, so
    ``extra``'s plain value for it takes the same prefix (else Hydra refuses it: ``Could not override``)."""
    prefix = {override_key(o): o[: len(o) - len(o.lstrip("+"))] for o in base if o.startswith("+")}
    extra = [prefix.get(override_key(o), "") + o if not o.startswith(("+", "~")) else o for o in extra]
    keys = {override_key(o) for o in extra}
    return [o for o in base if override_key(o) not in keys] + extra


def group_overrides(base: Mapping[str, Any], target: Mapping[str, Any]) -> list[str]:
    """``group=option`` for each config group whose choice differs from ``base`` to ``target``
    (``hydra.runtime.choices``), Hydra's own groups and the study's ``hparams_search`` left out: a single run gets the
    study's mix
    (``override /reward_mix: mine`` in its hparams_search file) as a group override, which a trial's own choice of the
    group replaces (``merge_overrides``), instead of leaf edits that would add one mix's terms to another's."""
    out = []
    for group, option in target.items():
        if group.startswith(("hydra", "hparams_search")) or base.get(group, _ABSENT) == option:
            continue
        out.append(f"{group}={'null' if option is None else option}")
    return out


def searchpath_overrides(hydra_cfg) -> list[str]:
    """The sweep's ``hydra.searchpath`` as an override (none when it has none). Hydra reads the search path afresh
    from each composition's overrides (or the primary config): every config of a sweep composed outside the
    launch's own composition (a trial's, the space's mixes, the group options, the reproduce command) needs it, or
    the user's own directories are not searched. ``--config-dir`` needs nothing: it is in the loader's own
    search path, restored in every job with Hydra's state."""
    paths = [str(p) for p in hydra_cfg.searchpath or []]
    if not paths:
        return []
    return [f"hydra.searchpath=[{','.join(map(quoted, paths))}]"]


def quoted(value: str) -> str:
    """``value`` as an element of a list in Hydra's override grammar: as it is where it can be (as a user would type
    it: file:///home/me/conf), else quoted, where a backslash escapes only a quote or a backslash before one (or
    before the closing quote)."""
    if re.fullmatch(r"[A-Za-z0-9_/.:+@-]+", value):
        return value
    return "'" + re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), value) + "'"
