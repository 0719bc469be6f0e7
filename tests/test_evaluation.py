"""Held-out evaluation: before/during/after training, strict vs lenient accuracy, pass@k / maj@k, the best step."""

from __future__ import annotations

import json

import pytest

from grpo_sweep.run.files import read_jsonl
from grpo_sweep.run.record import Sampled, Scores

from .conftest import FAST, compose, launch_here


# -- the scorers, on completions we write ourselves ---------------------------------------------------------------
class ScriptedBackend:
    """Generates fixed texts: greedy answers from ``greedy``, sampled ones from ``samples`` in order."""

    def __init__(self, greedy: list[str], samples: list[str] | None = None):
        self.greedy, self.samples, self.calls = greedy, samples or [], []

    def generate(self, model, tokenizer, prompts, decoding, batch_size=32):
        self.calls.append((len(prompts), decoding.temperature))
        return list(self.greedy[: len(prompts)] if decoding.greedy else self.samples[: len(prompts)])


def fake_tokenizer(text, add_special_tokens=False):
    return {"input_ids": list(range(len(text.split())))}


def evaluator(backend, truths: list[str], overrides: list[str] = ()):
    import datasets

    from grpo_sweep.rewards.mix import build_mix
    from grpo_sweep.run.evaluate import Evaluator

    cfg = compose(list(overrides))
    held_out = datasets.Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"q{i}"}], "ground_truth": t} for i, t in enumerate(truths)]
    )
    funcs, _ = build_mix(cfg.reward_mix, cfg.trainer)
    return Evaluator(backend, fake_tokenizer, held_out, funcs, cfg)


def answered(text: str) -> str:
    return f"<think>\nwork\n</think>\n<answer>\n{text}\n</answer>"


def test_strict_accuracy_needs_the_format_lenient_does_not():
    backend = ScriptedBackend([answered("12"), "so it is 7", answered("3"), "12 then 4"])
    result = evaluator(backend, ["12", "7", "4", "4"]).greedy(model=None)
    assert result.scores.accuracy == 0.25  # only the first is right *in the asked format*
    assert result.scores.accuracy_lenient == 0.75  # the right number is the last one in 1, 2 and 4
    assert result.scores.rewards["correct"] == 0.25 and result.scores.prompts == 4
    assert [o["accuracy"] for o in result.outcomes] == [1.0, 0.0, 0.0, 0.0]  # one row per question
    assert [s["accuracy_lenient"] for s in result.samples] == [1.0, 1.0, 0.0, 1.0]


