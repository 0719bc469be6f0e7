"""How long the main job's one-time preparation takes: the random tiny model, then its warm start, each built in a
fresh cache as the first `python launch.py` builds them; and whether the weights depend on the build's thread count.

    python -m bench.warm_start_build                 # every core this process may use (what a run does)
    python -m bench.warm_start_build --threads 1 2   # one build per thread count; their weights must be identical

Numbers go to bench/results/warm_start_build.json (issue 13: the first preparation <= 90 s on 2 cores).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time

from bench._common import compose, parser, record


def build_once(threads: int | None) -> dict:
    import torch

    from grpo_sweep.data import held_out_questions
    from grpo_sweep.models import tiny, warm

    cfg = compose()
    spec = tiny.TinySpec.from_config(cfg.model.tiny, cfg.model.max_seq_length)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GRPO_SWEEP_CACHE"] = cache
        torch.set_num_threads(1)  # as train() leaves it before the model loads (trainer.torch_threads=1)
        started = time.perf_counter()
        base = tiny.ensure_tiny_model(spec)
        built_base = time.perf_counter()
        original = warm.build_threads
        if threads is not None:
            warm.build_threads = lambda: threads
        try:
            path = warm.ensure_warm_model(
                base, spec, warm.WarmTask(cfg.data.system_prompt, tuple(held_out_questions(cfg.data)))
            )
        finally:
            warm.build_threads = original
        done = time.perf_counter()
        digest = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    return {
        "threads": threads if threads is not None else warm.build_threads(),
        "random_model_s": round(built_base - started, 2),
        "warm_start_s": round(done - built_base, 2),
        "preparation_s": round(done - started, 2),
        "weights_sha256": digest[:16],
        "threads_after_build": torch.get_num_threads(),
    }


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--threads", type=int, nargs="*", help="build once per thread count (default: every core)")
    args = cli.parse_args()
    builds = [build_once(t) for t in (args.threads or [None])]
    cfg = compose().model.tiny.warm_start
    result = {
        "warm_start": f"{cfg.steps} steps x {cfg.batch_size} lines",
        "cores": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
        "builds": builds,
        "same_weights": len({b["weights_sha256"] for b in builds}) == 1,
    }
    record("warm_start_build", result)


if __name__ == "__main__":
    main()
