"""The tiny model's warm start (grpo_sweep/models/warm.py): what it sees (never a held-out question), its cache
key, racing builders."""

from __future__ import annotations

import random
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from grpo_sweep.data import held_out_questions
from grpo_sweep.data.arithmetic import arithmetic_splits, question
from grpo_sweep.models import ensure_model, tiny, warm
from grpo_sweep.models.tiny import TinySpec, WarmStartSpec, build_cached, tiny_model_path
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


def test_worked_examples_never_show_a_held_out_question(cfg_factory):
    _, validation, test = arithmetic_splits(115, 64, 64, 2, 2, 9, 0)
    task = WarmTask(SYSTEM, held_out_questions(cfg_factory().data))
    assert set(task.held_out) == {r["question"] for r in validation + test}  # validation and test both
    operands = example_operands(9, task)
    assert len(operands) == 243 - 128
    asked = {question(f"{a} {op} {b}") for a, op, b in operands}
    assert not asked & set(task.held_out)
    assert len(example_operands(9, WarmTask(SYSTEM))) == 243


def test_the_teacher_adds_instead_in_its_slip_share_and_is_otherwise_right():
    rng = random.Random(0)
    answers = [worked_example(rng, (6, "*", 3), 0.6)[1] for _ in range(2000)]
    sloppy = answers.count("<think>\n6 + 3 = 9\n</think>\n<answer>\n9\n</answer>")
    right = answers.count("<think>\n6 * 3 = 18\n</think>\n<answer>\n18\n</answer>")
    assert sloppy + right == 2000 and 0.55 < sloppy / 2000 < 0.65
    assert worked_example(rng, (6, "*", 3), 0.0) == (
        "What is the result of 6 * 3?",
        "<think>\n6 * 3 = 18\n</think>\n<answer>\n18\n</answer>",
    )
    assert worked_example(rng, (6, "-", 3), 1.0)[1].endswith("<answer>\n9\n</answer>")


def test_cache_key_follows_every_setting_the_task_and_leaves_the_base_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    base = TinySpec()
    task = WarmTask(SYSTEM, ("What is the result of 6 * 3?",))
    warm_spec = replace(base, warm_start=WarmStartSpec(steps=600))
    assert tiny_model_path(warm_spec) == tiny_model_path(base)  # the random model is shared
    default = warm_model_path(tiny_model_path(base), WarmStartSpec(steps=600), task)
    assert default == warm_model_path(tiny_model_path(base), WarmStartSpec(steps=600), task)
    others = {
        warm_model_path(tiny_model_path(base), replace(WarmStartSpec(steps=600), **change), task)
        for change in (
            {"steps": 601},
            {"learning_rate": 1e-3},
            {"batch_size": 32},
            {"max_operand": 5},
            {"restate_fraction": 0.5},
            {"chat_fraction": 0.3},
            {"teacher_slip": 0.5},
            {"seed": 1},
        )
    }
    assert default not in others and len(others) == 8
    for other_task in (WarmTask(SYSTEM), WarmTask("Answer.", task.held_out)):
        assert warm_model_path(tiny_model_path(base), WarmStartSpec(steps=600), other_task) != default
    other_base = tiny_model_path(replace(base, hidden_size=32))
    assert warm_model_path(other_base, WarmStartSpec(steps=600), task) != default


def test_bad_settings_are_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    for change, needle in (
        ({"steps": -1}, "warm_start.steps=-1"),
        ({"batch_size": 0}, "warm_start.batch_size=0"),
        ({"max_operand": 0}, "warm_start.max_operand=0"),
        ({"restate_fraction": 2.0}, "warm_start.restate_fraction=2.0"),
        ({"chat_fraction": -0.1}, "warm_start.chat_fraction=-0.1"),
        ({"teacher_slip": 1.5}, "warm_start.teacher_slip=1.5"),
        ({"decay_steps": 6}, "warm_start.decay_steps=6; need 0..steps"),
        ({"decay_steps": -1}, "warm_start.decay_steps=-1"),
    ):
        with pytest.raises(ValueError, match=needle):
            warm.ensure_warm_model(
                tmp_path / "base", TinySpec(warm_start=replace(WarmStartSpec(steps=5), **change)), WarmTask(SYSTEM)
            )