def test_pass_and_majority_at_k():
    # 3 prompts x k=4 samples: prompt 0 right once (pass, no majority), prompt 1 right three times (both),
    # prompt 2 never right
    samples = (
        [answered(a) for a in ["1", "2", "2", "5"]]
        + [answered(a) for a in ["7", "7", "8", "7"]]
        + [answered(a) for a in ["0", "0", "0", "0"]]
    )
    backend = ScriptedBackend([answered("0")] * 3, samples)
    ev = evaluator(backend, ["5", "7", "9"], ["trainer.eval.k=4", "trainer.eval.temperature=0.8"])
    result, outcomes = ev.sampled(model=None)
    assert result == Sampled(4, pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert [(o["pass_at_k"], o["maj_at_k"]) for o in outcomes] == [(1.0, 0.0), (1.0, 1.0), (0.0, 0.0)]
    assert backend.calls == [(12, 0.8)]


def test_majority_tie_goes_to_the_first_sampled_answer():
    samples = [answered(a) for a in ["3", "5", "5", "3"]]
    ev = evaluator(ScriptedBackend([], samples), ["3"], ["trainer.eval.k=4"])
    assert ev.sampled(model=None)[0].maj_at_k == 1.0
    ev = evaluator(ScriptedBackend([], samples), ["5"], ["trainer.eval.k=4"])
    assert ev.sampled(model=None)[0].maj_at_k == 0.0


def test_k_zero_turns_sampling_off():
    backend = ScriptedBackend([answered("1")])
    assert evaluator(backend, ["1"], ["trainer.eval.k=0"]).sampled(model=None) is None
    assert backend.calls == []


# -- the best step -------------------------------------------------------------------------------------------------
def test_best_step_keeps_the_best_adapter_and_ties_go_later(tmp_path):
    from grpo_sweep.run.evaluate import PeriodicEval

    saved = []

    def save(model, target):
        (target / "lora").mkdir(parents=True)
        (target / "lora" / "weights").write_text(str(model))
        saved.append(model)
        return target / "lora"

    periodic = PeriodicEval(
        evaluator=None, run_dir=tmp_path, every=10, metric="val_accuracy", write=lambda row: None, save=save
    )
    for step, acc in [(0, 0.1), (10, 0.5), (20, 0.3), (30, 0.5)]:
        periodic.offer(step, Scores(acc), model=f"model@{step}")
    assert (periodic.best_step, periodic.best_value, periodic.best_adapter) == (30, 0.5, "best/lora")
    assert saved == ["model@0", "model@10", "model@30"]  # 20 was worse: not saved
    assert (tmp_path / "best/lora/weights").read_text() == "model@30"
    assert json.loads((tmp_path / "best/best.json").read_text())["step"] == 30
    # the final adapter is already saved in lora/: when it is the best, best/ is not a second copy
    periodic.offer(40, Scores(0.9), model="final", saved=tmp_path / "lora")
    assert (periodic.best_step, periodic.best_adapter) == (40, "lora")
    assert not (tmp_path / "best").exists()


def test_a_resume_keeps_only_a_best_step_it_still_has(tmp_path):
    from grpo_sweep.run.evaluate import BEST_DIR, BEST_RECORD, PeriodicEval

    (tmp_path / BEST_DIR / "lora").mkdir(parents=True)
    (tmp_path / BEST_DIR / BEST_RECORD).write_text(json.dumps({"step": 20, "value": 0.5, "adapter": "best/lora"}))
    kept = [{"step": 0, "val/accuracy": 0.0}, {"step": 20, "val/accuracy": 0.5}]
    periodic = PeriodicEval(None, tmp_path, 10, "val_accuracy", lambda r: None, None, history=kept)
    assert (periodic.best_step, periodic.best_value) == (20, 0.5)
    periodic = PeriodicEval(None, tmp_path, 10, "val_accuracy", lambda r: None, None, history=kept[:1])
    assert periodic.best_step is None and not (tmp_path / BEST_DIR).exists()  # step 20 was dropped by the resume


def test_selection_metric():
    from grpo_sweep.run.evaluate import selection_metric

    assert selection_metric("val_accuracy") == "val_accuracy"
    assert selection_metric("best.val_rewards.xmlcount") == "val_rewards.xmlcount"
    assert selection_metric("reward") == "val_accuracy"  # not measured during training: best validation accuracy


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.eval.k=-1", "trainer.eval.k=-1: must be >= 0"),
        ("trainer.eval.every_steps=-5", "trainer.eval.every_steps=-5: must be >= 0"),
        ("trainer.eval.temperature=0", "k samples at temperature 0 are k copies of the greedy answer"),
        ("optimized_metric=best.reward", "optimized_metric=best.reward: the best step is chosen among"),
    ],
)
def test_bad_eval_settings_fail_in_one_line(override, message):
    from grpo_sweep.run.validate import ConfigError, validate

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")) as info:
        validate(compose([override]))
    assert "\n" not in str(info.value)


# -- a real run ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory):
    from omegaconf import OmegaConf

    from grpo_sweep.run.train import train

    run_dir = tmp_path_factory.mktemp("run")
    overrides = FAST + ["trainer.eval.every_steps=2", "optimized_metric=best.val_rewards.xmlcount"]
    cfg = compose(overrides)
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")  # as Hydra writes it (generate reads it)
    return run_dir, train(cfg, run_dir, overrides=overrides)


