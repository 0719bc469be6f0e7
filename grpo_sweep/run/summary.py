"""The schema of a run's ``summary.json``: one dataclass that the writers (train.summarize, results.record_failure)
and the readers (the sweep table, report and status, the Optuna study view, the W&B summary) share.

Key names are the file's key names (docs/outputs.md). Keys this schema does not name (a pruned trial's
``pruned_at_step``, an Optuna ``trial`` block's siblings from a newer version, ...) are kept in ``extra`` and written
back, so an older or newer summary still loads and round-trips. Keys are written back in the order they were read:
a summary read and written again is the same file.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

# A summary.json is a run's record whatever happened to it; only its status is always there.
REQUIRED = ("status",)


@dataclass
class RunSummary:
    status: str
    # the objective and the evaluations (docs/evaluation.md). Everything that chooses (the best step, the adapter the
    # run reports, Optuna, the sweep's ranking) reads validation; the test split is evaluated after training only,
    # on the adapter the run reports, and before training's weights (``test_*_before``), and feeds back nothing.
    optimized_metric: str | None = None
    objective: Any = None
    val_accuracy: float | None = None
    val_accuracy_lenient: float | None = None
    val_rewards: dict | None = None
    val_samples: int | None = None
    test_accuracy: float | None = None
    test_accuracy_lenient: float | None = None
    test_pass_at_k: float | None = None
    test_maj_at_k: float | None = None
    test_k: int | None = None
    test_rewards: dict | None = None
    test_samples: int | None = None
    test_accuracy_before: float | None = None
    test_accuracy_lenient_before: float | None = None
    # sha256 of the base model's weights file(s): runs that claim the same start can be checked to have had it
    base_model_sha256: str | None = None
    # training reward: mean of the last / first fifth of the logged steps
    reward: float | None = None
    reward_first: float | None = None
    train_rewards: dict | None = None
    train_rewards_first: dict | None = None
    reward_weights: dict | None = None
    steps: int | None = None
    runtime_s: float | None = None
    overrides: list | None = None
    run_dir: str | None = None
    versions: dict | None = None
    # validation before training and at the step the run reports (train.periodic_fields)
    val_accuracy_before: float | None = None
    val_accuracy_lenient_before: float | None = None
    val_rewards_before: dict | None = None
    eval_steps: list | None = None
    # the step whose weights the run reports (trainer.eval.report: the best validation step, or the last)
    reported_step: int | None = None
    best_metric: str | None = None
    best_step: int | None = None
    best_objective: float | None = None
    best: dict | None = None
    eval_error: str | None = None
    # what the run left and what it cost
    adapter: str | None = None
    resumed_from_steps: list | None = None
    reward_failures: dict | None = None
    # per reward term: seconds spent in it in training, their share of the training time, calls (run/cost.reward_cost)
    reward_cost: dict | None = None
    timings_s: dict | None = None
    device_seconds: float | None = None
    generated_tokens: int | None = None
    tokens_per_s: float | None = None
    device: dict | None = None
    # a run over several processes: {strategy, world_size, nodes} (distributed=none: 1 process, 1 node)
    distributed: dict | None = None
    # a run that did not finish (results.record_failure) and an Optuna trial's block (search/worker.py)
    error: str | None = None
    traceback: str | None = None
    failed_in: str | None = None
    trial: dict | None = None
    # keys this schema does not name, kept as read
    extra: dict = field(default_factory=dict)
    # the keys as the file held them, in its order (a key read as null is written back as null)
    key_order: tuple = field(default=(), repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Any) -> "RunSummary":
        """The summary of ``data`` (a summary.json's object); ValueError, one line, when it is not one."""
        if not isinstance(data, dict):
            raise ValueError(f"{SUMMARY_NAME} holds a JSON {type(data).__name__}, not an object")
        missing = [key for key in REQUIRED if key not in data]
        if missing:
            raise ValueError(f"{SUMMARY_NAME} has no {', '.join(missing)} (keys: {sorted(data)})")
        if not isinstance(data["status"], str):
            raise ValueError(f"{SUMMARY_NAME}'s status is {data['status']!r}, not a string")
        known = {k: v for k, v in data.items() if k in FIELD_NAMES}
        extra = {k: v for k, v in data.items() if k not in FIELD_NAMES}
        return cls(**known, extra=extra, key_order=tuple(data))

    def to_dict(self) -> dict:
        """The summary.json object: the keys read back in their order, then every other field that is set, then
        the extra keys. A field never set (None, not read from a file) is left out, as the writers always did."""
        values = {name: getattr(self, name) for name in FIELD_NAMES}
        out = {}
        for key in self.key_order:
            if key in values:
                out[key] = values[key]
            elif key in self.extra:
                out[key] = self.extra[key]
        for name, value in values.items():
            if name not in out and value is not None:
                out[name] = value
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out

    def get(self, key: str, default: Any = None) -> Any:
        """A key by its summary.json name, named in the schema or not (for dotted metrics, see results.lookup)."""
        if key in FIELD_NAMES:
            value = getattr(self, key)
            return default if value is None else value
        return self.extra.get(key, default)


SUMMARY_NAME = "summary.json"
FIELD_NAMES = tuple(f.name for f in fields(RunSummary) if f.name not in ("extra", "key_order"))


# The objective's names, for the readers that must name one rather than read an attribute (the sweep's verdicts and
# tables, the Optuna study report): the default objective, its key in metrics.jsonl, and the val -> test counterpart.
VAL_ACCURACY = "val_accuracy"
VAL_ACCURACY_LOGGED = "val/accuracy"  # metrics.jsonl's key, at every periodic validation
VAL_PREFIX, TEST_PREFIX = "val_", "test_"
# the per-question field (outcomes/<split>.jsonl) that each accuracy of a summary averages
OUTCOME_FIELDS = {VAL_ACCURACY: "accuracy", "val_accuracy_lenient": "accuracy_lenient",
                  "test_accuracy": "accuracy", "test_accuracy_lenient": "accuracy_lenient"}


def test_counterpart(metric: str | None) -> str | None:
    """The summary key the test split measures for a validation metric (``test_accuracy`` for ``val_accuracy``,
    ``test_rewards.fmt`` for ``val_rewards.fmt``); None for a metric not measured on validation."""
    if metric and metric.startswith(VAL_PREFIX):
        return TEST_PREFIX + metric[len(VAL_PREFIX):]
    return None
