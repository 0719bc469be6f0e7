"""The one place a run's config is checked, once, on the machine that launches it, before anything heavy is
imported, trained or submitted: ``validate`` calls each group's checking function, which lives beside the code
that gives the group its meaning, then checks what spans groups (``check_across``).

Each failure is one line naming the key, the bad value and what would be valid, in the style of TRL's own
``GRPOConfig.__post_init__`` messages. What only the machine that trains can answer is ``check_machine``'s.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ..backends.gpu_stack import BackendError, check_backend, check_cpu_fallback, gpu_refusal, visible_gpu_ids
from ..config.checks import (
    ConfigError,
    check_logger,
    check_lora,
    check_optimizer,
    check_seeds,
    check_trainer,
    updates_weights_in_place,
)
from ..data import precheck_files
from ..models import check_model
from ..rewards import REWARDS, RewardError, needs, required_columns, resolve_reward
from ..rewards.mix import Term, check_mix, data_columns, term_reward, terms
from ..rewards.sandbox import SandboxUnavailable, check_isolation
from .distributed import DEEPSPEED, check_world, from_env, in_slurm_job_of_many_tasks, spawns_here
from .phases import check_phases, phase_configs
from .record import VAL_ACCURACY
from .redact import credential_in, is_secret_key, redact
from .results import BEST_PREFIX, check_metric_name, measured_periodically, without_best
from .vllm_serving import check_server_settings, server_gpus

__all__ = ["ConfigError", "check_across", "check_machine", "validate"]


def _as_container(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def validate(cfg: Any) -> None:
    """Every group's check, in order, then the checks across groups; the first failure raises ConfigError."""
    # read as plain dicts: the mix is read several times, and each absent optional key of a DictConfig costs an
    # exception inside OmegaConf, which a large sweep pays once per run
    mix, args = _as_container(cfg.reward_mix), dict(_as_container(cfg.trainer.args))
    try:
        check_backend(cfg)
        mix_terms = check_mix(mix, cfg.reward_errors, args)  # before trainer.args: it names the mix's rewards
        check_trainer(cfg.trainer, args, cfg.backend.name)
        check_seeds(cfg)
        # the processes, when the config says (null: the launcher's tasks, or the GPUs: checked where they are known)
        check_world(cfg, cfg.distributed.nproc_per_node)
        check_server_settings(cfg)
        check_model(cfg.model)
        check_lora(cfg.lora)
        check_optimizer(cfg.optimizer)
        check_logger(cfg.logger)
        need_columns = data_columns(mix)
        data = precheck_files(cfg.data, "ground_truth" in need_columns, need_columns)
        check_across(cfg, mix_terms, data.columns, data.train_rows)
        check_phases(cfg)
    except ValueError as exc:  # each check's one line (RewardError, DataError, BackendError, ConfigError ...)
        raise ConfigError(str(exc)) from None
    for i, phase in enumerate(phase_configs(cfg)[1:]):  # what each phase trains with must be a run that can work
        try:
            validate(phase)
        except ConfigError as exc:
            raise ConfigError(f"trainer.phases[{i}]: {exc}") from None


def check_across(cfg: Any, mix_terms: list[Term], columns: list[str] | None, train_rows: int | None = None) -> None:
    """What spans groups: the prompt and completion within the model's length, the objective, the accuracy reward
    against the data, the system prompt against the rewards' tags, a train split that fills a generation, and no
    credential anywhere in the config."""
    trainer = cfg.trainer
    prompt_budget = trainer.max_prompt_length or 0
    if prompt_budget + trainer.max_completion_length > cfg.model.max_seq_length:
        raise ConfigError(
            f"trainer.max_prompt_length + trainer.max_completion_length = {prompt_budget} + "
            f"{trainer.max_completion_length} exceeds model.max_seq_length={cfg.model.max_seq_length}"
        )
    _check_objective(str(cfg.optimized_metric), [t.name for t in mix_terms])
    _check_accuracy_reward(cfg, mix_terms, columns)
    _check_prompt_asks_for_tags(cfg, mix_terms)
    _check_train_split_fills_a_generation(cfg, train_rows)
    _check_full_finetune_precision(cfg)
    _no_secrets_in(cfg)


def _check_full_finetune_precision(cfg: Any) -> None:
    """A full fine-tune (lora=none) of half-precision weights on backend=trl without DeepSpeed: AdamW updates the
    bf16/fp16 weights themselves, with no float32 master copy, and at 1e-6-5e-6 most updates are below half a bf16
    step of the weight and round to zero: the run trains nothing and says nothing. (model.dtype=auto is loaded in
    float32 there, trl_backend.load.)"""
    if updates_weights_in_place(cfg) and cfg.model.dtype in ("bfloat16", "float16"):
        raise ConfigError(
            f"model.dtype={cfg.model.dtype} with lora=none and distributed={cfg.distributed.strategy}: a full "
            "fine-tune "
            f"would update the {cfg.model.dtype} weights with no float32 master copy, and most small updates round to "
            "zero; use model.dtype=float32 (trainer.bf16=true still computes in bf16) or distributed=zero2 (DeepSpeed "
            "keeps float32 master weights)"
        )