def test_a_run_is_evaluated_before_during_and_after_training(evaluated_run):
    run_dir, summary = evaluated_run
    rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "val/accuracy" in r]
    assert [r["step"] for r in rows] == [0, 2, 4, 6] == summary["eval_steps"]
    for row in rows:
        assert {"val/accuracy", "val/accuracy_lenient", "val/xmlcount", "val/correct", "val/runtime"} <= set(row)
    assert rows[0]["val/accuracy"] == summary["val_accuracy_before"]
    assert rows[0]["val/xmlcount"] == summary["val_rewards_before"]["xmlcount"]
    reported = next(r for r in rows if r["step"] == summary["reported_step"])
    assert reported["val/xmlcount"] == summary["val_rewards"]["xmlcount"]
    for key in (
        "val_accuracy",
        "val_accuracy_before",
        "test_accuracy",
        "test_accuracy_before",
        "test_accuracy_lenient",
        "test_pass_at_k",
        "test_maj_at_k",
    ):
        assert 0.0 <= summary[key] <= 1.0, key
    assert summary["test_k"] == 4
    [test_row] = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "test/accuracy" in r]
    assert test_row["test/accuracy"] == summary["test_accuracy"] and test_row["step"] == 6
    assert summary["timings_s"]["eval_periodic"] > 0


def test_the_best_step_is_in_the_summary_and_its_adapter_is_kept(evaluated_run):
    run_dir, summary = evaluated_run
    by_step = {r["step"]: r["val/xmlcount"] for r in read_jsonl(run_dir / "metrics.jsonl") if "val/xmlcount" in r}
    best_value = max(by_step.values())
    best_step = max(step for step, value in by_step.items() if value == best_value)  # ties go later
    assert (summary["best_step"], summary["best_objective"]) == (best_step, best_value)
    assert summary["best_metric"] == "val_rewards.xmlcount"
    assert summary["objective"] == best_value  # optimized_metric=best.val_rewards.xmlcount
    assert summary["reported_step"] == best_step and summary["adapter"] == summary["best"]["adapter"]
    adapter = run_dir / summary["best"]["adapter"]
    assert (adapter / "adapter_model.safetensors").is_file()
    assert summary["best"]["adapter"] == ("lora" if best_step == 6 else "best/lora")


def test_generate_loads_the_best_adapter(evaluated_run, capsys, monkeypatch):
    from grpo_sweep.backends import trl_backend as hf
    from grpo_sweep.run.generate import main

    run_dir, summary = evaluated_run
    loaded = []
    real = hf.load_trained
    monkeypatch.setattr(hf, "load_trained", lambda cfg, where: loaded.append(where) or real(cfg, where))
    assert main([str(run_dir), "Calculate 1 + 2.", "--best", "--max-new-tokens", "4", "--seed", "0"]) == 0
    assert loaded == [(run_dir / summary["best"]["adapter"]).parent]
    (run_dir / "summary.json").rename(run_dir / "summary.moved")
    try:
        assert main([str(run_dir), "Calculate 1 + 2.", "--best"]) == 2
        assert "has no best adapter" in capsys.readouterr().err
    finally:
        (run_dir / "summary.moved").rename(run_dir / "summary.json")


def test_an_evaluation_that_fails_is_reported_and_the_adapter_kept(tmp_path):
    # the reward works in training (TRL passes trainer_state) and raises in every evaluation (validation and test)
    result = launch_here(
        FAST
        + [
            "+reward_mix.evalbomb.fn=tests.failing_rewards.fails_outside_training",
            "+reward_mix.evalbomb.weight=0.5",
            "hydra.run.dir=" + str(tmp_path / "run"),
        ],
        tmp_path,
    )
    assert result.returncode == 1, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("grpo-sweep: evaluation after training failed: RewardFailure") and "adapter is saved" in last
    assert "Traceback" not in result.stderr.split("evaluation after training failed")[-1]
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert summary["status"] == "failed" and summary["failed_in"] == "evaluation"
    assert summary["steps"] == 6 and summary["train_rewards"]["evalbomb"] == 0.0
    assert summary["eval_error"].startswith("RewardFailure")  # the step-0 evaluation failed too, training went on
    assert (tmp_path / "run/lora/adapter_model.safetensors").is_file()
    rows = read_jsonl(tmp_path / "run/metrics.jsonl")
    assert [r["step"] for r in rows if "val/error" in r] == [0]
    assert len([r for r in rows if "reward" in r]) == 6
