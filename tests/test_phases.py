"""A run whose config changes at given steps (trainer.phases, grpo_sweep/run/phases.py): checked before it starts,
trained phase by phase from each phase's first step, and continued after a stop in the phase that holds its last
checkpoint."""

from __future__ import annotations

import json

import pytest

from grpo_sweep.run.phases import check_phases, check_resumable, config_at, phase_configs
from grpo_sweep.run.validate import ConfigError, validate

from .conftest import compose, launch_here
from .test_pbt import RUN as PAUSING_RUN

PHASES = (
    "trainer.phases=[{from_step:3,set:{optimizer.learning_rate:0.0002,trainer.beta:0.05}},"
    "{from_step:5,set:{trainer.seed:7}}]"
)


def test_each_phase_is_the_run_with_the_values_set_up_to_it():
    cfg = compose(["optimizer.learning_rate=0.001", "trainer.max_steps=6", PHASES])
    first, second, third = phase_configs(cfg)
    assert (first.optimizer.learning_rate, first.trainer.beta, first.trainer.seed) == (0.001, 0.0, 42)
    assert (second.optimizer.learning_rate, second.trainer.beta, second.trainer.seed) == (0.0002, 0.05, 42)
    assert (third.optimizer.learning_rate, third.trainer.beta, third.trainer.seed) == (0.0002, 0.05, 7)
    assert all(list(c.trainer.phases) == [] for c in (first, second, third))
    # a checkpoint of step 3 was saved by the first phase, of step 4 by the second
    assert [config_at(cfg, step).trainer.seed for step in (0, 3, 4, 5, 6)] == [42, 42, 42, 42, 7]
    assert config_at(cfg, 4).trainer.beta == 0.05 and config_at(cfg, 3).trainer.beta == 0.0


@pytest.mark.parametrize(
    "phases, message",
    [
        ("[{from_step:3,set:{lora.r:8}}]", "trainer.phases[0].set.lora.r: a run cannot change lora.r from a step on"),
        ("[{from_step:3,set:{trainer.num_generations:2}}]", "the trainer's batch shape"),
        ("[{from_step:3,set:{optimizer.weight_decay:0.1}}]", "the optimizer's and the scheduler's state"),
        ("[{from_step:6,set:{trainer.beta:0.1}}]", "trainer.phases[0].from_step=6: must be a step after 0 and before"),
        (
            "[{from_step:3,set:{trainer.beta:0.1}},{from_step:3,set:{trainer.beta:0.2}}]",
            "trainer.phases[1].from_step=3: must be a step after 3",
        ),
        ("[{from_step:3,set:{}}]", "trainer.phases[0].set={}: give the values the phase sets"),
        ("[{from_step:3}]", "trainer.phases[0]={'from_step': 3}: give {from_step: N, set: {key: value}}"),
        ("[{from_step:3,set:{trainer.nope:1}}]", "trainer.phases[0].set.trainer.nope: not a config key of this run"),
        ("[{from_step:3,set:{trainer.beta:-1}}]", "trainer.phases[0]: trainer.beta=-1.0: must be >= 0"),
    ],
)
def test_a_bad_phase_is_refused_in_one_line(phases, message):
    with pytest.raises(ConfigError) as caught:
        validate(compose(["trainer.max_steps=6", f"trainer.phases={phases}"]))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_no_phases_checks_nothing():
    check_phases(compose([]))


def test_each_phase_trains_from_where_the_last_stopped_and_a_stopped_run_goes_on_in_its_phase(tmp_path):
    """run_phases with a stand-in for one run's training: it records what it was given and leaves the checkpoint of
    the step it stopped at, as train does."""
    from types import SimpleNamespace

    from grpo_sweep.run.phases import run_phases
    from grpo_sweep.run.resume import ResumeError, remember_config

    trained = []

    def train(cfg):
        stop = cfg.trainer.pause_at_step or cfg.trainer.max_steps
        if not (tmp_path / "checkpoints").exists():
            remember_config(tmp_path, cfg)  # what a fresh run records
        step = tmp_path / "checkpoints" / f"checkpoint-{stop}"
        step.mkdir(parents=True)
        (step / "trainer_state.json").write_text(json.dumps({"global_step": stop}))
        trained.append((cfg.trainer.seed, cfg.trainer.beta, cfg.trainer.pause_at_step))
        return SimpleNamespace(status="paused" if cfg.trainer.pause_at_step else "completed")

    cfg = compose(["trainer.max_steps=6", PHASES])
    stopped = compose(["trainer.max_steps=6", "trainer.pause_at_step=4", PHASES])
    assert run_phases(stopped, tmp_path, train).status == "paused"
    assert trained == [(42, 0.0, 3), (42, 0.05, 4)]  # the user's pause inside the second phase
    assert run_phases(cfg, tmp_path, train).status == "completed"
    assert trained[2:] == [(42, 0.05, 5), (7, 0.05, None)]  # on in the second phase from step 4, then the third
    # the gate checks the directory against the phase that saved its last checkpoint: the same command passes,
    # another config is refused
    check_resumable(tmp_path, cfg)
    with pytest.raises(ResumeError, match="trainer.top_p: 1.0 -> 0.9"):
        check_resumable(tmp_path, compose(["trainer.max_steps=6", "trainer.top_p=0.9", PHASES]))


# test_pbt's short run that pauses and goes on, with phases
RUN = [*PAUSING_RUN, "optimizer.learning_rate=0.001", PHASES]


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_a_run_stopped_inside_a_phase_goes_on_in_it_and_each_step_has_its_phases_values(tmp_path):
    run_dir = tmp_path / "run"
    stopped = launch_here([*RUN, "trainer.pause_at_step=2", f"hydra.run.dir={run_dir}"], tmp_path)
    assert stopped.returncode == 0, stopped.stderr[-2000:]
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 2
    on = launch_here([*RUN, f"hydra.run.dir={run_dir}"], tmp_path)
    assert on.returncode == 0, on.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 6 and summary["test_accuracy"] is not None
    rates = {r["step"]: r["learning_rate"] for r in _rows(run_dir) if "learning_rate" in r}
    assert [rates[s] for s in range(1, 7)] == pytest.approx([0.001] * 3 + [0.0002] * 3)
    # the same command once more: finished, nothing trains; another config is refused as a plain resume is
    again = launch_here([*RUN, f"hydra.run.dir={run_dir}"], tmp_path)
    assert again.returncode == 0 and json.loads((run_dir / "summary.json").read_text())["steps"] == 6
    other = launch_here([*RUN, "trainer.top_p=0.9", f"hydra.run.dir={run_dir}"], tmp_path)
    assert other.returncode != 0 and "holds a run started with another config (trainer.top_p: 1.0 -> 0.9" in (
        other.stderr
    )
