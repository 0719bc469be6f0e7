"""`python -m grpo_sweep.sweeps.next_seeds <sweep_dir>`: the runs a sweep's comparisons still need, as commands.

It replays hydra/sweeper=seeds' design (sequential.plan, the rule the sweeper itself follows) over the runs on
disk, of a seeds sweep or of a plain grid with seeds, and prints one ``python launch.py -m ...`` line per
configuration that needs more seeds; or that the design has ended (the verdicts are in the report), or that the
round's runs are still running. For a seeds sweep the lines start exactly the runs the sweeper would start next,
in the directories it would give them (``<sweep>/<configuration>/seed<s>``), so the sweeper, the report and this
command all read them as the sweep's own. A grid's added runs go under ``<sweep>/more_seeds/`` in the same layout;
its seeds by index are those the grid used, sorted, then one past the largest, and so on.

Useful where the sweeper cannot run the rounds itself (runs started by hand, on another machine, a grid run
before the sweeper existed), and as the what-if of other settings (``--max-seeds``). Reads the runs through
results.SweepResults; no torch; scipy only once a look is judged.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import asdict, fields, replace
from pathlib import Path

from ...reading.results import SweepResults
from ...reading.stats import VERDICT_MODES, is_seed
from ...reading.tables import aligned_columns
from ...run.files import write_json_atomic
from ..base import read_json
from . import sequential
from .design import GRID_SEEDS_FILE, MORE_SEEDS, SEEDS_FILE, Adaptive, GridSeeds, seeds_run_dir

LAUNCH = "python launch.py -m"
# what --json's ``reason`` says: runs to start, runs of the round still running, or why nothing is left to run
TO_RUN, RUNNING, DECIDED, FAILED, ENDED = "to run", "running", "decided", "failed", "ended"


def read_design(sweep_dir: Path, given: dict | None = None) -> Adaptive:
    """The sweep as the seeds sweeper's design sees it: a seeds sweep's own (its seeds.json), or a grid's
    (GridSeeds). ``given``: settings that replace the recorded ones (a grid: the sweeper's defaults,
    sequential.Settings). A one-line ValueError for a directory that is neither, or for bad settings."""
    from .. import of_sweep

    sweep_dir = Path(sweep_dir)
    strategy = of_sweep(sweep_dir)
    if strategy.no_more_seeds:
        raise ValueError(f"{sweep_dir} {strategy.no_more_seeds}")
    results = strategy.read(sweep_dir)
    design = read_json(sweep_dir / SEEDS_FILE) if strategy.name == "seeds" else None
    if design is None:
        _check_grid(results)
    # a grid's: those an earlier call recorded (GRID_SEEDS_FILE), else sequential.Settings' defaults, which are
    # hydra/sweeper=seeds' (search/seeds/config.py takes them from there)
    recorded = (
        sequential.recorded_settings(design["settings"])
        if design is not None
        else sequential.recorded_settings(read_json(sweep_dir / GRID_SEEDS_FILE))
    )
    settings = replace(recorded, **(given or {}))
    k = len(design["configs"]) if design is not None else len(results.configurations)
    if k < 2:
        only = " ".join(
            design["configs"][0]
            if design is not None
            else [o for o in results.runs[0].summary.overrides or [] if not is_seed(o.partition("=")[0])]
        )
        raise ValueError(
            f"{sweep_dir}: one configuration ({only or 'the defaults'}): next_seeds allocates seeds "
            "between configurations; sweep at least two (reward_mix=format,correct)"
        )
    try:
        sequential.check_settings(settings, k)
    except ValueError as exc:  # its words name the sweeper's keys; here they are options
        message = str(exc)
        for field in fields(sequential.Settings):
            message = message.replace(f"hydra.sweeper.{field.name}", "--" + field.name.replace("_", "-"))
        raise ValueError(message) from None
    if design is None:
        return GridSeeds(results, settings)
    return Adaptive(results, {**design, "settings": asdict(settings)})


def _check_grid(results: SweepResults) -> None:
    where = results.sweep_dir
    if not results.runs:
        raise ValueError(
            f"{where} holds no runs (no <run>/.hydra/config.yaml under it) and no seeds.json: is it "
            "a sweep's directory?"
        )
    if any(run.dir.resolve() == where.resolve() for run in results.runs):
        raise ValueError(f"{where} is one run's directory, not a sweep's")


def overrides(adaptive: Adaptive, c: int, seeds: list[int], base: Path, run_dir: Path | None = None) -> list[str]:
    """The overrides that run configuration c's ``seeds`` where the sweep reads them: the configuration's own (as
    search/seeds/sweeper.py's jobs give them), the seeds, the sweep's directory and ``base``/<c>/seed<s> under it
    (one seed: that path; several: the path through the seed key, which Hydra fills in per run), or ``run_dir``,
    a run's own directory (a killed run resumes there)."""
    key = adaptive.design["seed_key"]
    sweep_dir = adaptive.results.sweep_dir
    seed = str(seeds[0]) if len(seeds) == 1 else "${" + key.lstrip("+~") + "}"
    where = run_dir or seeds_run_dir(base, c, seed)  # type: ignore[arg-type]
    return [
        *adaptive.configs[c],
        f"{key}={','.join(map(str, seeds))}",
        f"hydra.sweep.dir={sweep_dir}",
        f"hydra.sweep.subdir={where.relative_to(sweep_dir).as_posix()}",
    ]


def command(parts: list[str]) -> str:
    return " ".join([LAUNCH, *map(shlex.quote, parts)])


def next_seeds(sweep_dir: Path, given: dict | None = None) -> dict:
    """Where the design stands and what to run next, as --json prints it: ``configurations`` (each with its seeds
    so far, why it stopped, the seeds it needs and their ``line``), ``todo`` (one entry per run of the round not
    finished: to run, or running), ``done`` and ``reason`` (TO_RUN, RUNNING, DECIDED, FAILED, ENDED), ``message``."""
    adaptive = read_design(sweep_dir, given)
    plan, s, sweep_dir = adaptive.plan, adaptive.settings, adaptive.results.sweep_dir
    grid = isinstance(adaptive, GridSeeds)
    base = sweep_dir / MORE_SEEDS if grid else sweep_dir
    asked = {c: state.seeds for c, state in enumerate(plan.states)}
    for c, i in plan.round:
        asked[c] = max(asked[c], i + 1)
    todo = []
    for c, i in plan.todo:
        run = adaptive.run(c, i)
        parts = overrides(adaptive, c, [adaptive.seed(i)], base, run.dir if run is not None else None)
        todo.append(
            {
                "index": c,
                "config": adaptive.labels[c],
                "seed": adaptive.seed(i),
                "seed_index": i,
                "state": TO_RUN if run is None else RUNNING,
                "run_dir": str(adaptive.run_dir(c, i)),
                "overrides": parts,
                "line": command(parts),
            }
        )
    # the design's own verdicts, once it has ended: for a grid nothing else gives them (its report compares the
    # configurations on the seeds they share, a fixed design's verdicts)
    verdicts = {row.config: row for row in adaptive.comparisons()} if plan.done else {}
    configurations = []
    for c, state in enumerate(plan.states):
        row = verdicts.get(adaptive.labels[c])
        runs = [(adaptive.seed(i), adaptive.run(c, i)) for i in range(asked[c]) if (c, i) not in plan.todo]
        new = [t["seed"] for t in todo if t["index"] == c and t["state"] == TO_RUN]
        parts = overrides(adaptive, c, new, base) if new else None
        configurations.append(
            {
                "index": c,
                "config": adaptive.labels[c],
                "overrides": list(adaptive.configs[c]),
                "seeds": [seed for seed, run in runs if run.summary.status == "completed"],
                "failed": [seed for seed, run in runs if run.summary.status != "completed"],
                "running": [t["seed"] for t in todo if t["index"] == c and t["state"] == RUNNING],
                "to_run": new,
                "stop": state.stop,
                "stopped": adaptive.stopped_text(c) if state.stop else None,
                "verdict": row.verdict if row else None,
                "delta": row.delta if row else None,
                "low": row.low if row else None,
                "high": row.high if row else None,
                "line": command(parts) if parts else None,
                "run_overrides": parts,
            }
        )
    to_run = [t for t in todo if t["state"] == TO_RUN]
    if grid and to_run:  # the report reads the design these lines follow once their runs exist
        write_json_atomic(sweep_dir / GRID_SEEDS_FILE, asdict(s))
    stops = {state.stop for state in plan.states}
    if to_run:
        reason = TO_RUN
    elif todo:
        reason = RUNNING
    elif stops <= {sequential.DECIDED, sequential.ALL_DECIDED}:
        reason = DECIDED
    else:
        reason = FAILED if sequential.FAILED in stops else ENDED
    return {
        "sweep_dir": str(sweep_dir),
        "kind": "grid" if grid else "seeds sweep",
        "seed_key": adaptive.design["seed_key"],
        "settings": asdict(s),
        "runs": plan.runs,
        "budget": s.budget(len(plan.states)),
        "done": plan.done,
        "reason": reason,
        "message": _message(reason, todo, sweep_dir, grid),
        "configurations": configurations,
        "todo": todo,
        "problems": adaptive.results.problems,
    }


def _message(reason: str, todo: list[dict], sweep_dir: Path, grid: bool) -> str:
    running = [t for t in todo if t["state"] == RUNNING]
    still = (
        (
            f"{len(running)} run(s) of the round still running ({', '.join(t['run_dir'] for t in running)}); "
            "a killed one: its line under todo in --json continues it. "
        )
        if running
        else ""
    )
    again = f"python -m grpo_sweep.sweeps.next_seeds {sweep_dir}"
    if reason == TO_RUN:
        how = (
            ""
            if grid
            else (
                f" (or the seeds sweep's own command again, with hydra.sweep.dir={sweep_dir}: it starts the same runs)"
            )
        )
        return (
            f"{still}Next: {len(todo) - len(running)} run(s), a line per configuration below{how}; when they "
            f"end, ask again: {again}"
        )
    if reason == RUNNING:
        return f"{still}Nothing to start until they end; then ask again: {again}"
    report = (
        f"the verdicts above are the design's, each against the leader of its last look (the grid's report, "
        f"python -m grpo_sweep.sweeps.report {sweep_dir}, compares the configurations on the seeds they "
        f"share)"
        if grid
        else f"the verdict table: python -m grpo_sweep.sweeps.report {sweep_dir} (report.md)"
    )
    return {
        DECIDED: f"Nothing to run: every comparison is decided; {report}",
        FAILED: f"Nothing to run: the design has ended, some configuration stopped by a failed run (to try it "
        f"again remove its directory and ask again); {report}",
        ENDED: f"Nothing to run: the design has ended (each configuration's reason above); {report}",
    }[reason]


def text(out: dict) -> str:
    s = out["settings"]
    head = (
        f"{out['kind'].capitalize()} {out['sweep_dir']}: {len(out['configurations'])} configurations, "
        f"{s['min_seeds']} to {s['max_seeds']} seeds each ({out['seed_key']}), alpha {s['alpha']:g}, "
        f"{s.get('verdicts', sequential.Settings.verdicts)} verdicts; "
        f"the design's runs so far, this round's included: {out['runs']} of at most {out['budget']}"
    )
    rows = []
    for c in out["configurations"]:
        seeds = ",".join(map(str, c["seeds"])) or "-"
        where = (
            c["stopped"]
            or "; ".join(
                part
                for part in (
                    f"seed {','.join(map(str, c['to_run']))} to run" if c["to_run"] else "",
                    f"seed {','.join(map(str, c['running']))} running" if c["running"] else "",
                )
                if part
            )
            or "waits for the round's other runs"
        )
        verdict = c["verdict"] or ""
        if c["delta"] is not None:
            verdict += (
                f" (Δ {c['delta']:+.3f}" + ("" if c["low"] is None else f" [{c['low']:+.3f}, {c['high']:+.3f}]") + ")"
            )
        rows.append([c["config"], f"seeds {seeds}", where, verdict])
    lines = [head, *aligned_columns(rows, indent="  "), out["message"]]
    lines += [c["line"] for c in out["configurations"] if c["line"]]
    if out.get("problems"):
        lines += ["Damaged or missing files, each with what was done instead:", *(f"  {p}" for p in out["problems"])]
    return "\n".join(lines)


def _count(text_value: str) -> int:
    try:
        return int(text_value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text_value!r}: use a whole number") from None


def _runs(text_value: str) -> int | str:
    return "none" if text_value.lower() in ("none", "null") else _count(text_value)


def _alpha(text_value: str) -> float:
    try:
        return float(text_value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text_value!r}: use a family-wise error rate strictly between 0 and 1"
        ) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line naming the bad value, as every error of this project
        print(f"error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m grpo_sweep.sweeps.next_seeds", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir", type=Path)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print it as JSON: configurations, their seeds so far, "
        "the runs to do with their override lines, done, reason",
    )
    settings = "default: the seeds sweep's seeds.json, else hydra/sweeper=seeds' default"
    parser.add_argument("--min-seeds", type=_count, help=settings)
    parser.add_argument("--max-seeds", type=_count, help=settings)
    parser.add_argument("--max-runs", type=_runs, help=f"the whole sweep's runs, or none; {settings}")
    parser.add_argument("--alpha", type=_alpha, help=f"the verdicts' family-wise error; {settings}")
    parser.add_argument(
        "--verdicts",
        choices=VERDICT_MODES,
        help=f"moderated (seed-paired, borrowing across configurations) or strict (each alone); {settings}",
    )
    args = parser.parse_args(argv)
    if not args.sweep_dir.is_dir():
        print(f"error: sweep_dir={args.sweep_dir} is not a directory", file=sys.stderr)
        return 2
    given = {
        key: value
        for key, value in [
            ("min_seeds", args.min_seeds),
            ("max_seeds", args.max_seeds),
            ("max_runs", args.max_runs),
            ("alpha", args.alpha),
            ("verdicts", args.verdicts),
        ]
        if value is not None
    }
    if given.get("max_runs") == "none":
        given["max_runs"] = None
    try:
        out = next_seeds(args.sweep_dir, given)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1) if args.json else text(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