def _check_train_split_fills_a_generation(cfg: Any, train_rows: int | None) -> None:
    """TRL's sampler takes the generation batch's distinct prompts from the train split and drops a batch it cannot
    fill: with fewer train rows than one generation's prompts, an epoch has no batch and the run trains 0 steps.
    ``train_rows``: the train split's rows where the gate counts them (None: hub data, a large file). The processes
    are distributed.nproc_per_node's (null: at least 1; the machine's check sees the rest)."""
    if train_rows is None:
        return
    trainer = cfg.trainer
    processes = cfg.distributed.nproc_per_node or 1
    steps = trainer.steps_per_generation or trainer.gradient_accumulation_steps
    given = trainer.args.get("generation_batch_size")
    batch = given or trainer.per_device_train_batch_size * processes * steps
    prompts = batch // trainer.num_generations
    if prompts <= train_rows:
        return
    across = processes > 1
    made = (
        "trainer.args.generation_batch_size"
        if given
        else f"trainer.per_device_train_batch_size x {'distributed.nproc_per_node x ' if across else ''}"
        f"steps_per_generation = {trainer.per_device_train_batch_size} x {f'{processes} x ' if across else ''}{steps}"
    )
    limit = cfg.data.max_train_samples
    source = (
        "data.max_train_samples"
        if limit and limit == train_rows
        else "data.arithmetic.n_train"
        if cfg.data.source == "arithmetic"
        else "data.path, less the carved splits"
    )
    raise ConfigError(
        f"{made} = {batch} completions a generation, {prompts} prompts of trainer.num_generations="
        f"{trainer.num_generations} each, but the train split has {train_rows} ({source}): TRL drops a batch it "
        f"cannot fill, so the run would train 0 steps; lower trainer.per_device_train_batch_size (at most "
        f"{max(1, train_rows * trainer.num_generations // (processes * steps))}) or give more training rows"
    )


def _tag_default(fn: Any, param: str) -> Any:
    try:
        default = inspect.signature(fn).parameters[param].default
    except (KeyError, TypeError, ValueError):
        return None
    return None if default is inspect.Parameter.empty else default


def _check_prompt_asks_for_tags(cfg: Any, mix_terms: list[Term]) -> None:
    """A reward that pays for tags (``Needs.tag_params``: format rewards, the answer rewards) the system prompt
    never asks for cannot be earned by a model that follows the prompt, and dilutes the rest of the mix: each
    trained reward's tags must appear in data.system_prompt as ``<tag>``. An empty system prompt leaves what to
    write to the data's own messages, which are not read here."""
    prompt = cfg.data.system_prompt
    if not prompt:
        return
    for term in mix_terms:
        if term.weight <= 0:  # logged, not trained on
            continue
        fn = term_reward(term)
        tags = {param: term.params.get(param, _tag_default(fn, param)) for param in needs(fn).tag_params}
        missing = {param: tag for param, tag in tags.items() if tag and f"<{tag}>" not in prompt}
        if not missing:
            continue
        named = ", ".join(f"<{tag}>" for tag in missing.values())
        given = ", ".join(f"params.{p}={t}" if p in term.params else f"its default {p}={t}" for p, t in missing.items())
        raise ConfigError(
            f"{term.label} (weight {term.weight:g}) scores {'tag' if len(missing) == 1 else 'tags'} {named} "
            f"({given}), which data.system_prompt never mentions, "
            f"so a model that follows the prompt cannot earn it; set data.system_prompt to one that asks for {named}, "
            f"or reward_mix.{term.name}.params.{next(iter(missing))} to the prompt's tag"
        )


