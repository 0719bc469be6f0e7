"""The test split is touched once: nothing that runs before training ends (validation, the best step, the
Optuna probe) sees a test prompt, and the test evaluation runs after it, on the weights the run reports."""

from __future__ import annotations

import json

import pytest

from grpo_sweep.run.results import question_key, read_outcomes

from .conftest import FAST, compose


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A real run whose every generation for an evaluation is recorded, with whether training had ended."""
    import grpo_sweep.backends.trl_backend as trl_backend
    import grpo_sweep.run.train as train_module
    from grpo_sweep.data import load_splits

    run_dir = tmp_path_factory.mktemp("run")
    overrides = FAST + ["trainer.eval.every_steps=2", "trainer.eval.k=2"]
    cfg = compose(overrides)
    phase = {"ended": False}
    seen: list[tuple[bool, str]] = []
    real_generate, real_final = trl_backend.generate, train_module.final_evaluations

    def generate(model, tokenizer, prompts, *args, **kwargs):
        seen.extend((phase["ended"], question_key(p)) for p in prompts)
        return real_generate(model, tokenizer, prompts, *args, **kwargs)

    def final_evaluations(*args, **kwargs):
        # validation at the last step belongs to the choosing part: it runs first inside, before any test prompt
        phase["ended"] = True
        return real_final(*args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(trl_backend, "generate", generate)
    mp.setattr(train_module, "final_evaluations", final_evaluations)
    try:
        summary = train_module.train(cfg, run_dir, overrides=overrides)
    finally:
        mp.undo()
    splits = load_splits(cfg.data, need_ground_truth=True)
    keys = {
        name: {question_key(p) for p in getattr(splits, name)["prompt"]} for name in ("train", "validation", "test")
    }
    return run_dir, summary, seen, keys


def test_no_test_prompt_is_evaluated_before_training_ends(recorded_run):
    _, summary, seen, keys = recorded_run
    before_end = {key for ended, key in seen if not ended}
    assert before_end, "validation ran during training"
    assert before_end <= keys["validation"]
    assert not before_end & keys["test"]
    after_end = {key for ended, key in seen if ended}
    assert keys["test"] <= after_end  # the test split is evaluated, after training
    assert summary["eval_steps"] == [0, 2, 4, 6]


def test_the_three_splits_are_disjoint(recorded_run):
    *_, keys = recorded_run
    assert not keys["train"] & keys["validation"]
    assert not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]


def test_summary_and_outcomes_name_validation_and_test_apart(recorded_run):
    run_dir, summary, _, keys = recorded_run
    for key in (
        "val_accuracy",
        "val_accuracy_before",
        "test_accuracy",
        "test_accuracy_before",
        "test_pass_at_k",
        "base_model_sha256",
        "reported_step",
    ):
        assert key in summary, key
    assert summary["objective"] == summary["val_accuracy"]
    test = read_outcomes(run_dir, "test")
    assert set(test) == keys["test"]
    assert summary["test_accuracy"] == pytest.approx(sum(v for v in test.values() if v is not None) / len(test))
    assert set(read_outcomes(run_dir, "val")) == keys["validation"]
    assert set(read_outcomes(run_dir, "test_before")) == keys["test"]
    assert read_outcomes(run_dir, "test", field="pass_at_k") is not None
    # the reported step is the best validation step, and its validation figure is the summary's
    rows = {
        r["step"]: r
        for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
        if "val/accuracy" in r
    }
    assert summary["reported_step"] == summary["best_step"]
    assert (
        summary["val_accuracy"]
        == rows[summary["reported_step"]]["val/accuracy"]
        == max(r["val/accuracy"] for r in rows.values())
    )


def test_test_metric_cannot_be_the_objective():
    from grpo_sweep.run.validate import ConfigError, validate

    with pytest.raises(ConfigError, match="optimized_metric=test_accuracy: the test split only measures"):
        validate(compose(FAST + ["optimized_metric=test_accuracy"]))