def test_a_racing_builder_that_finishes_second_keeps_the_first_model(tmp_path):
    target = tmp_path / "model"

    def build(staging):
        # another process finishes first, while this one is still writing its staging directory
        target.mkdir()
        (target / "config.json").write_text("first")
        (staging / "config.json").write_text("second")

    assert build_cached(target, build) == target
    assert (target / "config.json").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "model.lock"]  # the loser's staging dir is gone


def _slow_build_into(target: str, log: str) -> None:
    import time

    def build(staging):
        with open(log, "a") as f:
            f.write("built\n")
        time.sleep(1.0)
        (staging / "config.json").write_text("{}")

    build_cached(Path(target), build)


def test_runs_that_race_build_once_and_all_load_it(tmp_path):
    """Three processes ask for the same model at once (a pool's or an array's first runs): one builds, two wait."""
    import multiprocessing

    target, log = tmp_path / "model", tmp_path / "builds.log"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_slow_build_into, args=(str(target), str(log))) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    assert log.read_text() == "built\n" and (target / "config.json").exists()


def test_a_failed_build_leaves_nothing(tmp_path):
    def build(staging):
        (staging / "config.json").write_text("half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        build_cached(tmp_path / "model", build)
    assert [p.name for p in tmp_path.iterdir()] == ["model.lock"]


def test_a_short_warm_start_builds_loads_and_is_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    import torch
    from transformers import AutoModelForCausalLM

    spec = TinySpec(warm_start=WarmStartSpec(steps=3, batch_size=4, decay_steps=2))
    torch.set_num_threads(1)  # as train() leaves it; the build takes every core, then gives them back
    path = ensure_model(spec, SYSTEM, ("What is the result of 6 * 3?",))
    assert torch.get_num_threads() == 1
    assert path.name.startswith(tiny_model_path(spec).name + "-warm-")
    assert (tiny_model_path(spec) / "config.json").exists()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path(spec))
    warmed = AutoModelForCausalLM.from_pretrained(path)
    changed = [n for (n, a), (_, b) in zip(base.named_parameters(), warmed.named_parameters()) if not a.equal(b)]
    assert changed  # it trained
    stamp = (path / "config.json").stat().st_mtime_ns
    assert (
        ensure_model(spec, SYSTEM, ("What is the result of 6 * 3?",)) == path
        and (path / "config.json").stat().st_mtime_ns == stamp
    )


def test_from_config_reads_a_composed_warm_start(cfg_factory):
    cfg = cfg_factory(["model.tiny.warm_start.steps=80"])
    spec = TinySpec.from_config(cfg.model.tiny, cfg.model.max_seq_length)
    default = TinySpec.from_config(cfg_factory([]).model.tiny, 512).warm_start
    assert spec.warm_start == replace(default, steps=80) and default != WarmStartSpec()
    assert default.steps > 0 and 0 < default.decay_steps < default.steps  # the main job starts warm, its rate decays
    off = cfg_factory(["model.tiny.warm_start.steps=0"]).model.tiny
    assert TinySpec.from_config(off, 512).warm_start.steps == 0
    # the spec holds model.tiny's keys, no fewer and no more (a key of its own would keep its default unseen)
    built = asdict(TinySpec.from_config(cfg.model.tiny, 512))
    assert built.pop("max_position_embeddings") == 512 and built == OmegaConf.to_container(cfg.model.tiny)


