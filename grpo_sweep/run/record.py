"""A run's record and the schema of its ``summary.json``: one frozen dataclass that the writers
(``trained_summary``, from the evaluations' typed reports; ``results.record_failure``) and the readers (the sweep
table, report and status, the Optuna study view, the W&B summary) share. The names of the validation figures are
spelled here only (``VAL_ACCURACY``, ``val_figures``, ``val_row``); every other module reads the record's attributes.

Key names are the file's key names (docs/outputs.md). Keys this schema does not name (a pruned trial's
``pruned_at_step``, an Optuna ``trial`` block's siblings from a newer version, ...) are kept in ``extra`` and written
back, so an older or newer summary still loads and round-trips. Keys are written back in the order they were read:
a summary read and written again is the same file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# A summary.json is a run's record whatever happened to it; only its status is always there.
REQUIRED = ("status",)


@dataclass(frozen=True)
class RunSummary(Mapping):
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
    # scheduled weights (rewards/schedule.py): term -> {kind, knots [[progress, weight], ...]}; the weight each
    # step used is metrics.jsonl's reward_weights/<term>
    reward_schedule: dict | None = None
    steps: int | None = None
    runtime_s: float | None = None
    overrides: list | None = None
    run_dir: str | None = None
    versions: dict | None = None
    # validation before training and at the step the run reports (ValReport)
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
    # a GPU shared with other runs (hydra.launcher.runs_per_gpu=K): {runs_per_gpu, gpu, neighbours (their run dirs),
    # share (of the GPU over the run's time; device_seconds is already split by it)} (run/sharing.py)
    gpu_sharing: dict | None = None
    # a run that did not finish (results.record_failure) and an Optuna trial's block (search/optuna/worker.py)
    error: str | None = None
    traceback: str | None = None
    failed_in: str | None = None
    trial: dict | None = None
    # keys this schema does not name, kept as read
    extra: dict = field(default_factory=dict)
    # the keys as the file held them, in its order (a key read as null is written back as null)
    key_order: tuple = field(default=(), repr=False, compare=False)

    @classmethod
    def from_dict(cls, data: Any) -> RunSummary:
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

    # A read-only mapping of the summary.json object it writes (``summary["steps"]``, ``{**summary}``), for code that
    # reads the file's names; a key the record leaves out raises KeyError, as the file's dict would.
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())


# The names of the validation figures, as summary.json and metrics.jsonl spell them; every other module names them
# through these (a metric such as ``val_rewards.correct`` is looked up in ``val_figures``).
VAL_ACCURACY = "val_accuracy"
VAL_ACCURACY_LENIENT = "val_accuracy_lenient"
VAL_REWARDS = "val_rewards"
# metrics.jsonl's row of one validation: ``val/accuracy``, ``val/accuracy_lenient``, ``val/<reward>``, ``val/runtime``
# (``val/error`` instead when the evaluation raised)
VAL_ROW = {
    "accuracy": "val/accuracy",
    "accuracy_lenient": "val/accuracy_lenient",
    "runtime": "val/runtime",
    "error": "val/error",
    "prompts": "val/prompts",
}
VAL_ROW_PREFIX = "val/"
# the row of the test split, evaluated once after training (run/evaluate.metrics_test_row)
TEST_ROW_PREFIX = "test/"


@dataclass(frozen=True)
class Scores:
    """What one greedy evaluation of a split measured: the accuracy reward's mean, the lenient accuracy's, each
    reward's mean, over ``prompts`` prompts (None: not known, a resumed run's earlier evaluation)."""

    accuracy: float | None
    accuracy_lenient: float | None = None
    rewards: dict = field(default_factory=dict)
    prompts: int | None = None


@dataclass(frozen=True)
class Sampled:
    """The test split sampled ``k`` times a prompt: pass@k and maj@k (None: no question could be judged)."""

    k: int
    pass_at_k: float | None
    maj_at_k: float | None


@dataclass(frozen=True)
class ValReport:
    """Validation as the run reports it (``PeriodicEval.report``): before training, at the step the run reports,
    and the best step, with the per-question outcomes of the first two (None where they are not in memory)."""

    reported: Scores | None
    before: Scores | None
    steps: list
    reported_step: int
    metric: str
    best_step: int | None = None
    best_value: float | None = None
    best_adapter: str | None = None
    best: Scores | None = None
    error: str | None = None
    outcomes: list | None = None
    outcomes_before: list | None = None


@dataclass(frozen=True)
class TestReport:
    """The test split, evaluated once after training: greedy on the weights the run reports, sampled (``k`` > 0),
    and greedy on the weights before training (None where they are not known: a resumed full fine-tune)."""

    reported: Scores
    sampled: Sampled | None = None
    before: Scores | None = None


def val_figures(scores: Scores | None) -> dict:
    """One validation under summary.json's names, where a metric's name (``val_rewards.xmlcount``) finds its value."""
    scores = scores or Scores(None)
    return {
        VAL_ACCURACY: scores.accuracy,
        VAL_ACCURACY_LENIENT: scores.accuracy_lenient,
        VAL_REWARDS: dict(scores.rewards),
    }


def val_row(step: int, scores: Scores, seconds: float) -> dict:
    """The metrics.jsonl row of one validation."""
    row = {"step": step, VAL_ROW["accuracy"]: scores.accuracy, VAL_ROW["accuracy_lenient"]: scores.accuracy_lenient}
    row.update({f"{VAL_ROW_PREFIX}{name}": value for name, value in scores.rewards.items()})
    row[VAL_ROW["runtime"]] = round(seconds, 3)
    if scores.prompts is not None:  # a resumed run's summary reads its earlier evaluations back from these rows
        row[VAL_ROW["prompts"]] = scores.prompts
    return row


def row_scores(row: dict) -> Scores | None:
    """A metrics.jsonl validation row back as Scores; None for any other row (training, test, a failed validation)."""
    if not any(key.startswith(VAL_ROW_PREFIX) for key in row) or VAL_ROW["error"] in row:
        return None
    named = set(VAL_ROW.values())
    rewards = {k[len(VAL_ROW_PREFIX) :]: v for k, v in row.items() if k.startswith(VAL_ROW_PREFIX) and k not in named}
    return Scores(
        row.get(VAL_ROW["accuracy"]), row.get(VAL_ROW["accuracy_lenient"]), rewards, row.get(VAL_ROW["prompts"])
    )


def trained_summary(
    status: str,
    optimized_metric: str,
    training: dict,
    val: ValReport | None,
    test: TestReport | None,
    objective_of: Any,
    **record: Any,
) -> RunSummary:
    """The record of a run that trained, whatever its status (completed, pruned, failed in evaluation), in
    summary.json's order: the test report (None: not reached), the training record (``training``: rewards, steps,
    runtime, overrides, run_dir, versions), the validation report (None: a rank other than 0 has none), then
    ``record``'s fields (adapter, costs, timings, a pruned trial's probes, an error). ``objective_of(figures)`` finds
    the optimized metric among the evaluations' and training's figures (``results.lookup``)."""
    reported = test.reported if test else Scores(None, rewards=None)
    before = test.before if test and test.before else Scores(None)
    sampled = test.sampled if test and test.sampled else Sampled(None, None, None)
    values = dict(
        status=status,
        optimized_metric=optimized_metric,
        objective=None,
        test_accuracy=reported.accuracy,
        test_accuracy_lenient=reported.accuracy_lenient,
        test_pass_at_k=sampled.pass_at_k,
        test_maj_at_k=sampled.maj_at_k,
        test_k=sampled.k,
        test_rewards=reported.rewards,
        test_samples=reported.prompts,
        test_accuracy_before=before.accuracy,
        test_accuracy_lenient_before=before.accuracy_lenient,
        **training,
    )
    if val is not None:
        values.update(_val_fields(val))
    values["objective"] = objective_of(values)
    values.update(record)
    return RunSummary.from_dict(values)


def _val_fields(val: ValReport) -> dict:
    reported, before = val.reported or Scores(None), val.before or Scores(None)
    out = dict(
        val_accuracy=reported.accuracy,
        val_accuracy_lenient=reported.accuracy_lenient,
        val_rewards=dict(reported.rewards or {}),
        val_samples=reported.prompts,
        val_accuracy_before=before.accuracy,
        val_accuracy_lenient_before=before.accuracy_lenient,
        val_rewards_before=dict(before.rewards or {}),
        eval_steps=list(val.steps),
        reported_step=val.reported_step,
        best_metric=val.metric,
        best_step=val.best_step,
        best_objective=val.best_value,
        best=None,
    )
    if val.best_step is not None:
        best = val.best or Scores(None)
        out["best"] = dict(
            step=val.best_step,
            adapter=val.best_adapter,
            val_accuracy=best.accuracy,
            val_accuracy_lenient=best.accuracy_lenient,
            val_rewards=dict(best.rewards or {}),
        )
    if val.error:
        out["eval_error"] = val.error
    return out


class RunFailed(RuntimeError):
    """A run that ended ``failed`` with its record, ``summary``, written (it trained nothing, a reward term scored
    nothing, its evaluation raised): the caller shows the message in one line, keeps the record as it is."""

    def __init__(self, message: str, summary: RunSummary):
        super().__init__(message)
        self.summary = summary


def training_failure(steps: int, train_rewards: dict, failures: dict) -> str | None:
    """Why a run that trained to its end did not do what it claims, from its training record: no optimizer step
    (``steps``, asked for max_steps > 0), or a reward term whose every sample failed (``failures``: its counted
    failures; ``train_rewards``: its training mean, None when no training sample was scored); None when neither."""
    if not steps:
        return (
            "training made 0 optimizer steps (TRL found no full batch of prompts in the train split, e.g. more "
            "prompts a generation than train rows, or every prompt longer than trainer.max_prompt_length); "
            "nothing was trained, so nothing is reported"
        )
    dead = [name for name, failed in failures.items() if failed and train_rewards.get(name) is None]
    if dead:
        return (
            f"reward_mix.{dead[0]} failed on every sample of training ({failures[dead[0]]} failures counted, "
            f"none scored), so the run did not train on it; its warnings in the log say why; fix it, or drop it "
            f"with ~reward_mix.{dead[0]}"
        )
    return None


# What W&B's run table shows of a run (tracking/wandb_logger.summary_fields), in its order, beside the per-reward,
# cost and trial keys it adds.
HEADLINE_FIELDS = (
    "status",
    "objective",
    "optimized_metric",
    "val_accuracy",
    "val_accuracy_before",
    "val_accuracy_lenient",
    "test_accuracy",
    "test_accuracy_before",
    "test_accuracy_lenient",
    "test_accuracy_lenient_before",
    "test_pass_at_k",
    "test_maj_at_k",
    "test_k",
    "best_objective",
    "best_step",
)
# An Optuna trial's state (summary.json's ``trial.state``) for each way a run ends
TRIAL_STATES = {"completed": "COMPLETE", "pruned": "PRUNED", "failed": "FAIL"}


SUMMARY_NAME = "summary.json"
FIELD_NAMES = tuple(f.name for f in fields(RunSummary) if f.name not in ("extra", "key_order"))


# For the readers that must name a metric rather than read an attribute (the sweep's verdicts and tables, the Optuna
# study report): the default objective's key in metrics.jsonl, and the val -> test counterpart.
VAL_ACCURACY_LOGGED = VAL_ROW["accuracy"]
# a training row's weight of a scheduled reward term: reward_weights/<term> (run/train.RewardSchedule)
WEIGHT_PREFIX = "reward_weights/"
VAL_PREFIX, TEST_PREFIX = "val_", "test_"
# the per-question field (outcomes/<split>.jsonl) that each accuracy of a summary averages
OUTCOME_FIELDS = {
    VAL_ACCURACY: "accuracy",
    VAL_ACCURACY_LENIENT: "accuracy_lenient",
    "test_accuracy": "accuracy",
    "test_accuracy_lenient": "accuracy_lenient",
}


def test_counterpart(metric: str | None) -> str | None:
    """The summary key the test split measures for a validation metric (``test_accuracy`` for ``val_accuracy``,
    ``test_rewards.fmt`` for ``val_rewards.fmt``); None for a metric not measured on validation."""
    if metric and metric.startswith(VAL_PREFIX):
        return TEST_PREFIX + metric[len(VAL_PREFIX) :]
    return None
