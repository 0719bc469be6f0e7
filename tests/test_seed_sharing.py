"""What ``trainer.seed`` shares between the configurations of a sweep, which the moderated verdicts pair on
(docs/tracking.md): with the same seed, two configurations that differ in their learning rate
train on the same first batch of prompts and sample the same first completions (same data order, same adapter
initialisation, same sampling stream); another seed gives another batch."""

from __future__ import annotations

import json

from tests.conftest import FAST, launch_here


def test_the_same_seed_gives_every_configuration_the_same_first_batch(tmp_path):
    spies = tmp_path / "spies"
    spies.mkdir()
    out = launch_here(
        [
            "-m",
            *FAST,
            "trainer.max_steps=1",
            "trainer.save_steps=1",
            "optimizer.learning_rate=0.0003,0.003",
            "trainer.seed=3,4",
            "+reward_mix.spy.fn=tests.reward_plugins.first_batch",
            "+reward_mix.spy.weight=0.01",
            f"+reward_mix.spy.params.path={spies}/${{optimizer.learning_rate}}-${{trainer.seed}}.jsonl",
        ],
        tmp_path,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    batches = {}
    for path in spies.glob("*.jsonl"):
        lr, seed = path.stem.rsplit("-", 1)
        batches[float(lr), int(seed)] = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(batches) == 4
    # seed 3: both learning rates, the same prompts and completions at step 0; seed 4 likewise
    assert batches[0.0003, 3] and batches[0.0003, 3] == batches[0.003, 3]
    assert batches[0.0003, 4] == batches[0.003, 4]
    assert [b["prompts"] for b in batches[0.0003, 3]] != [b["prompts"] for b in batches[0.0003, 4]]
