"""One W&B run per training run, shaped so a sweep's runs compare side by side in W&B.

group = the sweep, job_type train/trial, name and tags from the overrides, config = the resolved Hydra config
(secrets redacted) plus flat keys to group a dashboard by (``choices.<group>``: each config group's option,
``override.<key>``: each override the sweep varies), a completions table every N steps, and a summary with the
objective and the validation and test figures. The run id lives in the
run directory so a resumed run continues the same W&B run. Without credentials the run is written offline under
``<run_dir>/wandb`` and can be synced later. The per-step history is transformers' own W&B callback's
(``report_to=["wandb"]``: ``train/reward``, ``train/rewards/<name>/mean``, ... against ``train/global_step``), which
logs into the run started here; this module keeps only what it cannot do (the run's identity, the offline
fallback, redaction, the held-out rows and the summary).
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from transformers import TrainerCallback

from ..adapters.trl import latest_completions
from ..run.context import RunContext
from ..run.files import write_text_atomic
from ..run.record import HEADLINE_FIELDS, RunSummary
from ..run.redact import redact, secret_values
from ..run.results import measured_periodically
from ..run.tracker import RunLogger
from .wandb_setup import choose_mode, default_group, where_saved

log = logging.getLogger(__name__)

RUN_ID_FILE = "wandb_run_id"
OUTPUT_LOG = "output.log"  # the name W&B gives its console capture and shows as the run's logs
STEP_KEY = "train/global_step"  # the x-axis transformers' own W&B integration uses
# Overrides that say where or how a run is logged, not what it trains: left out of names and tags.
NOT_IN_NAME = ("hydra", "logger", "output_root", "task_name")
W_AND_B_TAG_MAX = 64
_online_failed = False  # set once an online start failed in this process


def _training_overrides(overrides: list[str]) -> list[str]:
    keep = []
    for override in overrides:
        key = _key(override)
        if key.split(".", 1)[0].split("/", 1)[0] not in NOT_IN_NAME:
            keep.append(override)
    return keep


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def swept_keys(sweep_dir: Path | None) -> set[str]:
    """Keys the sweep varies (``reward_mix`` for ``reward_mix=format,smoke``), from the multirun.yaml Hydra writes
    into the sweep dir before launching any job; also the keys of a sweeper's ``params`` (Optuna-style)."""
    path = Path(sweep_dir or "") / "multirun.yaml"
    if sweep_dir is None or not path.exists():
        return set()
    from hydra.core.override_parser.overrides_parser import OverridesParser

    hydra_cfg = OmegaConf.load(path).hydra
    task = list(OmegaConf.select(hydra_cfg, "overrides.task", default=None) or [])
    keys = {
        o.get_key_element().lstrip("+~")
        for o in OverridesParser.create().parse_overrides(task)
        if o.is_sweep_override()
    }
    params = OmegaConf.select(hydra_cfg, "sweeper.params", default=None)
    return keys | set(params.keys() if params is not None else ())


def run_name(overrides: list[str], swept: set[str] | None = None) -> str:
    """``reward_mix=format,lora.r=16`` — Hydra's override_dirname style, only the swept keys when known
    (the settings every run of the sweep shares are in the config and tags); ``defaults`` when nothing is overridden."""
    training = _training_overrides(overrides)
    named = [o for o in training if _key(o) in swept] if swept else []
    return ",".join(named or training) or "defaults"


# Flat config keys a dashboard groups, filters and averages runs by: the option of each config group, and each
# override the sweep varies (its value typed: ``override.trainer.seed`` is a number).
CHOICE_PREFIX = "choices."
OVERRIDE_PREFIX = "override."


def flat_keys(context: RunContext) -> dict[str, Any]:
    """``{"choices.reward_mix": "format", ..., "override.trainer.seed": 1, ...}`` for the run's config: every group's
    choice, and the overrides the sweep varies (all training overrides when that is not known: a single run)."""
    out: dict[str, Any] = {f"{CHOICE_PREFIX}{group}": option for group, option in sorted(context.choices.items())}
    swept = swept_keys(context.sweep_dir)
    for override in _training_overrides(context.overrides):
        key = _key(override)
        if not swept or key in swept:
            out[f"{OVERRIDE_PREFIX}{key}"] = _override_value(override)
    return out


