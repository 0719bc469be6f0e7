"""summary.json's one schema (grpo_sweep/run/record.py): what is written reads back the same, an older or newer
summary with keys the schema does not name still loads and keeps them, and a file that is not a summary is
reported in one line by the readers that many runs go through."""

from __future__ import annotations

import json

import pytest

from grpo_sweep.reading.results import UNREADABLE, SweepResults
from grpo_sweep.run.record import FIELD_NAMES, RunSummary
from grpo_sweep.run.results import SUMMARY, read_run_summary, record_failure, write_summary
from grpo_sweep.tracking.wandb_logger import summary_fields

COMPLETED = {
    "status": "completed",
    "optimized_metric": "val_accuracy",
    "objective": 0.5,
    "val_accuracy": 0.5,
    "test_accuracy": 0.45,
    "test_accuracy_lenient": None,
    "test_rewards": {"correct": 0.45},
    "reward": 0.25,
    "reward_first": 0.1,
    "base_model_sha256": "0" * 64,
    "train_rewards": {"correct": 0.25},
    "steps": 4,
    "runtime_s": 1.5,
    "overrides": ["lora.r=8"],
    "timings_s": {"train": 1.0},
    "device_seconds": 1.2,
    "generated_tokens": 640,
    "tokens_per_s": 533.3,
}


def test_written_summary_reads_back_the_same(tmp_path):
    written = write_summary(tmp_path, COMPLETED)
    text = (tmp_path / SUMMARY).read_text()
    assert json.loads(text) == COMPLETED == written
    assert list(json.loads(text)) == list(COMPLETED)  # same keys in the same order, nulls kept
    summary, problem = read_run_summary(tmp_path)
    assert problem is None
    assert summary.val_accuracy == 0.5 and summary.overrides == ["lora.r=8"] and summary.test_accuracy_lenient is None
    assert summary.extra == {}
    write_summary(tmp_path, summary)  # read, written again: the same file
    assert (tmp_path / SUMMARY).read_text() == text


def test_unknown_keys_of_an_older_or_newer_summary_survive(tmp_path):
    old = {"status": "pruned", "objective": 0.2, "pruned_at_step": 6, "intermediate": {"2": 0.1}, "from_v9": [1]}
    (tmp_path / SUMMARY).write_text(json.dumps(old))
    summary, problem = read_run_summary(tmp_path)
    assert problem is None and summary.status == "pruned" and summary.objective == 0.2
    assert summary.extra == {"pruned_at_step": 6, "intermediate": {"2": 0.1}, "from_v9": [1]}
    assert summary.get("pruned_at_step") == 6 and summary.get("objective") == 0.2
    assert summary.to_dict() == old and list(summary.to_dict()) == list(old)


def test_a_summary_built_from_the_dataclass_leaves_unset_fields_out():
    built = RunSummary(status="failed", error="boom", overrides=["a=1"], failed_in="evaluation", extra={"custom": 1})
    assert list(built.to_dict().items()) == [
        ("status", "failed"),
        ("overrides", ["a=1"]),
        ("error", "boom"),
        ("failed_in", "evaluation"),
        ("custom", 1),
    ]


def test_failure_record_goes_through_the_schema(tmp_path):
    written = record_failure(
        tmp_path, "refused: bad", ["x=1"], "Traceback...\nValueError: bad", 2.0, trial={"number": 3}
    )
    summary, problem = read_run_summary(tmp_path)
    assert problem is None and summary.to_dict() == written
    assert (summary.status, summary.error, summary.overrides, summary.trial) == (
        "failed",
        "refused: bad",
        ["x=1"],
        {"number": 3},
    )
    assert list(json.loads((tmp_path / SUMMARY).read_text())) == [
        "status",
        "error",
        "overrides",
        "run_dir",
        "traceback",
        "runtime_s",
        "trial",
    ]


@pytest.mark.parametrize(
    "content, expected",
    [
        ('{"objective": 0.5, "steps": 3}', "summary.json has no status (keys: ['objective', 'steps'])"),
        ("[1, 2]", "summary.json holds a JSON list, not an object"),
        ('{"status": 3}', "summary.json's status is 3, not a string"),
        ('{"status": "compl', "summary.json is not valid JSON (half-written?)"),
    ],
)
def test_not_a_summary_is_one_line_naming_what_is_wrong(tmp_path, content, expected):
    run = tmp_path / "0"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "config.yaml").write_text("{}\n")
    (run / SUMMARY).write_text(content)
    data, problem = read_run_summary(run)
    assert data is None and problem.startswith(expected) and "\n" not in problem
    [shown] = SweepResults.read(tmp_path).summaries  # the sweep's table and report show it, the other runs still count
    assert (shown.status, shown.error) == (UNREADABLE, problem)


