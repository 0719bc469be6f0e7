"""How often do a sweep's verdicts lie? Null sweeps (every configuration truly the same) and the power to see a real
difference, for the verdicts before issue 21 and now.

    python -m bench.studies.null_sweeps [--sweeps 1000] [--check 50]   # -> bench/results/null_sweeps.json (+ .md)

Simulated with grpo_sweep/search/simulate.py (64 validation and 64 test questions, each with its own difficulty;
a run's own luck shared by its validation and test answers; a seed effect shared by configurations; Bernoulli
outcomes; a run's test accuracy varies by ~0.03 over seeds), for 3, 5 and 10 configurations x 3 and 5 seeds:

- ``P(any false)``: the share of null sweeps with at least one ``better``/``worse`` against the reference, for
  - ``old``: the comparison before (rank by the per-run accuracy, paired t against the best mean, n-1 df, 95 %);
  - ``questions``: stats.compare with per-question test outcomes, ranked on validation;
  - ``summary``: stats.compare with per-run test accuracies only (no per-question files), binomial floor;
  - the same on ``SEEDS`` noise (a run's own luck ~60 % of its variance, per-run sd ~0.036), on the issue's
    summary-only null (objectives ~ N(0.6, 0.03) rounded to 1/64; ranking and verdict on the same value), and with
    one configuration collapsed (every answer wrong: false verdicts among the others).
- ``power``: one configuration truly 0.25 lower (3 seeds) or 0.10 lower (5 seeds) in mean accuracy: the share of
  sweeps where it gets ``worse``.
- ``check``: ``--check`` sweeps per cell run through stats.compare itself (RunRecord per run, per-question dicts),
  counted where its verdicts differ from the vectorised path the rates come from (must be 0).
"""

from __future__ import annotations

import math
import platform
import time

import numpy as np

from bench._common import command, machine, parser, record, write
from grpo_sweep.reading.stats import RunRecord, compare
from grpo_sweep.search.simulate import (
    QUESTIONS,
    SEEDS,
    batch_verdicts,
    rounded_objectives,
    simulate,
    uncorrected_verdicts,
)

CONFIGS = (3, 5, 10)
SEED_COUNTS = (3, 5)
POWER_CELLS = ((3, -0.25), (5, -0.10), (3, -0.10))


def mc_error(rate: float, n: int) -> float:
    return math.sqrt(max(rate * (1 - rate), 0.05 * 0.95) / n)


def check(val, test, sweeps: int, questions: bool) -> int:
    """Sweeps where stats.compare's verdicts differ from batch_verdicts'."""
    batch = batch_verdicts(val if questions else val.mean(-1), test, questions=questions)
    k, seeds = test.shape[1:3]
    differ = 0
    for i in range(sweeps):
        groups = {
            c: [
                RunRecord(
                    s,
                    val[i, c, s].mean(),
                    test[i, c, s].mean(),
                    test.shape[-1],
                    {f"q{q}": test[i, c, s, q] for q in range(test.shape[-1])} if questions else None,
                )
                for s in range(seeds)
            ]
            for c in range(k)
        }
        rows = compare(groups)
        calls = {r.config: {"better": 1, "worse": -1}.get(r.verdict, 0) for r in rows}
        differ += rows[0].config != batch.reference[i] or [calls[c] for c in range(k)] != batch.calls[i].tolist()
    return differ


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--sweeps", type=int, default=1000, help="simulated sweeps per cell")
    cli.add_argument("--check", type=int, default=50, help="sweeps per cell also run through stats.compare")
    cli.add_argument("--seed", type=int, default=2026)
    args = cli.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.sweeps
    started = time.perf_counter()
    null, power = [], []
    differ = checked = 0
    for k in CONFIGS:
        for seeds in SEED_COUNTS:
            row = {"configs": k, "seeds": seeds}
            val, test = simulate(rng, n, k, seeds, QUESTIONS)
            row["per_run_sd"] = round(float(test.mean(-1).std(2, ddof=1).mean()), 4)
            row["old"] = float(uncorrected_verdicts(test.mean(-1)).any_false().mean())
            row["questions"] = float(batch_verdicts(val, test).any_false().mean())
            row["summary"] = float(batch_verdicts(val.mean(-1), test, questions=False).any_false().mean())
            if args.check:
                for questions in (True, False):
                    differ += check(val[: args.check], test[: args.check], args.check, questions)
                    checked += args.check
            val, test = simulate(rng, n, k, seeds, SEEDS)
            row["seeds_noise_per_run_sd"] = round(float(test.mean(-1).std(2, ddof=1).mean()), 4)
            row["seeds_noise_old"] = float(uncorrected_verdicts(test.mean(-1)).any_false().mean())
            row["seeds_noise_questions"] = float(batch_verdicts(val, test).any_false().mean())
            row["seeds_noise_summary"] = float(batch_verdicts(val.mean(-1), test, questions=False).any_false().mean())
            objectives = rounded_objectives(rng, n, k, seeds)
            row["issue_old"] = float(uncorrected_verdicts(objectives).any_false().mean())
            row["issue_summary"] = float(batch_verdicts(objectives, objectives, questions=False).any_false().mean())
            val, test = simulate(rng, n, k, seeds, QUESTIONS)
            val[:, 0], test[:, 0] = 0.0, 0.0
            others = np.arange(k) != 0
            row["collapsed_questions"] = float(batch_verdicts(val, test).any_false(others).mean())
            row["collapsed_called_worse"] = float((batch_verdicts(val, test).calls[:, 0] == -1).mean())
            null.append(row)
            print(row, flush=True)
        for seeds, shift in POWER_CELLS:
            val, test = simulate(rng, n, k, seeds, QUESTIONS, shifts={0: shift})
            others = np.arange(k) != 0
            q = batch_verdicts(val, test)
            row = {
                "configs": k,
                "seeds": seeds,
                "true_difference": shift,
                "measured_difference": round(float(test[:, 0].mean() - test[:, 1:].mean()), 4),
                "old": float((uncorrected_verdicts(test.mean(-1)).calls[:, 0] == -1).mean()),
                "questions": float((q.calls[:, 0] == -1).mean()),
                "summary": float((batch_verdicts(val.mean(-1), test, questions=False).calls[:, 0] == -1).mean()),
                "questions_false_among_equal": float(q.any_false(others).mean()),
            }
            objectives = rounded_objectives(rng, n, k, seeds, shifts={0: shift})
            row["issue_old"] = float((uncorrected_verdicts(objectives).calls[:, 0] == -1).mean())
            row["issue_summary"] = float(
                (batch_verdicts(objectives, objectives, questions=False).calls[:, 0] == -1).mean()
            )
            power.append(row)
            print(row, flush=True)
    elapsed = time.perf_counter() - started
    worst = max(
        max(
            r["questions"],
            r["summary"],
            r["seeds_noise_questions"],
            r["seeds_noise_summary"],
            r["issue_summary"],
            r["collapsed_questions"],
        )
        for r in null
    )
    result = {
        "command": command("bench.studies.null_sweeps"),
        "sweeps_per_cell": n,
        "seed": args.seed,
        "mc_error_at_0.05": round(mc_error(0.05, n), 4),
        "null": null,
        "power": power,
        "worst_new_null_rate": worst,
        "compare_checked_sweeps": checked,
        "compare_disagreements": differ,
        "runtime_s": round(elapsed, 1),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": machine(),
    }
    record("null_sweeps", result)
    write("null_sweeps.md", markdown(result))


