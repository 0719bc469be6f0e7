"""The gate: every run of a sweep is planned here (composed, validated, its run directory checked, its resources
checked) before any run starts, whichever launcher starts them.

Who calls it: every grpo-sweep launcher (``GatedLauncher``: hydra/launcher=local, pool, submitit_local, slurm)
before it starts or submits its batch, so a bad run in the batch stops all of it; the ``grpo_basic`` sweeper for
the whole sweep before Hydra writes anything for it (a refused sweep leaves nothing on disk; a sweep in several
batches must not run batch 1 when batch 2 is bad), and hands that plan to the launcher so that no run is composed
twice; the Optuna sweeper for its base config and
every config-group choice of its space (``check_config``), and the Optuna workers for every trial
(``check_run``); the Preflight callback for a single run, and the training process itself (``app.run_task``) for
what only the machine that trains can answer.

A refusal is one line naming the run and the bad value: ``plan_runs`` raises ``Refused``, and where Hydra would
print it (launchers, sweepers) it leaves as SystemExit with that line: Hydra adds a line of its own to an
exception, even a CompactHydraException. Anything else the gate's checks raise is one line too (``unexpected``):
a reward term's own code that raised, named as the term, or the gate's bug; the user's Ctrl-C
(``telling_interrupts_apart``) stops the launch. No torch is imported here.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
from pathlib import Path
from typing import Any, Iterator, NoReturn, Sequence

from hydra.errors import CompactHydraException, HydraException
from omegaconf import OmegaConf, open_dict

from ..adapters.hydra import is_config_group
from ..backends.gpu_stack import engine_in_process
from ..config.schema import Config
from ..config.show import first_line
from ..models import warn_tiny_on_other_data
from ..run.distributed import check_world
from ..run.phases import check_resumable
from ..run.redact import redact
from ..run.resume import ResumeError
from ..run.validate import ConfigError, check_machine, validate
from .hub import resolve_hub
from .memory import start_plan


class Refused(ConfigError, CompactHydraException):
    """A run that cannot work, found before any run started; Hydra prints it as one line, without a traceback."""


def check_choices(cfg: Any) -> None:
    """A config group's option is a file of the group's own folder (``reward_mix=format`` is conf/reward_mix/format.yaml
    or the user's): one with a ``..`` reaches into another folder, and Hydra loads it (``reward_mix=../model/tiny``
    makes a model's config a mix). ``cfg`` with its hydra node (the choices Hydra made); without one, nothing to
    check. Raises ConfigError."""
    choices = OmegaConf.select(cfg, "hydra.runtime.choices", default=None) if OmegaConf.is_config(cfg) else None
    for group, choice in (choices or {}).items():
        if choice is not None and ".." in str(choice).replace("\\", "/").split("/"):
            raise ConfigError(
                f"{group}={choice}: an option of {group} is a file in the group's own folder (conf/{group}/ or "
                f"your config directory's), named without a path; give one of its options"
            )


def check_config(cfg: Any, trains_here: bool) -> None:
    """The config's own values and the hub models and datasets it names (``hub.py``); with ``trains_here``, also
    what this machine must have to train it (GPU, packages, the code reward's sandbox)."""
    check_choices(cfg)
    validate(cfg)
    warn_tiny_on_other_data(cfg)  # once per launch, before anything runs or the hub is asked
    resolve_hub(cfg)  # on the launching machine, before any job needs the hub (compute nodes rarely reach it)
    if trains_here:
        check_machine(cfg)


def check_run(cfg: Any, run_dir: Path | None, trains_here: bool) -> None:
    """``check_config``, and that ``run_dir`` holds no run started with another config. Raises ConfigError."""
    check_config(cfg, trains_here)
    if run_dir is not None:
        try:
            check_resumable(run_dir, cfg)  # a sweep dir re-used for another sweep
        except ResumeError as exc:
            raise ConfigError(str(exc)) from None


class Pressed:
    """Whether the user pressed Ctrl-C (SIGINT reached this process) while it lasted."""

    pressed = False


@contextlib.contextmanager
def telling_interrupts_apart() -> Iterator[Pressed]:
    """While the gate runs: a KeyboardInterrupt is the user's only if SIGINT came (then it stops the launch); one
    that code the gate calls raised itself (a reward factory) is that code's failure. Python's own handler, plus
    the record; in the main thread only (where signals are handled)."""
    seen = Pressed()
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def on_sigint(signum: int, frame: Any) -> None:
        seen.pressed = True
        signal.default_int_handler(signum, frame)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGINT, previous)


def _raised_in(exc: BaseException) -> str:
    """``module.function`` of the innermost frame that raised ``exc``."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    return f"{tb.tb_frame.f_globals.get('__name__', '?')}.{tb.tb_frame.f_code.co_name}"


def _term_raising(exc: BaseException, cfg: Any) -> str | None:
    """The reward term (``reward_mix.<name>``) whose own code (its fn, factory or model) raised ``exc``."""
    origin = _raised_in(exc)
    mix = OmegaConf.select(cfg, "reward_mix", default=None) if cfg is not None else None
    for name, term in mix.items() if mix is not None else ():
        for kind in ("factory", "fn", "model"):
            target = OmegaConf.select(term, kind, default=None) if OmegaConf.is_config(term) else None
            if isinstance(target, str) and target.replace(":", ".") == origin:
                return f"reward_mix.{name}.{kind}={target}"
    return None


def unexpected(exc: BaseException, where: str, cfg: Any, pressed: Pressed) -> BaseException | str:
    """What the gate leaves with when something it called raised other than a refusal (ConfigError): the user's
    Ctrl-C, grpo-sweep's own one-line exit and Hydra's one-line errors go on as they are (so does everything with
    HYDRA_FULL_ERROR=1, for the trace); otherwise the refusal's line (``where``: the run, or empty): a reward
    term's code that raised (even KeyboardInterrupt or SystemExit) named as the term, anything else as the gate's
    bug. No input of the user's gets a traceback."""
    own_exit = isinstance(exc, SystemExit) and str(exc.code).startswith("grpo-sweep: ")
    if (
        own_exit
        or isinstance(exc, (HydraException, GeneratorExit))
        or os.environ.get("HYDRA_FULL_ERROR") == "1"
        or (isinstance(exc, KeyboardInterrupt) and pressed.pressed)
    ):
        return exc
    what = f"{type(exc).__name__}: {first_line(exc)}" if str(exc).strip() else type(exc).__name__
    term = _term_raising(exc, cfg)
    if term:
        return f"grpo-sweep: {where + ': ' if where else ''}{term} raised {what} at the gate"
    return (
        f"grpo-sweep: the gate failed{' on ' + where if where else ''}: {what} (a bug: please report; "
        "HYDRA_FULL_ERROR=1 shows the trace)"
    )


_OMEGACONF_DETAIL = re.compile(r"(full_key|reference_type|object_type)[:=]\s*(.*)")


def one_line(exc: BaseException) -> str:
    """A refusal's text on one line: OmegaConf's messages (raised, or quoted in a ConfigError) give the node's key
    and types on lines of their own (the key leads the line instead), and no message may leave a line break in it."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    details = {m.group(1): m.group(2) for m in map(_OMEGACONF_DETAIL.fullmatch, lines) if m}
    kept = [line for line in lines if not _OMEGACONF_DETAIL.fullmatch(line)]
    text = "; ".join(kept)
    key = details.get("full_key") or getattr(exc, "full_key", None)
    return f"{key}: {text}" if key and not text.startswith(f"{key}") else text


def stop(exc: BaseException) -> NoReturn:
    """Leave the launch with the refusal's one line (exit status 1)."""
    text = redact(one_line(exc))  # a refusal may quote what was typed: a token where a name belongs, a URL's password
    raise SystemExit(text if text.startswith("grpo-sweep: ") else f"grpo-sweep: {text}") from None


class Started:
    """A batch a launcher started: ``done()`` asks without waiting, ``results()`` waits and gives its JobReturns in
    the batch's order. ``eager``: ``results`` is called at once (the batch runs before ``start`` returns)."""

    def __init__(self, done: Any, results: Any, eager: bool = False) -> None:
        self._done, self._results, self._returns = done, results, None
        if eager:
            self._returns = results()

    def done(self) -> bool:
        return self._returns is not None or bool(self._done())

    def results(self) -> list:
        if self._returns is None:
            self._returns = self._results()
        return self._returns


class GatedLauncher:
    """A launcher whose batch goes through the gate before any of its runs starts (mixed into each of
    grpo-sweep's launchers)."""

    # whether the runs train on this machine (then this machine's own checks are part of the plan)
    trains_here: bool = True
    # whether every run gets a process of its own; if not, runs that start a vLLM engine are refused
    # (``check_one_engine``)
    process_per_run: bool = False

    def check_resources(self) -> None:
        """What the launcher itself needs (a scheduler, sane per-job resources); raise Refused if it is missing."""

    def run_world(self, cfg: Any) -> tuple[int | None, int, int | None]:
        """(processes, nodes, GPUs per node) this launcher gives one run of ``cfg``; None where not known here. By
        default the run starts its own processes on this machine: ``distributed.nproc_per_node`` on one node."""
        return cfg.distributed.nproc_per_node, 1, None

    # set by a caller that keeps several batches in flight at once (an asynchronous PBT: one member a batch) to how
    # many runs it keeps in flight; the pool then sizes its workers to it, not to one batch
    runs_at_once: int | None = None

    def concurrent_runs(self, wanted: int) -> int:
        """How many of ``wanted`` runs this launcher trains at once. Here: one, as ``start`` runs its batch before it
        returns (the runs train in this process)."""
        return 1

    def start(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Started:
        """Start the batch (through the gate) and return without waiting where the launcher can (the pool, submitit);
        here the batch runs before it returns. ``launch`` is ``start`` and wait."""
        return Started(lambda: True, lambda: list(self.launch(job_overrides, initial_job_idx)), eager=True)

    def plan(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Path]:
        """Each run's directory, after the gate passed the whole batch; exits with the refusal before anything
        starts."""
        try:
            return plan_runs(self, job_overrides, initial_job_idx)
        except Refused as exc:
            stop(exc)


ONE_PROCESS_PER_RUN = "hydra/launcher=submitit_local or hydra/launcher=slurm (a process per run)"


def _engine_refusal(engine: str, how: str, fix: str) -> str:
    return (
        f"{engine} starts a vLLM engine that its process cannot free (vllm-project/vllm#21073), and {how}, "
        f"so the next run there would run out of GPU memory; {fix}, or set backend.fast_inference=false"
    )


def process_per_run(launcher: Any) -> bool:
    """Whether ``launcher`` starts every run in a process of its own (grpo-sweep's submitit launchers, the stock
    submitit ones); Hydra's basic launcher, the pool and any other launcher may train several runs in one."""
    if isinstance(launcher, GatedLauncher):
        return launcher.process_per_run
    from ..adapters.submitit import process_per_job

    return process_per_job(launcher)


def check_one_engine(cfg: Any, launcher_name: str, runs: int) -> None:
    """Refuse a run that starts a vLLM engine (``engine_in_process``) on a launcher that trains ``runs`` runs
    (more than one) in shared processes: the engine's memory is never given back, so the next run in that process
    goes without it. Raises ConfigError."""
    engine = engine_in_process(cfg)
    if engine:
        how = f"hydra/launcher={launcher_name} trains more than one of the sweep's {runs} runs in a process"
        raise ConfigError(_engine_refusal(engine, how, f"use {ONE_PROCESS_PER_RUN}"))


def check_study_engine(cfg: Any, n_trials: int, seeds_per_trial: int) -> None:
    """An Optuna worker trains its trials one after another in its own process, whichever launcher started it:
    refuse a study whose runs start a vLLM engine unless it trains one run in all. Raises ConfigError."""
    engine = engine_in_process(cfg)
    if engine and n_trials * seeds_per_trial > 1:
        how = (
            f"an Optuna worker trains its trials one after another in one process (hydra.sweeper.n_trials="
            f"{n_trials}, seeds_per_trial={seeds_per_trial})"
        )
        raise ConfigError(
            _engine_refusal(engine, how, f"search with a grid (-m without hparams_search) on {ONE_PROCESS_PER_RUN}")
        )


def check_study_processes(cfg: Any, launcher: Any) -> None:
    """A study's worker starts each multi-process trial's ranks itself (torchrun's engine, on its machine); a SLURM
    worker job of several tasks would run the study's trial loop once per task. Raises ConfigError."""
    from ..adapters.submitit import executor_kind, process_per_job

    if cfg.distributed.strategy != "none" and process_per_job(launcher) and executor_kind(launcher) == "slurm":
        raise ConfigError(
            f"distributed={cfg.distributed.strategy} in an Optuna study on SLURM: a worker job runs the study's trial "
            "loop once per task; run the study on one machine (hydra/launcher=local, pool or submitit_local), where "
            "each worker starts its trials' processes (distributed.nproc_per_node)"
        )


def _launcher_name(cfg: Any, launcher: Any) -> str:
    """The launcher as the command line chose it (``hydra/launcher=pool``), else its class."""
    choice = OmegaConf.select(cfg, "hydra.runtime.choices", default=None)
    return str(choice.get("hydra/launcher")) if choice and choice.get("hydra/launcher") else type(launcher).__name__


def is_grpo_sweep_config(config: Any) -> bool:
    """Whether ``config`` is a grpo-sweep app's: Hydra offers this project's launchers to every app in the
    environment (hydra_plugins/), and their checks read grpo-sweep's keys."""
    kind = OmegaConf.get_type(config) if OmegaConf.is_config(config) else None
    return isinstance(kind, type) and issubclass(kind, Config)


def _key(num: int, overrides: Sequence[str]) -> tuple:
    return num, tuple(overrides)


def plan_runs(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int, config: Any = None, loader: Any = None
) -> list[Path]:
    """Compose every run as its job will, check it (``check_run``) and the launcher's resources; return each
    run's directory. The first bad run raises Refused naming it and its value: nothing has started then.

    ``launcher`` is the one that will start the runs: a ``GatedLauncher`` brings its resource check and where
    its runs train, and keeps the plan, so that its own call for a batch the sweeper planned costs nothing. Any
    other launcher (Hydra's stock ones) gets the config checks only (``config``/``loader`` then say what to
    compose with).
    """
    from ..reading.results import varying_overrides

    gated = isinstance(launcher, GatedLauncher)
    planned: dict = getattr(launcher, "_gate_planned", {}) if gated else {}
    keys = [_key(num, o) for num, o in enumerate(job_overrides, start=initial_job_idx)]
    if keys and all(k in planned for k in keys):
        return [planned[k] for k in keys]
    config = launcher.config if config is None else config
    loader = launcher.hydra_context.config_loader if loader is None else loader
    if gated and not is_grpo_sweep_config(config):
        raise Refused(
            f"grpo-sweep: hydra/launcher={_launcher_name(config, launcher)} runs grpo-sweep's runs (python launch.py), "
            f"and this app is not grpo-sweep (its config is not grpo-sweep's schema); launch it with hydra/launcher="
            "basic, joblib or submitit_local/submitit_slurm of their own plugins"
        )
    if gated:
        launcher.check_resources()
    trains_here = gated and launcher.trains_here
    try:  # several runs a GPU (hydra.launcher.runs_per_gpu): their memory planned before any starts
        memory_plan = start_plan(launcher, trains_here) if gated else None
    except ConfigError as exc:
        raise Refused(f"grpo-sweep: {one_line(exc)}; no run was started") from None
    # the runs that may share a process: this batch, and the batches this launcher planned before (they ran in
    # this process, or in the pool's workers)
    runs = len(planned.keys() | set(keys))
    shared = runs > 1 and not process_per_run(launcher)
    shown = varying_overrides([list(o) for o in job_overrides])
    run_dirs: list[Path] = []
    sweep_dirs: dict = {}
    runs_cfgs = compose_runs(loader, config, job_overrides)
    with telling_interrupts_apart() as pressed:
        for key, swept in zip(keys, shown):
            num, cfg = key[0], None
            where = f"job {num} ({' '.join(swept) or 'defaults'})"
            try:
                cfg = next(runs_cfgs)
                run_dir = numbered_run_dir(cfg, num, sweep_dirs)
                if shared:
                    check_one_engine(cfg, _launcher_name(cfg, launcher), runs)
                check_run(cfg, run_dir, trains_here)
                if gated:
                    check_world(cfg, *launcher.run_world(cfg))
                if memory_plan is not None:
                    memory_plan.add(where, cfg)
            except (ConfigError, ValueError) as exc:  # OmegaConf's errors in a value are ValueErrors too
                raise Refused(f"grpo-sweep: {where}: {one_line(exc)}; no run was started") from None
            except BaseException as exc:
                failure = unexpected(exc, where, cfg, pressed)
                if failure is exc:
                    raise
                raise Refused(f"{failure}; no run was started") from None
            run_dirs.append(run_dir)
    if memory_plan is not None:
        try:
            memory_plan.check()
        except ConfigError as exc:
            raise Refused(f"grpo-sweep: {one_line(exc)}; no run was started") from None
    if gated:
        launcher._gate_planned = {**planned, **dict(zip(keys, run_dirs))}
        launcher._memory_plan = memory_plan
    return run_dirs


def _plain_value(override: Any, loader: Any) -> bool:
    """`key=value` on a config key with a scalar value: Hydra sets it on the merged config, after composing."""
    from hydra.core.override_parser.types import OverrideType

    return (
        override.type == OverrideType.CHANGE
        and override.package is None
        and not override.is_hydra_override()
        and not isinstance(override.value(), (dict, list))  # merged into the node, so the order would matter
        and not is_config_group(loader, override.key_or_group)
    )


def compose_runs(loader: Any, master: Any, job_overrides: Sequence[Sequence[str]]) -> Iterator[Any]:
    """Yield each run's config, as ``loader.load_sweep_config(master, overrides)`` composes it, for a batch.

    A compose is slow (defaults tree, YAML, merging onto the schema) and a sweep has many runs. Runs that differ from
    an earlier one only in plain values (lora.r=8 / lora.r=16, seeds) are the same composition with other values,
    which Hydra sets after merging (``adapters.hydra.apply_overrides``); such a run is the earlier run's config with
    its own values, hydra.overrides.task and override_dirname set as Hydra sets them. Config groups, +/++/~, dicts,
    lists and hydra.* keys are composed by Hydra, as is any run whose values do not apply (Hydra then says why).
    The earlier config is reused, not copied (a copy is slow too): a yielded config holds until the next one.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import ConfigCompositionException

    from ..adapters.hydra import apply_overrides, overrides_dirname

    parser = OverridesParser.create()
    composed: dict[tuple, Any] = {}
    # Hydra's override grammar (ANTLR) is slow, a sweep repeats the same few lines in every run, and a parsed
    # override is only read afterwards: each distinct line is parsed once
    lines: dict[str, Any] = {}
    for overrides in job_overrides:
        for line in overrides:
            if line not in lines:
                [lines[line]] = parser.parse_overrides([line])
        parsed = [lines[line] for line in overrides]
        plain = [o for o in parsed if _plain_value(o, loader)]
        # same config groups, same +/~ overrides, same keys set to plain values: the same composition
        family = tuple(o.key_or_group if any(o is p for p in plain) else o.input_line for o in parsed)
        cfg = composed.get(family)
        if cfg is not None:
            try:
                apply_overrides(plain, cfg)  # every plain key of the family: all reset
            except ConfigCompositionException:
                cfg = None
        if cfg is None:
            cfg = loader.load_sweep_config(master, list(overrides))
            composed.setdefault(family, cfg)
        else:
            app = [o for o in parsed if not o.is_hydra_override()]
            cfg.hydra.overrides.task = [o.input_line for o in app]
            dirname = cfg.hydra.job.config.override_dirname
            cfg.hydra.job.override_dirname = overrides_dirname(
                app, dirname.exclude_keys, dirname.item_sep, dirname.kv_sep
            )
        yield cfg


_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_KEY = re.compile(r"[\w.]+")


def numbered_run_dir(cfg: Any, num: int, memo: dict | None = None) -> Path:
    """Give a composed sweep job its number, as the launcher will, and return its run directory.

    ``memo`` (one dict for the runs of one sweep) spares resolving ``hydra.sweep.dir`` again for each run: each
    resolution runs OmegaConf's interpolation grammar (slow, once per run of a large sweep), and the sweep
    dir is the same string for every run whose referenced keys have the same values (``now`` is one time for the
    whole sweep: Hydra copies the master config's resolver cache into each run's config).
    """
    with open_dict(cfg.hydra.job):
        # every grpo-sweep launcher gives a job its number as its id too (Hydra's basic launcher does; joblib's and
        # submitit's ids are known only once the job runs), so hydra.sweep.subdir=j${hydra.job.id} is planned here
        cfg.hydra.job.num = num
        cfg.hydra.job.id = num
    sweep = cfg.hydra.sweep
    unresolved = OmegaConf.to_container(sweep, resolve=False)
    subdir = str(num) if unresolved["subdir"] == "${hydra.job.num}" else str(sweep.subdir)
    raw = unresolved["dir"]
    refs = _REFERENCE.findall(raw) if isinstance(raw, str) else []
    if memo is None or not all(_KEY.fullmatch(r) or r.startswith("now:") for r in refs):  # nested: resolve it
        return Path(str(sweep.dir)) / subdir
    key = (raw, *(str(OmegaConf.select(cfg, r)) for r in refs if not r.startswith("now:")))
    if key not in memo:
        memo[key] = str(sweep.dir)
    return Path(memo[key]) / subdir