def _check_objective(metric: str, term_names: list[str]) -> None:
    base = without_best(metric)
    if base.startswith("test_"):
        raise ConfigError(
            f"optimized_metric={metric}: the test split only measures, it never chooses (a choice made on it "
            f"inflates what it reports); optimize its validation twin, optimized_metric=val_{base[len('test_') :]}"
        )
    if metric.startswith(BEST_PREFIX) and not measured_periodically(metric):
        raise ConfigError(
            f"optimized_metric={metric}: the best step is chosen among the validation evaluations, which measure "
            "best.val_accuracy, best.val_accuracy_lenient, best.val_rewards.<reward>"
        )
    # a name no run reports: every run of a sweep would train and have nothing to rank by. The term's own name is
    # not held to this config's mix: a study checks its objectives against every mix its space chooses among
    # (search/optuna), and checks its space's values on the base config, whose mix a trial may replace
    term = without_best(metric).partition(".")[2]
    try:
        check_metric_name(metric, [*term_names, term] if term else term_names)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _check_accuracy_reward(cfg: Any, mix_terms: list[Term], columns: list[str] | None) -> None:
    """``val_accuracy`` is trainer.eval.accuracy_reward's validation mean: it must resolve, and find its columns
    where the data's columns are known here (``columns``; None for hub data)."""
    name = cfg.trainer.eval.accuracy_reward
    try:
        fn = resolve_reward(name)
    except RewardError as exc:
        raise ConfigError(f"trainer.eval.accuracy_reward={name!r}: {exc}") from None
    if columns is None:
        return
    params = next((t.params for t in mix_terms if t.target == name), {})  # as evaluate.accuracy_reward binds them
    missing = [c for c in required_columns(fn, bound=params) if c not in columns]
    if not missing:
        return
    # evaluation hands a None ground truth to a reward that needs one: it scores None, so val_accuracy is None
    if missing == ["ground_truth"] and cfg.optimized_metric != VAL_ACCURACY:
        return
    own = next((t for t in mix_terms if t.target not in REWARDS and not t.factory and t.weight > 0), None)
    example = own or next(t for t in mix_terms if t.weight > 0)
    instead = (
        f"set trainer.eval.accuracy_reward={example.target} (its validation mean becomes val_accuracy)"
        if own
        else "set trainer.eval.accuracy_reward to a reward the data can feed"
    )
    if missing == ["ground_truth"]:
        raise ConfigError(
            f"trainer.eval.accuracy_reward={name} needs column 'ground_truth', which the data lacks "
            f"(columns: {', '.join(columns)}), so val_accuracy, the optimized_metric, would be None; "
            f"set data.ground_truth_column, {instead}, or optimized_metric=val_rewards.{example.name}"
        )
    raise ConfigError(
        f"trainer.eval.accuracy_reward={name} needs column {missing[0]!r}, which the data lacks "
        f"(columns: {', '.join(columns)}); add the column, or {instead}"
    )


def _no_secrets_in(cfg: Any) -> None:
    """A config is saved with every run (.hydra/, summary.json): it must not carry credentials.

    Checked unresolved, as Hydra saves it: ``${oc.env:HF_TOKEN}`` is the way to hand a token to a config.
    """
    if OmegaConf.is_config(cfg):
        # key by key, leaving out the hydra node (most of the config) instead of converting it and dropping it,
        # since a large sweep runs this once per run. An interpolation or a missing value is not read (it would
        # resolve): it holds no credential written into the config.
        container = {
            k: "${}"
            if OmegaConf.is_interpolation(cfg, k) or OmegaConf.is_missing(cfg, k)
            else OmegaConf.to_container(cfg[k], resolve=False)
            if OmegaConf.is_config(cfg[k])
            else cfg[k]
            for k in cfg
            if k != "hydra"
        }
    else:
        container = {k: v for k, v in dict(cfg).items() if k != "hydra"}

    def walk(node: Any, path: str) -> None:
        for key, value in node.items():
            if isinstance(value, (dict, list)):
                walk(value if isinstance(value, dict) else dict(enumerate(value)), f"{path}{key}.")
            elif is_secret_key(key) and isinstance(value, str) and value and "${" not in value and value != "???":
                raise ConfigError(
                    f"{path}{key}=<hidden>: credentials must not go into the config (it is saved with the run); "
                    "set them in the environment instead (HF_TOKEN, WANDB_API_KEY)"
                )
            elif isinstance(value, str) and (kind := credential_in(value)):
                # Refused, not masked: Hydra writes the config and the overrides as typed into .hydra/ before any
                # of our code runs, so only the gate can keep them off disk; ${oc.env:...} stays unresolved there
                # (and the run's own files mask the resolved URL, see redact.py).
                what = "URL" if kind.endswith("URL") else "token"
                raise ConfigError(
                    f"{path}{key}={redact(value, [])}: {kind} is written into the run's files; put the {what} in an "
                    f"environment variable and write ${{oc.env:{_env_name_for(f'{path}{key}', what)}}}"
                )

    walk(container, "")


def _env_name_for(key: str, what: str) -> str:
    """A name for the variable to suggest: ``JUDGE_URL`` for reward_mix.judge.factory_args.base_url."""
    parts = [p for p in key.split(".")[:-1] if p not in ("factory_args", "args", "params") and not p.isdigit()]
    return f"{(parts[-1] if parts else key.split('.')[-1]).upper()}_{what.upper()}"


def gpu_available() -> bool:
    """Whether this machine has a usable GPU, without importing torch (a login node must not pay for it)."""
    if "torch" in sys.modules:
        return bool(sys.modules["torch"].cuda.is_available())
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    nvidia = Path("/proc/driver/nvidia/gpus")
    return (nvidia.is_dir() and any(nvidia.iterdir())) or Path("/dev/kfd").exists()


