"""Seeds where the answer is open (hydra/sweeper=seeds): does the family-wise error survive the adaptivity, and what
does it save against a fixed number of seeds?

    python -m bench.studies.seed_allocation [--sweeps 2000]   # -> bench/results/seed_allocation.json (+ .md)

The whole adaptive procedure (grpo_sweep/search/seeds/sequential.py: the design replayed on validation, the verdicts on
test) is simulated with grpo_sweep/search/simulate.py: 64 validation and 64 test questions with their own
difficulty; each run's own luck shared by its validation and test answers (so a configuration stopped because its
first seeds were unlucky carries that luck into its test); no seed effect shared across configurations; the last
k // 2 configurations noisier (their run luck ``--noisy`` times the others'); every configuration's seeds 1..8 drawn
up front, the procedure reading only those it asks for. ``min_seeds`` 2, ``max_seeds`` 8, alpha 0.05.

- ``null``: every configuration the same; P(any false better/worse), for 3, 5 and 10 configurations, on the
  built-in task's noise (per-run test accuracy sd ~0.03) and on a stress noise (a run's own luck ~60 % of its
  variance: validation and test of a run agree most), without and with a budget (``max_runs`` = 3/4 of k x 8).
- ``saving``: one clearly worse configuration (-0.25) and two close ones (+0.03 apart), and one moderately worse
  (-0.10): runs used and power, against the fixed design (every configuration 8 seeds, stats.compare at 0.05).
"""

from __future__ import annotations

import platform
import time

import numpy as np

from bench._common import command, machine, parser, record, write
from grpo_sweep.search.seeds import sequential
from grpo_sweep.search.simulate import Noise, adaptive_sweeps, batch_verdicts, simulate

CONFIGS = (3, 5, 10)
SETTINGS = sequential.Settings(min_seeds=2, max_seeds=8, max_runs=None, alpha=0.05)
NOISES = {"built-in": Noise(seed_sd=0.0), "stress": Noise(question_sd=16.0, run_sd=1.2, seed_sd=0.0)}


def fixed(rng: np.random.Generator, sweeps: int, k: int, noise: Noise, shifts: dict, noisy: float):
    val, test = simulate(rng, sweeps, k, SETTINGS.max_seeds, noise, shifts, noisy)
    return batch_verdicts(val, test)


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--sweeps", type=int, default=2000, help="simulated sweeps per cell")
    cli.add_argument("--noisy", type=float, default=2.0, help="the noisier half's run luck, times the others'")
    cli.add_argument("--seed", type=int, default=2026)
    args = cli.parse_args()
    rng = np.random.default_rng(args.seed)
    n, started = args.sweeps, time.perf_counter()
    null = []
    for name, noise in NOISES.items():
        for k in CONFIGS:
            row = {"noise": name, "configs": k}
            for label, settings in (("no budget", SETTINGS), ("budget", sequential.Settings(2, 8, 6 * k, 0.05))):
                a = adaptive_sweeps(rng, n, k, settings, noise, noisy=args.noisy)
                row[label] = float(a.any_false(np.zeros(k)).mean())
                row[f"{label} runs"] = round(float(a.runs.mean()), 2)
            row["fixed 8 seeds"] = float(fixed(rng, n, k, noise, {}, args.noisy).any_false().mean())
            null.append(row)
            print(row, flush=True)
    saving = []
    for label, shifts, close in (
        ("one clearly worse (-0.25), two close (+0.03)", {0: -0.25, 2: 0.03}, True),
        ("one moderately worse (-0.10)", {0: -0.10}, False),
    ):
        noise = NOISES["built-in"]
        a = adaptive_sweeps(rng, n, 3, SETTINGS, noise, shifts=shifts, noisy=args.noisy)
        f = fixed(rng, n, 3, noise, shifts, args.noisy)
        row = {
            "case": label,
            "adaptive runs": round(float(a.runs.mean()), 2),
            "adaptive seeds per configuration": [round(float(x), 2) for x in a.seeds.mean(0)],
            "fixed runs": 3 * SETTINGS.max_seeds,
            "adaptive P(worse)": float(a.called(0).mean()),
            "fixed P(worse)": float((f.calls[:, 0] == -1).mean()),
        }
        if close:
            row["adaptive P(close pair called)"] = float((a.called(1, -1) | a.called(2, 1)).mean())
            ref = f.reference
            row["fixed P(close pair called)"] = float(
                ((ref == 2) & (f.calls[:, 1] == -1) | (ref == 1) & (f.calls[:, 2] == 1)).mean()
            )
        saving.append(row)
        print(row, flush=True)
    result = {
        "command": command("bench.studies.seed_allocation"),
        "sweeps_per_cell": n,
        "seed": args.seed,
        "noisy": args.noisy,
        "settings": SETTINGS.__dict__,
        "null": null,
        "saving": saving,
        "worst_null": max(max(r["no budget"], r["budget"]) for r in null),
        "runtime_s": round(time.perf_counter() - started, 1),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": machine(),
    }
    record("seed_allocation", result)
    write("seed_allocation.md", markdown(result))


def markdown(result: dict) -> str:
    lines = [
        "# Seeds where the answer is open: the null and the saving",
        "",
        f"`{result['command']}` — {result['sweeps_per_cell']} simulated sweeps per cell (Monte Carlo sd at 0.05: "
        f"±{(0.05 * 0.95 / result['sweeps_per_cell']) ** 0.5:.3f}); min_seeds 2, max_seeds 8, alpha 0.05; half "
        f"the configurations {result['noisy']:g}x noisier; {result['runtime_s']} s on {result['machine']}.",
        "",
        "## Null: P(any false better/worse) (0.05 is the bound)",
        "",
        "| noise | configs | adaptive | runs | adaptive, max_runs = 6k | runs | fixed 8 seeds |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["null"]:
        lines.append(
            f"| {r['noise']} | {r['configs']} | {r['no budget']:.4f} | {r['no budget runs']} | "
            f"{r['budget']:.4f} | {r['budget runs']} | {r['fixed 8 seeds']:.4f} |"
        )
    lines += [
        "",
        "## Saving against the fixed design (3 configurations, 8 seeds at most)",
        "",
        "| case | runs: adaptive / fixed | seeds per configuration | P(worse called): adaptive / fixed | "
        "P(close pair called): adaptive / fixed |",
        "|---|---|---|---|---|",
    ]
    for r in result["saving"]:
        close = (
            f"{r['adaptive P(close pair called)']:.3f} / {r['fixed P(close pair called)']:.3f}"
            if "adaptive P(close pair called)" in r
            else "-"
        )
        lines.append(
            f"| {r['case']} | {r['adaptive runs']} / {r['fixed runs']} | "
            f"{', '.join(map(str, r['adaptive seeds per configuration']))} | "
            f"{r['adaptive P(worse)']:.3f} / {r['fixed P(worse)']:.3f} | {close} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
