"""How much do configurations of the built-in task share by seed, and what do the two verdict modes make of it?

    python -m bench.seed_correlation [--seeds 8] [--sweep DIR] [--out DIR]
                                     # -> bench/results/seed_correlation.json (+ .md)

Runs the main job's grid ``reward_mix=correct,format_correct`` x ``optimizer.learning_rate=0.0003,0.0006`` x
``trainer.seed=1..--seeds`` on the pool (``--sweep``: read a sweep already run instead), then, from each run's
test accuracy and per-question outcomes:

- for every pair of configurations, the correlation of their test accuracies by seed, and the SD of their
  difference seed-paired against treated as independent (sqrt(sd_a^2 + sd_b^2)): what pairing by seed removes;
- the sweep judged in both modes (``stats.compare``, ``strict`` and ``moderated``) on all its seeds and on the
  first 3: each configuration's verdict, Δ, interval and printed detectable difference.

The GPU check (scripts/gpu_check.sh) runs the same measurement on a GPU's model when a device is lent.
"""

from __future__ import annotations

import itertools
import math
import time
from pathlib import Path

import numpy as np

from bench._common import command, launch, machine, parser, record, write

CONFIGS = ["reward_mix=correct,format_correct", "optimizer.learning_rate=0.0003,0.0006"]


def measure(sweep: Path, first: int | None = None) -> dict:
    """The correlations and the two modes' verdicts of a sweep (its first ``first`` seeds when given)."""
    from grpo_sweep.reading import stats
    from grpo_sweep.reading.results import SweepResults

    results = SweepResults.read(sweep)
    by_config: dict[str, dict[int, float]] = {}
    groups: dict[str, list] = {}
    for config, runs in results.configurations.items():
        kept = sorted(runs, key=lambda r: r.seed)
        if first is not None:
            kept = [r for r in kept if int(r.seed[0].partition("=")[2]) <= first]
        groups[config] = [results.record(r) for r in kept]
        by_config[config] = {int(r.seed[0].partition("=")[2]): r.summary.test_accuracy for r in kept}
    pairs = []
    for a, b in itertools.combinations(sorted(by_config), 2):
        seeds = sorted(set(by_config[a]) & set(by_config[b]))
        x = np.array([by_config[a][s] for s in seeds])
        y = np.array([by_config[b][s] for s in seeds])
        paired = float(np.std(x - y, ddof=1))
        independent = float(math.sqrt(np.var(x, ddof=1) + np.var(y, ddof=1)))
        pairs.append(
            {
                "a": a,
                "b": b,
                "seeds": len(seeds),
                "correlation": round(float(np.corrcoef(x, y)[0, 1]), 3),
                "sd_paired": round(paired, 4),
                "sd_independent": round(independent, 4),
                "variance_ratio": round((independent / paired) ** 2, 2) if paired > 0 else None,
            }
        )
    verdicts = {}
    for mode in stats.VERDICT_MODES:
        rows = stats.compare(groups, mode=mode)
        verdicts[mode] = [
            {
                "config": row.config,
                "verdict": row.verdict,
                "mean": None if row.mean is None else round(row.mean, 4),
                "delta": None if row.delta is None else round(row.delta, 4),
                "low": None if row.low is None else round(row.low, 4),
                "high": None if row.high is None else round(row.high, 4),
                "mde": None if row.mde is None else round(row.mde, 4),
            }
            for row in rows
        ]
    return {"pairs": pairs, "verdicts": verdicts}


def table(result: dict) -> str:
    out = [
        f"Built-in task, {result['sweep']} ({result['runs']} runs, {result.get('wall_s', '-')} s): configurations' "
        "test accuracies by seed",
        "",
        "| pair | seeds | correlation by seed | SD of the difference, paired | treated as independent | variance "
        "ratio |",
        "|---|---|---|---|---|---|",
    ]
    for p in result["all"]["pairs"]:
        out.append(
            f"| {p['a']} vs {p['b']} | {p['seeds']} | {p['correlation']:+.2f} | {p['sd_paired']:.4f} | "
            f"{p['sd_independent']:.4f} | {p['variance_ratio']} |"
        )
    for name in ("all", "first3"):
        out += ["", f"Verdicts, {'every seed' if name == 'all' else 'the first 3 seeds'} (strict / moderated)", ""]
        out += ["| configuration | mean | strict: Δ [interval] verdict | moderated: Δ [interval] verdict |"]
        out += ["|---|---|---|---|"]
        strict, moderated = (result[name]["verdicts"][m] for m in ("strict", "moderated"))
        by = {r["config"]: r for r in moderated}
        for r in strict:
            m = by[r["config"]]

            def cell(x):
                if x["delta"] is None:
                    return x["verdict"]
                return f"{x['delta']:+.3f} [{x['low']:+.3f}, {x['high']:+.3f}] {x['verdict']}"

            out.append(f"| {r['config']} | {r['mean']} | {cell(r)} | {cell(m)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> None:
    cli = parser(__doc__)
    cli.add_argument("--seeds", type=int, default=8)
    cli.add_argument("--sweep", type=Path, default=None, help="a sweep already run (its runs are read, none trained)")
    cli.add_argument("--out", type=Path, default=Path("/tmp/grpo-sweep-seed-correlation"))
    args = cli.parse_args(argv)
    wall = None
    if args.sweep is None:
        seeds = ",".join(str(s) for s in range(1, args.seeds + 1))
        wall, _ = launch(["-m", "hydra/launcher=pool", *CONFIGS, f"trainer.seed={seeds}"], args.out)
        [args.sweep] = sorted(args.out.glob("grpo/multiruns/*"))[-1:]
    result = {
        "command": command("bench.seed_correlation", argv),
        "sweep": str(args.sweep),
        "runs": len(list(args.sweep.glob("**/summary.json"))),
        "wall_s": None if wall is None else round(wall, 1),
        "all": measure(args.sweep),
        "first3": measure(args.sweep, 3),
        "machine": machine("at the end"),
        "when": time.strftime("%Y-%m-%d %H:%M"),
    }
    record("seed_correlation", result)
    text = table(result)
    print(text)
    write("seed_correlation.md", text)


if __name__ == "__main__":
    main()