def _override_value(override: str) -> Any:
    """The value as Hydra parses it (``1`` an int, ``1e-4`` a float, ``format`` a string); lists and the like as
    their text, which W&B can group by."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    text = override.partition("=")[2]
    try:
        value = OverridesParser.create().parse_overrides([override])[0].value()
    except Exception:  # an override Hydra accepted at launch parses here too; this keeps a stray one as text
        return text
    return value if isinstance(value, (str, int, float, bool)) or value is None else text


def run_tags(overrides: list[str], user_tags: list[str]) -> list[str]:
    tags = [t[:W_AND_B_TAG_MAX] for t in list(user_tags) + _training_overrides(overrides)]
    return list(dict.fromkeys(tags))


def read_or_create_run_id(run_dir: Path) -> tuple[str, bool]:
    """The run id stored in the run dir (a resumed or requeued run), or a new one written there first."""
    path = Path(run_dir) / RUN_ID_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text().strip():
        return path.read_text().strip(), True
    run_id = uuid.uuid4().hex[:12]  # W&B ids are any unique [a-z0-9] string
    write_text_atomic(path, run_id + "\n")  # a run killed here leaves no half-written id
    return run_id, False


class WandbLogger(RunLogger):
    def __init__(self, cfg: Any, context: RunContext):
        import wandb

        self.cfg = cfg.logger
        self.run_dir = Path(context.run_dir)
        overrides = context.overrides
        secrets = secret_values()
        self.run_id, resumed = read_or_create_run_id(self.run_dir)
        init = dict(
            project=cfg.logger.project,
            entity=cfg.logger.entity,
            group=cfg.logger.group or default_group(cfg, context),
            job_type=cfg.logger.job_type or ("trial" if context.optuna_worker else "train"),
            name=redact(cfg.logger.run_name or run_name(overrides, swept_keys(context.sweep_dir)), secrets),
            tags=redact(run_tags(overrides, list(cfg.logger.tags)), secrets),
            notes=cfg.logger.notes,
            config=redact({**OmegaConf.to_container(cfg, resolve=True), **flat_keys(context)}, secrets),
            dir=str(self.run_dir),
            id=self.run_id,
            resume="allow",
        )
        global _online_failed
        self.mode = choose_mode(cfg.logger.mode)
        if self.mode == "online" and _online_failed:
            self.mode = "offline"  # later runs of a local -m sweep do not wait for the same timeout again
        self.run = None
        if self.mode == "online":
            try:
                self.run = wandb.init(mode="online", settings=self._settings(), **init)
            except Exception as exc:  # no network on a compute node, a bad key, a server down: keep training
                log.warning(
                    "W&B online start failed (%s: %s); logging offline instead",
                    type(exc).__name__,
                    redact(str(exc).splitlines()[0] if str(exc) else "", secrets),
                )
                self.mode, _online_failed = "offline", True
                wandb.teardown()  # the timed-out online attempt keeps the run id "in use" inside wandb's service
        if self.run is None:
            try:
                self.run = wandb.init(mode="offline", settings=self._settings(), **init)
            except Exception as exc:  # logging must never cost the training run
                log.warning(
                    "W&B disabled for this run (%s: %s); metrics.jsonl and summary.json are still written",
                    type(exc).__name__,
                    redact(str(exc), secrets)[:300],
                )
                return
        self.run.define_metric(STEP_KEY)
        self.run.define_metric("*", step_metric=STEP_KEY, step_sync=True)
        log.info("W&B run %s (%s, group %s%s)", self.run_id, self.mode, init["group"], ", resumed" if resumed else "")

    def _settings(self):
        import wandb

        # quiet: our own end-of-run line says where the run is; no prompt can appear (no login is ever asked).
        # console off: W&B's capture takes what reaches the terminal as it is, a reward's print of a key or a
        # warning quoting one included, into output.log and the .wandb file; the run's masked log goes there
        # instead (``_save_log``).
        return wandb.Settings(init_timeout=float(self.cfg.init_timeout), quiet=True, save_code=False, console="off")

    def report_to(self) -> list[str]:
        # transformers' WandbCallback starts a run of its own (project "huggingface", online) when none is active
        return ["wandb"] if self.run is not None else []

    def watch(self, trainer: Any) -> None:
        # TRL's own table (trainer.args.log_completions=true) comes at every logging step: then ours steps aside
        if self.run is not None and self.cfg.log_completions_steps and not trainer.args.log_completions:
            trainer.add_callback(CompletionsTable(self.run, trainer, int(self.cfg.log_completions_steps)))

    def log_metrics(self, row: dict) -> None:
        if self.run is None:
            return
        values = {
            k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        self.run.log({**values, STEP_KEY: row.get("step")})

    def finish(self, summary: RunSummary) -> None:
        run, self.run = self.run, None
        if run is None:
            return
        fields = summary_fields(summary)
        run.summary.update(redact(fields))
        _save_log(run, self.run_dir)
        run.finish(exit_code=1 if fields["status"] == "failed" else 0)  # a pruned trial ended as asked
        line = where_saved(run)
        if line:
            print(line)


def _save_log(run: Any, run_dir: Path) -> None:
    """The run's log file (Hydra's launch.log: every record masked on its way there, run/redact.py) as the W&B
    run's ``output.log``, the file W&B shows as the run's logs. An Optuna worker's trials share the worker's log."""
    files = [Path(h.baseFilename) for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    files = sorted((f for f in files if f.is_file()), key=lambda f: f.parent != run_dir)  # the run's own first
    if not files:
        return
    target = Path(run.dir) / OUTPUT_LOG
    try:
        write_text_atomic(target, redact(files[0].read_text(errors="replace")))
        run.save(str(target), base_path=run.dir, policy="now", glob=False)
    except OSError as exc:  # logging must never cost the training run
        log.warning("W&B: the run's log was not saved to the W&B run (%s)", exc)


def summary_fields(summary: dict | RunSummary) -> dict:
    """What W&B's run table should show for a finished (or failed) run."""
    s = summary if isinstance(summary, RunSummary) else RunSummary.from_dict(summary)
    metric = str(s.optimized_metric or "")
    # validation at the step the run reports (what ranks), and the test split evaluated once after training
    out = {name: s.get(name) for name in HEADLINE_FIELDS}
    out.update(
        {
            # the step the objective was measured at: the reported (best validation) step for validation metrics
            "objective_step": s.best_step if s.best_step is not None and measured_periodically(metric) else s.steps,
            "runtime_s": s.runtime_s,
            "final/reward": s.reward,
            # what the run cost (run/cost.run_cost); the sweep report sums them
            "cost/device_seconds": s.device_seconds,
            # the processes that trained it (distributed=...): what a device second of this run is a share of
            "world_size": (s.distributed or {}).get("world_size", 1),
            "cost/generated_tokens": s.generated_tokens,
            "cost/tokens_per_s": s.tokens_per_s,
        }
    )
    for name, value in (s.val_rewards or {}).items():
        out[f"val_rewards/{name}"] = value
    for name, value in (s.test_rewards or {}).items():
        out[f"test_rewards/{name}"] = value
    for name, value in (s.train_rewards or {}).items():
        out[f"final/rewards/{name}"] = value
    for name, cost in (s.reward_cost or {}).items():  # what each term cost in training (run/cost.reward_cost)
        if isinstance(cost, dict):
            out[f"reward_cost/{name}/share"] = cost.get("share")
            out[f"reward_cost/{name}/seconds"] = cost.get("seconds")
    trial = s.trial or {}
    for key in ("number", "state"):
        if trial.get(key) is not None:
            out[f"trial/{key}"] = trial[key]
    if s.error:
        out["error"] = s.error[:1000]
    return {k: v for k, v in out.items() if v is not None}


