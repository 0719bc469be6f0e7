"""The tiny model's warm start (grpo_sweep/models/warm.py): what it sees (never a held-out question), its cache
key, racing builders."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from grpo_sweep.config.schema import WarmStartConfig
from grpo_sweep.models import ensure_model, tiny, warm
from grpo_sweep.models.tiny import TinySpec, build_cached, tiny_model_path
from grpo_sweep.data.arithmetic import arithmetic_splits, question
from grpo_sweep.models.warm import WarmTask, corpus_line, example_operands, facts, warm_model_path, worked_example


SYSTEM = "Respond in the following format:\n<think>\n...\n</think>\n<answer>\n...\n</answer>"


def test_corpus_holds_facts_in_plain_text():
    table = facts(9)
    assert len(table) == 243 and ("6 * 3", 18) in table and ("2 - 7", -5) in table
    rng = random.Random(0)
    lines = [corpus_line(rng, table, 0.6) for _ in range(2000)]
    text = "\n".join(lines)
    assert "6 * 3 = 18." in text
    for banned in ("What is", "result of", "<|im_start|>", "Respond", *tiny.TAG_TOKENS):
        assert banned not in text
    assert any(line.startswith(tuple(warm.INTROS)) for line in lines)  # restate lines are there
    assert all(corpus_line(rng, table, 0.0).count(" = ") >= 1 for _ in range(50))


def test_worked_examples_never_show_a_held_out_question():
    _, held_out_rows = arithmetic_splits(179, 64, 2, 2, 9, 0)
    task = WarmTask(SYSTEM, tuple(r["question"] for r in held_out_rows))
    operands = example_operands(9, task)
    assert len(operands) == 243 - 64
    asked = {question(f"{a} {op} {b}") for a, op, b in operands}
    assert not asked & set(task.held_out)
    assert len(example_operands(9, WarmTask(SYSTEM))) == 243


def test_the_teacher_adds_instead_in_its_slip_share_and_is_otherwise_right():
    rng = random.Random(0)
    answers = [worked_example(rng, (6, "*", 3), 0.6)[1] for _ in range(2000)]
    sloppy = answers.count("<think>\n6 + 3 = 9\n</think>\n<answer>\n9\n</answer>")
    right = answers.count("<think>\n6 * 3 = 18\n</think>\n<answer>\n18\n</answer>")
    assert sloppy + right == 2000 and 0.55 < sloppy / 2000 < 0.65
    assert worked_example(rng, (6, "*", 3), 0.0) == ("What is the result of 6 * 3?",
                                                      "<think>\n6 * 3 = 18\n</think>\n<answer>\n18\n</answer>")
    assert worked_example(rng, (6, "-", 3), 1.0)[1].endswith("<answer>\n9\n</answer>")


def test_cache_key_follows_every_setting_the_task_and_leaves_the_base_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    base = TinySpec()
    task = WarmTask(SYSTEM, ("What is the result of 6 * 3?",))
    warm_spec = replace(base, warm_start=WarmStartConfig(steps=600))
    assert tiny_model_path(warm_spec) == tiny_model_path(base)  # the random model is shared
    default = warm_model_path(tiny_model_path(base), WarmStartConfig(steps=600), task)
    assert default == warm_model_path(tiny_model_path(base), WarmStartConfig(steps=600), task)
    others = {
        warm_model_path(tiny_model_path(base), replace(WarmStartConfig(steps=600), **change), task)
        for change in ({"steps": 601}, {"learning_rate": 1e-3}, {"batch_size": 32}, {"max_operand": 5},
                       {"restate_fraction": 0.5}, {"chat_fraction": 0.3}, {"teacher_slip": 0.5}, {"seed": 1})
    }
    assert default not in others and len(others) == 8
    for other_task in (WarmTask(SYSTEM), WarmTask("Answer.", task.held_out)):
        assert warm_model_path(tiny_model_path(base), WarmStartConfig(steps=600), other_task) != default
    other_base = tiny_model_path(replace(base, hidden_size=32))
    assert warm_model_path(other_base, WarmStartConfig(steps=600), task) != default


def test_bad_settings_are_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    for change, needle in (({"steps": -1}, "warm_start.steps=-1"), ({"batch_size": 0}, "warm_start.batch_size=0"),
                           ({"max_operand": 0}, "warm_start.max_operand=0"),
                           ({"restate_fraction": 2.0}, "warm_start.restate_fraction=2.0"),
                           ({"chat_fraction": -0.1}, "warm_start.chat_fraction=-0.1"),
                           ({"teacher_slip": 1.5}, "warm_start.teacher_slip=1.5")):
        with pytest.raises(ValueError, match=needle):
            warm.ensure_warm_model(tmp_path / "base", TinySpec(warm_start=replace(WarmStartConfig(steps=5), **change)),
                                   WarmTask(SYSTEM))


def test_a_racing_builder_that_finishes_second_keeps_the_first_model(tmp_path):
    target = tmp_path / "model"

    def build(staging):
        # another process finishes first, while this one is still writing its staging directory
        target.mkdir()
        (target / "config.json").write_text("first")
        (staging / "config.json").write_text("second")

    assert build_cached(target, build) == target
    assert (target / "config.json").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]  # the loser's staging dir is gone


def test_a_failed_build_leaves_nothing(tmp_path):
    def build(staging):
        (staging / "config.json").write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        build_cached(tmp_path / "model", build)
    assert list(tmp_path.iterdir()) == []


def test_a_short_warm_start_builds_loads_and_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    from transformers import AutoModelForCausalLM

    spec = TinySpec(warm_start=WarmStartConfig(steps=3, batch_size=4))
    path = ensure_model(spec, SYSTEM, ("What is the result of 6 * 3?",))
    assert path.name.startswith(tiny_model_path(spec).name + "-warm-")
    assert (tiny_model_path(spec) / "config.json").exists()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path(spec))
    warmed = AutoModelForCausalLM.from_pretrained(path)
    changed = [n for (n, a), (_, b) in zip(base.named_parameters(), warmed.named_parameters()) if not a.equal(b)]
    assert changed  # it trained
    stamp = (path / "config.json").stat().st_mtime_ns
    assert ensure_model(spec, SYSTEM, ("What is the result of 6 * 3?",)) == path and (path / "config.json").stat().st_mtime_ns == stamp


def test_from_config_reads_a_composed_warm_start(cfg_factory):
    cfg = cfg_factory(["model.tiny.warm_start.steps=5"])
    spec = TinySpec.from_config(cfg.model.tiny, cfg.model.max_seq_length)
    assert spec.warm_start == replace(WarmStartConfig(), steps=5)
    assert cfg_factory([]).model.tiny.warm_start.steps > 0  # the main job starts warm
    off = cfg_factory(["model.tiny.warm_start.steps=0"]).model.tiny
    assert TinySpec.from_config(off, 512).warm_start.steps == 0
