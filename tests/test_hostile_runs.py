"""Hostile input to runs, phases and PBT (issue 52's third round): each input ends in one line naming it before
anything runs, or the run does what the same command promises (a killed phased run goes on). The launch cases are a
table of tests/test_hostile_input.py's (``Refused``: one line, nothing left under the output root)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from grpo_sweep.launching.gate import check_run
from grpo_sweep.run.phases import check_resumable, run_phases
from grpo_sweep.run.resume import last_checkpoint, remember_config

from .conftest import ROOT, compose, launch_here
from .hostile import Refused, args, slow

LONG = "a" * 10_000
PBT = ("-m", "hparams_search=pbt", "trainer.max_steps=6")
SEEDS = ("-m", "hydra/sweeper=seeds", "lora.r=8,16")
WEIGHT_BOUND = "a nonzero value must be in [1e-06, 1e+06]"
SEED_BOUND = "a seed must be a whole number in 0..4294967295"
MAY_SET = "a phase may set single values a checkpoint does not hold"

# tests/test_hostile_input.py runs this table ("Runs, phases and PBT") with the others; a sweep's refusal costs ~1 s
# (Hydra composes it again per run), so beyond one of each kind they are the slow stage's
CASES = [
    # reported
    (
        "reward weight 1e39 (finite, overflows float32)",
        args("reward_mix=format_correct", "reward_mix.format.weight=1e39"),
        Refused(f"reward_mix.format.weight=1e+39: {WEIGHT_BOUND}"),
    ),
    (
        "learning_rate=1e30",
        args("optimizer.learning_rate=1e30"),
        Refused("optimizer.learning_rate=1e+30: a nonzero value must be in [1e-09, 1]"),
    ),
    ("trainer.seed=-1", args("trainer.seed=-1"), Refused(f"trainer.seed=-1: {SEED_BOUND}")),
    ("trainer.seed=2**32", args("trainer.seed=4294967296"), Refused(f"trainer.seed=4294967296: {SEED_BOUND}")),
    (
        "seeds sweep with first_seed=-1",
        args(*SEEDS, "hydra.sweeper.first_seed=-1"),
        Refused("hydra.sweeper.first_seed=-1: the seeds -1.."),
    ),
    (
        "a phase setting model.name",
        args("trainer.max_steps=6", "trainer.phases=[{{from_step:2,set:{{model.name:x}}}}]"),
        Refused(
            "trainer.phases[0].set.model.name: a run cannot change model.name from a step on (the weights are the "
            f"checkpoint's); {MAY_SET}, such as optimizer.learning_rate"
        ),
    ),
    (
        "a phase setting the model group",
        args("trainer.max_steps=6", "trainer.phases=[{{from_step:2,set:{{model:{{name:x}}}}}}]"),
        Refused("trainer.phases[0].set.model: a run cannot change model from a step on (the weights are the "),
    ),
    (
        "PBT with trainer.phases",
        args(*PBT, "trainer.phases=[{{from_step:2,set:{{trainer.beta:0.1}}}}]"),
        Refused("trainer.phases: a PBT changes its members' values itself"),
    ),
    (
        "PBT name=../../escaped",
        args(*PBT, "hydra.sweeper.name=../../escaped"),
        Refused("hydra.sweeper.name='../../escaped': it names a directory"),
    ),
    slow(
        (
            "PBT name of 10,000 characters",
            args(*PBT, f"hydra.sweeper.name={LONG}"),
            Refused("(10000 characters)': longer than a file name may be (255 bytes)"),
        )
    ),
    slow(
        (
            "PBT reward_mix= of 10,000 characters",
            args(*PBT, f"reward_mix={LONG}"),
            Refused("(10005 characters): a value makes a file name longer than the file system allows"),
        )
    ),
    # the second batch: the same classes, inputs not reported
    (
        "reward weight 1e-300 (vanishes)",
        args("reward_mix=format_correct", "reward_mix.correct.weight=1e-300"),
        Refused(f"reward_mix.correct.weight=1e-300: {WEIGHT_BOUND}"),
    ),
    (
        "a weight schedule ending at 1e39",
        args("reward_mix=format_correct", "+reward_mix.format.schedule={{kind:linear,end:1e39}}"),
        Refused(f"reward_mix.format.schedule.end=1e+39: {WEIGHT_BOUND}"),
    ),
    ("trainer.beta=1e30", args("trainer.beta=1e30"), Refused("trainer.beta=1e+30: a nonzero value must be in")),
    (
        "trainer.temperature=1e-30",
        args("trainer.temperature=1e-30"),
        Refused("trainer.temperature=1e-30: a nonzero value must be in [1e-06, 1e+06] (it divides the logits)"),
    ),
    (
        "learning_rate=1e-300",
        args("optimizer.learning_rate=1e-300"),
        Refused("optimizer.learning_rate=1e-300: a nonzero value must be in [1e-09, 1]"),
    ),
    (
        "a phase setting learning_rate 1e30",
        args("trainer.max_steps=6", "trainer.phases=[{{from_step:2,set:{{optimizer.learning_rate:1e30}}}}]"),
        Refused("trainer.phases[0]: optimizer.learning_rate=1e+30: a nonzero value must be in [1e-09, 1]"),
    ),
    (
        "a phase setting trainer.seed=-1",
        args("trainer.max_steps=6", "trainer.phases=[{{from_step:2,set:{{trainer.seed:-1}}}}]"),
        Refused(f"trainer.phases[0]: trainer.seed=-1: {SEED_BOUND}"),
    ),
    (
        "a phase setting trainer.seed to a word",
        args("trainer.max_steps=6", "trainer.phases=[{{from_step:2,set:{{trainer.seed:abc}}}}]"),
        Refused("trainer.phases[0].set.trainer.seed=\"abc\": Value 'abc' of type 'str' could not be converted"),
    ),
    (
        "a phase setting the trainer group",
        args("trainer.max_steps=6", "trainer.phases=[{{from_step:2,set:{{trainer:{{beta:0.1}}}}}}]"),
        Refused("trainer.phases[0].set.trainer: a run cannot change trainer from a step on (it is a group holding"),
    ),
    ("data.seed=-3", args("data.seed=-3"), Refused(f"data.seed=-3: {SEED_BOUND}")),
    slow(
        (
            "seeds sweep whose seeds run past 2**32-1",
            args(*SEEDS, "hydra.sweeper.first_seed=4294967295"),
            Refused(
                "hydra.sweeper.first_seed=4294967295: the seeds 4294967295..4294967302 (hydra.sweeper.max_seeds=8)"
            ),
        )
    ),
    slow(
        (
            "PBT whose members' seeds run past 2**32-1",
            args(*PBT, "trainer.seed=4294967294"),
            Refused("trainer.seed=4294967294: a PBT's seeds run to trainer.seed + population + head_to_head_seeds - 1"),
        )
    ),
    slow(
        (
            "PBT name=a/b",
            args(*PBT, "hydra.sweeper.name=a/b"),
            Refused("hydra.sweeper.name='a/b': it names a directory"),
        )
    ),
    slow(
        ("PBT name=..", args(*PBT, "hydra.sweeper.name=.."), Refused("hydra.sweeper.name='..': it names no directory"))
    ),
    (
        "model= of 10,000 characters",
        args(f"model={LONG}"),
        Refused("model/aaaa"),
    ),
    (
        "reward_mix=../model/tiny (an option with a path)",
        args("reward_mix=../model/tiny"),
        Refused("reward_mix=../model/tiny: an option of reward_mix is a file in the group's own folder"),
    ),
    (
        "-m reward_mix=format,../model/tiny (a swept option with a path)",
        args("-m", "reward_mix=format,../model/tiny"),
        Refused("job 1 (reward_mix=../model/tiny): reward_mix=../model/tiny: an option of reward_mix is a file"),
    ),
]


# --- a phased run killed inside a phase, before that phase's first checkpoint ---------------------------------------
PHASED = [
    "trainer.max_steps=40",
    "trainer.save_steps=5",
    "optimizer.learning_rate=0.0012",
    "trainer.phases=[{from_step:10,set:{optimizer.learning_rate:0.00096}}]",
]


def _stand_in(run_dir, trained, kill_after=None):
    """One run's training as run_phases sees it: records a fresh run's config, saves a checkpoint every
    trainer.save_steps from the last one, and, at ``kill_after``, dies as a kill would (no checkpoint of that step)."""

    def train(cfg):
        stop = cfg.trainer.pause_at_step or cfg.trainer.max_steps
        found = last_checkpoint(run_dir)
        if found is None:
            remember_config(run_dir, cfg)
        trained.append((cfg.optimizer.learning_rate, found[1] if found else 0, stop))
        for step in range((found[1] if found else 0) + 1, stop + 1):
            if kill_after is not None and step > kill_after:
                raise KeyboardInterrupt(f"killed at step {step}")
            if step % cfg.trainer.save_steps == 0 or step == stop:
                path = run_dir / "checkpoints" / f"checkpoint-{step}"
                path.mkdir(parents=True)
                (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        return SimpleNamespace(status="paused" if cfg.trainer.pause_at_step else "completed")

    return train


def test_a_phased_run_killed_before_its_phases_first_checkpoint_goes_on_with_the_same_command(tmp_path):
    cfg = compose(PHASED)
    trained: list = []
    with pytest.raises(KeyboardInterrupt):
        run_phases(cfg, tmp_path, _stand_in(tmp_path, trained, kill_after=10))  # killed at step 11
    assert last_checkpoint(tmp_path)[1] == 10
    # the same command: the gate lets it through, and it goes on from step 10 in the second phase
    check_run(cfg, tmp_path, trains_here=False)
    check_resumable(tmp_path, cfg)
    assert run_phases(cfg, tmp_path, _stand_in(tmp_path, trained)).status == "completed"
    # the first phase to step 10, the second killed after it, then the second again from step 10, to the end
    assert trained == [(0.0012, 0, 10), (0.00096, 10, 40), (0.00096, 10, 40)]


def test_a_killed_phased_run_still_refuses_another_config(tmp_path):
    trained: list = []
    with pytest.raises(KeyboardInterrupt):
        run_phases(compose(PHASED), tmp_path, _stand_in(tmp_path, trained, kill_after=10))
    other = compose([*PHASED[:-1], "trainer.phases=[{from_step:10,set:{optimizer.learning_rate:0.0005}}]"])
    with pytest.raises(Exception, match="holds a run started with another config"):
        check_resumable(tmp_path, other)
    with pytest.raises(Exception, match="holds a run started with another config"):
        check_resumable(tmp_path, compose([*PHASED, "trainer.top_p=0.9"]))


# --- the step a resumed (or phased) run reports -----------------------------------------------------------------
def _lora_model():
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2)
    return get_peft_model(LlamaForCausalLM(config), LoraConfig(r=2, target_modules=["q_proj"]))


@pytest.mark.slow  # it trains (~5 s): the slow stage's, as the tables' cases that train
def test_a_resumed_run_reports_its_best_step_from_the_adapter_on_disk(tmp_path):
    """Each phase of a phased run is a resume: the best step's weights are not in memory, only its adapter on disk
    (best/lora). The run reports that step, with those weights, as its summary says it chose."""
    import torch

    from grpo_sweep.run.evaluate import BEST_RECORD, PeriodicEval, trainable_state
    from grpo_sweep.run.record import Scores, val_row

    model = _lora_model()
    lora_b = [p for name, p in model.named_parameters() if "lora_B" in name]
    with torch.no_grad():
        for p in lora_b:
            p.fill_(0.5)  # step 20's weights, the best
    best = tmp_path / "best"
    model.save_pretrained(best / "lora")
    (best / BEST_RECORD).write_text(
        json.dumps({"step": 20, "metric": "accuracy", "value": 0.6, "adapter": "best/lora"})
    )
    with torch.no_grad():
        for p in lora_b:
            p.fill_(-1.0)  # the last step's
    history = [val_row(step, Scores(acc), 1.0) for step, acc in ((0, 0.3), (20, 0.6), (40, 0.4))]
    periodic = PeriodicEval(None, tmp_path, 20, "accuracy", write=lambda row: None, save=None, history=history)
    assert periodic.reported_step(40, "best", model) == 20
    restored = periodic.weights(20)
    assert all(torch.all(restored[name] == 0.5) for name in restored if "lora_B" in name)
    assert all(torch.all(p == -1.0) for p in lora_b)  # the model keeps its own weights until the run loads them
    assert trainable_state(model).keys() == restored.keys()


def test_a_summary_that_reports_the_last_step_does_not_say_it_was_chosen():
    from grpo_sweep.app import chosen

    evaluated = {"best_step": 20, "best_metric": "val_accuracy", "eval_steps": [0, 20, 40]}
    chose, last = SimpleNamespace(reported_step=20, **evaluated), SimpleNamespace(reported_step=40, **evaluated)
    assert chosen(chose) == "chosen on val_accuracy among steps [0, 20, 40]"
    assert chosen(last) == "the last step; step 20 was best on val_accuracy among steps [0, 20, 40]"


def test_a_pbt_takes_the_dotted_spelling_its_config_file_shows(tmp_path):
    """`+hydra.sweeper.params.trainer.beta={low:0,high:0.1}` (Hydra nests it) moves trainer.beta, as
    conf/hparams_search/pbt.yaml's comment says (it was refused: "PBT cannot move trainer")."""
    out = launch_here(
        [
            "-m",
            "hparams_search=pbt",
            "+hydra.sweeper.params.trainer.beta={low:0,high:0.1}",
            "hydra/launcher=submitit_local",
            "hydra.launcher.dry_run=true",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    jobs = [line for line in out.stdout.splitlines() if line.startswith("job ")]
    assert len(jobs) == 4 and all(" trainer.beta=0.0" in job for job in jobs), out.stdout
    assert (
        "'+hydra.sweeper.params.trainer.beta={low:0,high:0.1}'" in (ROOT / "conf/hparams_search/pbt.yaml").read_text()
    )