def test_writing_a_summary_without_a_status_is_refused(tmp_path):
    with pytest.raises(ValueError, match="has no status"):
        write_summary(tmp_path, {"objective": 1.0})
    assert not (tmp_path / SUMMARY).exists()


def test_schema_names_what_docs_outputs_lists():
    for key in (
        "status",
        "objective",
        "val_accuracy",
        "val_accuracy_before",
        "test_accuracy",
        "test_accuracy_before",
        "test_accuracy_lenient",
        "test_pass_at_k",
        "base_model_sha256",
        "reported_step",
        "reward",
        "reward_first",
        "steps",
        "overrides",
        "error",
        "timings_s",
        "device_seconds",
        "generated_tokens",
        "tokens_per_s",
        "best",
        "best_step",
        "trial",
    ):
        assert key in FIELD_NAMES


def test_wandb_summary_reads_the_schema():
    fields = summary_fields(RunSummary.from_dict({**COMPLETED, "trial": {"number": 2, "state": "COMPLETE"}}))
    assert fields["objective"] == 0.5 and fields["objective_step"] == 4 and fields["cost/generated_tokens"] == 640
    assert fields["trial/number"] == 2 and "test_accuracy_lenient" not in fields
    assert summary_fields(COMPLETED) == {k: v for k, v in fields.items() if not k.startswith("trial/")}


def test_the_record_is_frozen_and_reads_as_the_file_it_writes(tmp_path):
    import dataclasses

    summary = RunSummary.from_dict(write_summary(tmp_path, COMPLETED))
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.status = "failed"
    trial = dataclasses.replace(summary, trial={"number": 1, "state": "COMPLETE"})
    assert trial.to_dict() == {**COMPLETED, "trial": {"number": 1, "state": "COMPLETE"}}
    assert list(trial.to_dict()) == [*COMPLETED, "trial"]  # the keys as read, then the new one
    assert dict(summary) == COMPLETED and summary["steps"] == 4 and "test_accuracy_lenient" in summary
    with pytest.raises(KeyError):
        summary["error"]  # not in the file


def test_one_function_turns_the_evaluations_reports_into_the_record():
    """A run that trained, with and without its test evaluation (a pruned run has none): every test field is
    there, null where nothing was measured, and the objective is looked up among the figures."""
    from grpo_sweep.run.record import Sampled, Scores, TestReport, ValReport, trained_summary
    from grpo_sweep.run.results import lookup

    val = ValReport(
        reported=Scores(0.5, 0.6, {"correct": 0.5}, 64),
        before=Scores(0.25, 0.3, {"correct": 0.25}, 64),
        steps=[0, 4],
        reported_step=4,
        metric="val_accuracy",
        best_step=4,
        best_value=0.5,
        best_adapter="lora",
        best=Scores(0.5, 0.6, {"correct": 0.5}, 64),
    )
    test = TestReport(Scores(0.45, 0.5, {"correct": 0.45}, 64), Sampled(4, 0.7, 0.5), Scores(0.2, 0.25, {}, 64))
    training = {"reward": 0.25, "steps": 4}
    objective = lambda metric: lambda figures: lookup(figures, metric)  # noqa: E731
    done = trained_summary(
        "completed", "best.val_accuracy", training, val, test, objective("best.val_accuracy"), adapter="lora"
    )
    assert (
        done.val_accuracy,
        done.val_accuracy_before,
        done.val_samples,
        done.test_accuracy,
        done.test_pass_at_k,
        done.test_k,
        done.test_accuracy_lenient_before,
    ) == (0.5, 0.25, 64, 0.45, 0.7, 4, 0.25)
    assert done.best == {
        "step": 4,
        "adapter": "lora",
        "val_accuracy": 0.5,
        "val_accuracy_lenient": 0.6,
        "val_rewards": {"correct": 0.5},
    }
    assert done.objective == 0.5 and done.adapter == "lora"
    pruned = trained_summary("pruned", "val_accuracy", training, val, None, objective("val_accuracy"))
    tested = [key for key in pruned.to_dict() if key.startswith("test_")]
    assert tested == [
        "test_accuracy",
        "test_accuracy_lenient",
        "test_pass_at_k",
        "test_maj_at_k",
        "test_k",
        "test_rewards",
        "test_samples",
        "test_accuracy_before",
        "test_accuracy_lenient_before",
    ]
    assert all(pruned[key] is None for key in tested) and pruned.objective == 0.5