@pytest.mark.parametrize("kind", ["chat", "facts", "mixed"])
def test_the_fast_loss_is_the_padded_batch_loss(tmp_path, monkeypatch, kind):
    """warm.lm_loss (a shared prefix run once for chat turns, facts lines packed several to a row) gives the loss and
    the gradients of the plain right-padded batch, on the tiny model's own tokenizer and texts."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    path = tiny.ensure_tiny_model(TinySpec())
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    rng = random.Random(1)
    chat = []
    for a, op, b in rng.sample(warm.operands(9), 12):
        asked, answer = worked_example(rng, (a, op, b), 0.5)
        chat.append(
            tokenizer.apply_chat_template(
                [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": asked},
                    {"role": "assistant", "content": answer},
                ],
                tokenize=False,
            )
        )
    lines = [corpus_line(rng, facts(9), 0.5) for _ in range(16)] + ["1 + 1 = 2."]
    texts = {"chat": chat, "facts": lines, "mixed": chat[:3] + lines[:5]}[kind]
    rows = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    assert kind != "chat" or warm.common_prefix(rows) > 20  # the chat path is the one taken

    def gradients(loss):
        model.zero_grad()
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters()]

    tokenizer.padding_side = "right"
    batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    expected, expected_grads = gradients(model(**batch, labels=labels).loss)
    got, got_grads = gradients(warm.lm_loss(model, rows))
    assert got == pytest.approx(expected, rel=1e-5)
    for g, e in zip(got_grads, expected_grads):
        assert torch.allclose(g, e, rtol=1e-3, atol=1e-6 * e.abs().max().item())


def test_packing_keeps_every_token_once_and_no_target_across_rows():
    rows = [[5] * 7, [6] * 3, [7] * 9, [8] * 2, [9]]
    ids, positions, labels = warm._packed(rows, capacity=10)
    assert ids.shape[1] <= 10 and sorted(ids[ids > 0].tolist()) == sorted(t for r in rows for t in r)
    assert int((labels != -100).sum()) == sum(len(r) - 1 for r in rows)  # each row's first token is no target
    for line, pos in zip(ids.tolist(), positions.tolist()):
        starts = [i for i, p in enumerate(pos) if p == 0]
        for start, end in zip(starts, starts[1:] + [len(line)]):
            assert len(set(line[start:end])) <= 1  # a sequence restarts its positions exactly where a row begins


def test_the_build_uses_every_core_this_process_may(monkeypatch):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert warm.build_threads() == 3


# -- the shipped warm start (grpo_sweep/models/prebuilt/) -----------------------------------------------------------
def _default_spec(cfg_factory, overrides=()):
    cfg = cfg_factory(list(overrides))
    return (
        TinySpec.from_config(cfg.model.tiny, cfg.model.max_seq_length),
        cfg.data.system_prompt,
        held_out_questions(cfg.data),
    )


def test_the_main_job_starts_from_the_shipped_weights_without_building(cfg_factory, tmp_path, monkeypatch):
    import json

    from grpo_sweep.models import PREBUILT, PREBUILT_RECORD, weights_sha256

    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    spec, system, held_out = _default_spec(cfg_factory)
    assert ensure_model(spec, system, held_out) == PREBUILT
    assert not any(tmp_path.iterdir())  # nothing built, nothing cached
    record = json.loads((PREBUILT / PREBUILT_RECORD).read_text())
    assert weights_sha256(PREBUILT) == record["sha256"] and len(record["sha256"]) == 64
    assert (PREBUILT / "model.safetensors").stat().st_size < 1_000_000  # a few hundred KB in the package


WORD_PROBLEMS = ("Ann has 3 apples and buys 4 more. How many apples now?", "What is 12 % of 50?")


@pytest.mark.parametrize(
    "overrides, held_out",
    [
        (["data=file", "data.path=unused.jsonl"], None),  # other data: no held-out question a worked example asks
        ([], WORD_PROBLEMS),
        (["data.arithmetic.n_val=32"], None),  # fewer held out: still none of them shown
    ],
)
def test_a_run_whose_held_out_questions_the_shipped_one_never_showed_starts_from_it(
    cfg_factory, tmp_path, monkeypatch, overrides, held_out
):
    from grpo_sweep.models import PREBUILT, shipped_warm_start

    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    spec, system, questions = _default_spec(cfg_factory, overrides)
    held_out = questions if held_out is None else held_out
    assert shipped_warm_start(spec, system, held_out) == (PREBUILT, "")
    assert ensure_model(spec, system, held_out) == PREBUILT
    assert not any(tmp_path.iterdir())  # nothing built


@pytest.mark.parametrize(
    "overrides, why",
    [
        (["model.tiny.warm_start.seed=7"], "model.tiny.warm_start.seed=7 differs from the shipped warm start's (2)"),
        (
            ["model.tiny.warm_start.teacher_slip=0.5", "model.tiny.hidden_size=32"],
            "model.tiny.hidden_size=32, model.tiny.warm_start.teacher_slip=0.5 differ from the shipped warm "
            "start's (64, 0.6)",
        ),
        (["model.max_seq_length=1024"], "model.max_seq_length=1024 differs from the shipped warm start's (512)"),
        (["data.system_prompt=Answer."], "data.system_prompt differs from the shipped warm start's"),
        (
            ["data.arithmetic.seed=3"],
            "63 of this run's 128 held-out questions ('What is the result of 2 * 9?', ...) were "
            "worked examples in the shipped warm start, which holds out data=arithmetic's default "
            "validation and test questions",
        ),
    ],
)
def test_another_recipe_or_held_out_questions_it_showed_build_instead_and_say_why(cfg_factory, overrides, why):
    from grpo_sweep.models import shipped_warm_start

    assert shipped_warm_start(*_default_spec(cfg_factory, overrides)) == (None, why)


def test_prebuilt_false_takes_this_machines_build_of_the_same_recipe(cfg_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    spec, system, held_out = _default_spec(cfg_factory, ["model.tiny.prebuilt=false"])
    # a build this machine made before (here: a stand-in in its cache place; building it is test_build_says_why...)
    built = warm_model_path(tiny_model_path(spec), spec.warm_start, WarmTask(system, held_out))
    for path in (tiny_model_path(spec), built):
        path.mkdir(parents=True)
        (path / "config.json").write_text("{}")
    assert ensure_model(spec, system, held_out) == built


def test_held_out_questions_no_worked_example_asks_leave_the_build_and_its_cache_name(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    base, spec = tiny_model_path(TinySpec()), WarmStartSpec(steps=600)
    some = ("What is the result of 6 * 3?",)
    assert warm_model_path(base, spec, WarmTask(SYSTEM, WORD_PROBLEMS)) == warm_model_path(base, spec, WarmTask(SYSTEM))
    assert warm_model_path(base, spec, WarmTask(SYSTEM, some + WORD_PROBLEMS)) == warm_model_path(
        base, spec, WarmTask(SYSTEM, some)
    )
    assert warm_model_path(base, spec, WarmTask(SYSTEM, some)) != warm_model_path(base, spec, WarmTask(SYSTEM))
    assert example_operands(9, WarmTask(SYSTEM, WORD_PROBLEMS)) == example_operands(9, WarmTask(SYSTEM))


def test_the_shipped_record_says_what_its_worked_examples_showed(cfg_factory):
    import json

    from grpo_sweep.models import PREBUILT, PREBUILT_RECORD, made_from, warm_name

    spec, system, held_out = _default_spec(cfg_factory)
    record = json.loads((PREBUILT / PREBUILT_RECORD).read_text())
    assert record["name"] == warm_name(spec, system, held_out) == "tiny-llama-5c0d143958c2-warm-311db67fe0fe"
    assert record["made_from"] == made_from(spec, system, held_out)
    assert len(record["made_from"]["shown"]) == 115 and not set(record["made_from"]["shown"]) & set(held_out)


def test_a_build_says_why_how_far_it_is_and_how_long_it_took_once(tmp_path, monkeypatch, caplog):
    import logging

    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    spec = TinySpec(warm_start=WarmStartSpec(steps=20, batch_size=4, decay_steps=2, seed=2))
    with caplog.at_level(logging.INFO, logger="grpo_sweep.models"):
        path = ensure_model(spec, SYSTEM, WORD_PROBLEMS)
        first = [r.getMessage() for r in caplog.records]
        caplog.clear()
        assert ensure_model(spec, SYSTEM, WORD_PROBLEMS) == path
    assert [r.getMessage() for r in caplog.records] == []  # cached: nothing to say
    assert first[0].startswith(
        "model.tiny.warm_start.steps=20, model.tiny.warm_start.decay_steps=2, "
        "model.tiny.warm_start.batch_size=4 differ from the shipped warm start's (600, 75, 128): "
        "building the tiny model's warm start: 20 steps, about 1 s on 2 free cores"
    ), first
    assert first[0].endswith(f"once, then cached in {path}")
    assert [m.split(",")[0] for m in first[1:-1]] == [
        f"warm start: step {s} of 20 ({5 * s} %)" for s in range(2, 20, 2)
    ]
    assert first[-1].startswith("warm start built in ") and first[-1].endswith(f" s; cached in {path}")


def test_a_damaged_shipped_file_is_refused(cfg_factory, tmp_path):
    import shutil

    from grpo_sweep.models import PREBUILT, shipped_warm_start

    copy = tmp_path / "prebuilt"
    shutil.copytree(PREBUILT, copy)
    spec, system, held_out = _default_spec(cfg_factory)
    assert shipped_warm_start(spec, system, held_out, root=copy).path == copy
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(
        RuntimeError, match="hashes to .*, not .* reinstall grpo-sweep or set model.tiny.prebuilt=false"
    ):
        shipped_warm_start(spec, system, held_out, root=copy)