def markdown(result: dict) -> str:
    pct = lambda x: f"{x:.3f}"  # noqa: E731
    lines = [
        "# Null sweeps: P(any false better/worse) and power",
        "",
        f"`{result['command']}` — {result['sweeps_per_cell']} sweeps per cell, Monte Carlo error at 0.05: "
        f"±{result['mc_error_at_0.05']} (1 sd); {result['runtime_s']} s on {result['machine']} "
        f"(Python {result['python']}, numpy {result['numpy']}). stats.compare itself agreed with the "
        f"vectorised path on {result['compare_checked_sweeps']} sweeps "
        f"({result['compare_disagreements']} disagreements).",
        "",
        "## Null: every configuration the same (family-wise error; 0.05 is the bound)",
        "",
        "Built-in-task-like noise (per-run test accuracy sd ~0.03). `old`: before (paired t vs the best, no "
        "correction); `questions`: now, per-question outcomes; `summary`: now, per-run accuracies only "
        "(binomial floor); `issue`: the issue's N(0.6, 0.03) rounded to 1/64; `seeds noise`: a run's own luck "
        "is ~60 % of its variance (~30 % above); `collapsed`: one configuration answers nothing right, "
        "false verdicts among the others.",
        "",
        "| configs x seeds | per-run sd | old | questions | summary | issue old | issue summary | "
        "seeds-noise old | seeds-noise questions | seeds-noise summary | collapsed questions |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["null"]:
        lines.append(
            f"| {r['configs']} x {r['seeds']} | {r['per_run_sd']} | {pct(r['old'])} | {pct(r['questions'])} | "
            f"{pct(r['summary'])} | {pct(r['issue_old'])} | {pct(r['issue_summary'])} | "
            f"{pct(r['seeds_noise_old'])} | {pct(r['seeds_noise_questions'])} | "
            f"{pct(r['seeds_noise_summary'])} | {pct(r['collapsed_questions'])} |"
        )
    lines += [
        "",
        "## Power: one configuration truly lower, P(it is called `worse`)",
        "",
        "| configs x seeds | true Δ | measured Δ | old | questions | summary | issue old | issue summary | "
        "false among the equal (questions) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["power"]:
        lines.append(
            f"| {r['configs']} x {r['seeds']} | {r['true_difference']:+.2f} | {r['measured_difference']:+.3f} "
            f"| {pct(r['old'])} | {pct(r['questions'])} | {pct(r['summary'])} | {pct(r['issue_old'])} | "
            f"{pct(r['issue_summary'])} | {pct(r['questions_false_among_equal'])} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
