"""What a run cost: device time, generated tokens, and each reward term's share of the training time (train.py
stores them in summary.json; the report, the terminal and W&B read and sum them)."""

from __future__ import annotations

from typing import Any

from .record import RunSummary


def generated_tokens(
    history: list[dict],
    generation_batch_size: int,
    gradient_accumulation_steps: int,
    steps_per_generation: int,
    num_iterations: int = 1,
) -> int | None:
    """Completion tokens sampled during training, from TRL's logged ``completions/mean_length``.

    TRL's own counter, ``num_tokens`` (``state.num_input_tokens_seen``), adds the prompt tokens, so it is not what
    generation cost. TRL generates ``generation_batch_size`` completions (all processes) at every
    ``steps_per_generation * num_iterations``-th micro-batch, and a logged row's ``completions/mean_length`` is the
    mean over the generations since the previous row: tokens = mean length × completions generated in between.
    Exact when every step was logged from the first (a resume restarts TRL's generation cycle at the checkpoint:
    still exact when checkpoints fall on generation boundaries, as with the default steps_per_generation).
    """
    every = steps_per_generation * num_iterations  # micro-batches between generations
    total, previous, seen = 0.0, 0, False
    for row in history:
        length = row.get("completions/mean_length")
        if "train_runtime" in row or not isinstance(row.get("step"), int) or not isinstance(length, (int, float)):
            continue
        step = row["step"]
        # generations happen at micro-batches 0, every, 2*every, ...; optimizer step s holds micro-batches
        # [(s-1)*GA, s*GA): those of steps previous+1..step are [previous*GA, step*GA)
        calls = -(-step * gradient_accumulation_steps // every) - -(-previous * gradient_accumulation_steps // every)
        total += length * generation_batch_size * calls
        previous, seen = step, True
    return round(total) if seen else None


def run_cost(timings: dict, history: list[dict], args: Any, devices: int = 1) -> dict:
    """``device_seconds``, ``generated_tokens`` and ``tokens_per_s`` of a run, for its summary.json.

    device_seconds: wall seconds the run kept its device busy: training (its periodic evaluations included),
    saving and the final evaluation, i.e. ``timings_s`` train + save + eval. Process start-up and set-up (imports,
    data, model load) are left out: they are the same for every configuration of a sweep and mostly disk or
    network. On CPU it is the same wall time (the process holds its cores throughout). A run over several
    processes, or with a vLLM server of its own, holds ``devices`` of them (training processes + server GPUs) for
    that time: its device seconds are that many times the wall time.
    generated_tokens: completion tokens sampled in training (``generated_tokens`` above); the evaluations'
    completions are not counted. tokens_per_s: generated_tokens / device_seconds, i.e. training tokens per
    device-second the run cost (a cost rate; evaluation time is in the denominator, so it is below raw speed).
    ``args`` is the run's GRPOConfig (its generation_batch_size, gradient_accumulation_steps, ...).
    """
    parts = [timings.get(k) for k in ("train", "save", "eval")]
    seconds = (
        sum(p for p in parts if isinstance(p, (int, float))) * devices if isinstance(parts[0], (int, float)) else None
    )
    tokens = generated_tokens(
        history,
        args.generation_batch_size,
        args.gradient_accumulation_steps,
        args.steps_per_generation,
        getattr(args, "num_iterations", 1) or 1,
    )
    rate = tokens / seconds if tokens is not None and seconds else None
    return {
        "device_seconds": None if seconds is None else round(seconds, 3),
        "generated_tokens": tokens,
        "tokens_per_s": None if rate is None else round(rate, 1),
    }


def cost_totals(summaries: list[RunSummary]) -> dict:
    """A sweep's cost: summed device seconds and generated tokens, tokens per device-second, runs counted."""
    costed = [s for s in summaries if isinstance(s.device_seconds, (int, float))]
    seconds = sum(s.device_seconds for s in costed)
    tokens = sum(s.generated_tokens for s in costed if isinstance(s.generated_tokens, int))
    return {
        "runs": len(costed),
        "of": len(summaries),
        "device_seconds": seconds,
        "generated_tokens": tokens,
        "tokens_per_s": tokens / seconds if seconds else None,
    }


def cost_line(summaries: list[RunSummary]) -> str | None:
    """``Cost: ...`` for a sweep's report and terminal table; None when no run recorded its cost."""
    t = cost_totals(summaries)
    if not t["runs"]:
        return None
    rate = "-" if t["tokens_per_s"] is None else f"{t['tokens_per_s']:,.0f}"
    line = (
        f"Cost: {t['device_seconds']:,.1f} device-seconds ({t['device_seconds'] / 3600:.2f} device-hours), "
        f"{t['generated_tokens']:,} completion tokens generated in training, {rate} tokens per device-second"
    )
    missing = t["of"] - t["runs"]
    if missing:
        line += f"; {missing} of {t['of']} runs recorded no cost (running, failed, or written before cost was recorded)"
    return line


# A reward term that takes at least this share of the training time is named at the end of a run (app.format_summary).
COSTLY_SHARE = 0.05


def reward_cost(terms: dict[str, tuple[float, int]], timings: dict) -> dict:
    """summary.json's ``reward_cost``: per reward term (``terms``: name -> (seconds, calls), as rewards/guard.py
    times them), the wall seconds spent in it during training, its ``share`` of the training time and the
    ``calls`` (batches scored).

    The training time is ``timings_s`` train less eval_periodic: the wall time of the training steps as a whole
    (generation, rewards, loss and backward, the optimizer, checkpoints), what decides how long a run trains, on
    the clock the terms are timed on. TRL's ``step_time`` is not used: it leaves out the optimizer step and the
    checkpoints, and metrics.jsonl keeps only its mean per logging interval, so its sum would have to be rebuilt.
    A share is None when the training time is unknown."""
    train, periodic = timings.get("train"), timings.get("eval_periodic") or 0.0
    seconds = train - periodic if isinstance(train, (int, float)) else None
    return {
        name: {"seconds": round(spent, 4), "share": round(spent / seconds, 5) if seconds else None, "calls": calls}
        for name, (spent, calls) in terms.items()
    }


def costly_terms(summary: dict | RunSummary, threshold: float = COSTLY_SHARE) -> list[tuple[str, dict]]:
    """The terms of a run's ``reward_cost`` whose share is at least ``threshold``, costliest first."""
    cost = (summary.get("reward_cost") if isinstance(summary, dict) else summary.reward_cost) or {}
    found = [
        (name, c)
        for name, c in cost.items()
        if isinstance(c, dict) and isinstance(c.get("share"), (int, float)) and c["share"] >= threshold
    ]
    return sorted(found, key=lambda item: -item[1]["share"])