def gpu_count() -> int:
    """This machine's usable GPUs, without importing torch where it is not imported yet."""
    if "torch" in sys.modules:
        return int(sys.modules["torch"].cuda.device_count())
    if not gpu_available():
        return 0
    ids = visible_gpu_ids()
    if ids is not None:
        return len(ids)
    nvidia = Path("/proc/driver/nvidia/gpus")
    return len(list(nvidia.iterdir())) if nvidia.is_dir() else 1


def machine_world(cfg: Any, gpus: int) -> tuple[int, int]:
    """(processes, nodes) of the run as this machine will train it: a SLURM job's tasks, a world torchrun formed,
    or ``distributed.nproc_per_node`` (null: one per GPU here)."""
    if in_slurm_job_of_many_tasks():
        return int(os.environ["SLURM_NTASKS"]), int(os.environ.get("SLURM_JOB_NUM_NODES", "1"))
    if "WORLD_SIZE" in os.environ:
        rank = from_env()
        return rank.world_size, rank.nodes
    if cfg.distributed.nproc_per_node is None:
        if not gpus:
            raise ConfigError(
                f"distributed={cfg.distributed.strategy} with distributed.nproc_per_node=null runs one "
                "process per GPU, and this machine has none: set distributed.nproc_per_node=N"
            )
        return gpus, 1
    return int(cfg.distributed.nproc_per_node), 1


def _check_cores(cfg: Any, processes: int) -> None:
    """A CPU run's processes, all started on this machine, each need a core: ranks beyond the cores this process may
    use only take turns, and each collective waits for the slowest. (A GPU run's are checked against its GPUs.)"""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if processes > cores:
        raise ConfigError(
            f"distributed.nproc_per_node={cfg.distributed.nproc_per_node}: {processes} processes on a CPU machine "
            f"with {cores} cores for this process (os.sched_getaffinity); set distributed.nproc_per_node to at most "
            f"{cores}, or run on GPUs"
        )


def check_machine(cfg: Any) -> None:
    """What only the machine that trains can answer: a GPU for GPU-only settings, the backend's packages,
    the code reward's sandbox, the run's processes against its GPUs. Run where training runs (run_task), not on the
    login node that submits."""
    gpu = gpu_available()
    # one process on one GPU needs no arithmetic, unless a vLLM server takes GPUs of the node beside it (without a
    # GPU, gpu_refusal below names trainer.use_vllm with the rest)
    if cfg.distributed.strategy != "none" or (gpu and server_gpus(cfg)):
        gpus = gpu_count() if gpu else 0
        world = machine_world(cfg, gpus)
        try:
            check_world(cfg, *world, gpus_per_node=gpus)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not gpu and spawns_here(cfg):
            _check_cores(cfg, world[0])
        if cfg.distributed.strategy in DEEPSPEED and importlib.util.find_spec("deepspeed") is None:
            raise ConfigError(
                f"distributed={cfg.distributed.strategy} needs the deepspeed package, which is not "
                "installed here (pip install deepspeed); or use distributed=ddp"
            )
    if not gpu and (refusal := gpu_refusal(cfg)):
        raise ConfigError(refusal)
    if "8bit" in cfg.optimizer.optim and importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError(
            f"optimizer.optim={cfg.optimizer.optim} needs bitsandbytes, which is not installed; "
            "use optimizer=adamw_torch"
        )
    if cfg.backend.name == "unsloth":
        if importlib.util.find_spec("unsloth") is None:
            raise ConfigError(
                "backend.name=unsloth: the unsloth package is not installed (pip install -e '.[gpu]'); "
                "or use backend=trl"
            )
        try:
            check_cpu_fallback(gpu)
        except BackendError as exc:
            raise ConfigError(str(exc)) from None
    for term in terms(cfg.reward_mix):
        device = str(term.model_args.get("device", "auto"))
        if term.model and not gpu and device.startswith("cuda"):
            raise ConfigError(
                f"reward_mix.{term.name}.model_args.device={device}: this machine has no GPU; use "
                "auto (the training device) or cpu"
            )
        if needs(term_reward(term)).sandbox:
            isolation = term.params.get("isolation", "namespaces")
            try:
                check_isolation(isolation)
            except SandboxUnavailable as exc:
                fallback = (
                    ""
                    if isolation == "rlimits"
                    else (
                        f"; set reward_mix.{term.name}.params.isolation=rlimits to "
                        "run it with resource limits only (no network isolation)"
                    )
                )
                raise ConfigError(
                    f"reward_mix.{term.name}: cannot sandbox generated code with isolation={isolation} here "
                    f"({exc}){fallback}"
                ) from None