class CompletionsTable(TrainerCallback):
    """A ``completions`` table every ``every`` steps: step, prompt, completion, one column per reward, advantage.

    TRL's ``log_completions`` builds the same table but at every logging step (every step at ``logging_steps=1``),
    prints it to the terminal with rich and writes a parquet file each time; this reads the same buffer at the
    steps asked for only."""

    def __init__(self, run: Any, trainer: Any, every: int):
        self.run, self.trainer, self.every = run, trainer, every
        self.table_step = -1

    def on_log(self, args, state, control, logs=None, **kwargs):
        # TRL logs the last step twice (metrics, then train_runtime & co.): one table per step is enough
        if not state.is_world_process_zero or state.global_step % self.every or state.global_step == self.table_step:
            return
        self.table_step = state.global_step
        table = self._table(state.global_step)
        if table is not None:
            self.run.log({"completions": table, STEP_KEY: state.global_step})

    def _table(self, step: int):
        import wandb

        logs = latest_completions(self.trainer)
        if logs is None:
            return None
        rewards = {name: list(values) for name, values in logs["rewards"].items()}
        table = wandb.Table(columns=["step", "prompt", "completion", *rewards, "advantage"])
        advantages = list(logs["advantages"])
        for i, (prompt, completion) in enumerate(zip(logs["prompt"], logs["completion"])):
            scores = [values[i] if i < len(values) else None for values in rewards.values()]
            table.add_data(step, prompt, completion, *scores, advantages[i] if i < len(advantages) else None)
        return table
