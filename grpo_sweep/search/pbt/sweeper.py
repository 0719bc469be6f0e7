"""The PBT sweeper (``hydra/sweeper=grpo_pbt``, chosen by ``hparams_search=pbt``): it drives the population's
rounds on the login node, each member's round one job on the configured launcher (local, pool, submitit_local,
SLURM), every job through the same gate as any sweep's. The population's logic is ``population.py``, its plot
``plot.py``.

One job a member and round: a job is a plain run continued in its member's directory (``trainer.pause_at_step``),
so a preempted or requeued member resumes from its own checkpoint as any run does, and the driver holds no state
but pbt.jsonl. No torch here.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from ...config.checks import SEED_MAX, seed_error
from ...run.files import check_path_name, write_json_atomic
from ...run.phases import phases_of
from ...run.resume import CHECKPOINTS, remember_config
from ..base import StrategySweeper, dotted_params, merge_overrides, quoted, read_json, same_design
from .population import (
    BEST_SCHEDULE,
    HEAD_TO_HEAD,
    LINEAGE,
    LOOKS,
    MEMBERS_DIR,
    PLOT,
    Lineage,
    Param,
    PBTError,
    Settings,
    check_head_to_head,
    check_metric,
    check_settings,
    decide,
    lineage_overrides,
    logged_score,
    member_dir,
    member_overrides,
    parse_params,
    ranked,
    round_score,
    start_row,
    take_over,
)
from .report import exploits_text, guard_text, lead_text, timeline, write_report

log = logging.getLogger(__name__)


class PBTSweeperImpl(StrategySweeper):
    # the population's first round passes the gate before anything is written; every later round's jobs pass it
    # again in the launcher, as each batch of any sweep does

    def sweep(self, arguments: list[str]) -> Any:
        from ...launching.gate import plan_runs

        sweep_dir = Path(self.config.hydra.sweep.dir)
        job_cfg = self._compose(arguments)
        with self._refusals():
            check_metric(job_cfg.optimized_metric)
            if self.config.hydra.launcher.get("detach"):
                raise PBTError(
                    "hydra.launcher.detach=true: a PBT's driver ranks each round's members before the next "
                    "round starts, so it stays; run it where it may (tmux, a login session, a small job)"
                )
            check_path_name("hydra.sweeper.name", self.settings.name)  # the PBT's directory, under output_root
            if phases_of(job_cfg):
                raise PBTError(
                    "trainer.phases: a PBT changes its members' values itself, round by round (each member is a run "
                    "paused and continued); drop trainer.phases, or let PBT move those values (hydra.sweeper.params)"
                )
            settings = check_settings(self.settings, job_cfg.trainer.max_steps)
            check_head_to_head(self.settings.get("head_to_head_seeds"))
            # each member's seed is trainer.seed + member, the head-to-head's the ones after: the last must be a seed
            last_seed = job_cfg.trainer.seed + settings.population + int(self.settings.get("head_to_head_seeds")) - 1
            if seed_error("trainer.seed", last_seed):
                raise PBTError(
                    f"trainer.seed={job_cfg.trainer.seed}: a PBT's seeds run to trainer.seed + population + "
                    f"head_to_head_seeds - 1 = {last_seed}, beyond the last seed, {SEED_MAX}"
                )
            # GRPO divides each group's weighted reward by its spread unless scale_rewards is none: then the
            # weights' total is a step size of its own, and each weight moves alone
            scale = OmegaConf.select(job_cfg, "trainer.args.scale_rewards", default="group")
            settings = replace(settings, weights_by_ratio=scale not in ("none", False))
            mix = OmegaConf.to_container(job_cfg.reward_mix, resolve=True)
            # a dotted key on the command line arrives nested (+hydra.sweeper.params.trainer.beta={low:0,high:0.1})
            given = dotted_params(OmegaConf.to_container(self.settings.params, resolve=True), ("low", "high", "log"))
            params = parse_params(given, mix, job_cfg)
            lineage = Lineage.read(sweep_dir / LINEAGE)
            start = self._start_row(settings, params, job_cfg)
            same_design(
                sweep_dir / LINEAGE,
                lineage.start,
                start,
                ("settings", "params", "metric", "base_seed"),
                "a PBT",
                "give another hydra.sweeper.name",
            )
            self._check_ranges(arguments, params)
            first = self._jobs(
                arguments,
                params,
                settings,
                start["base_seed"],
                [[v] for v in start["population"]],
                list(range(settings.population)),
            )
            if lineage.start is None:  # round 0's runs, as the launcher will start them (nothing is written before)
                plan_runs(self.launcher, first, 0, config=self.config, loader=self.hydra_context.config_loader)
        if self._dry_run_or_begin(sweep_dir, first):
            return []  # the launcher printed the first round's jobs; the later ones depend on its results
        if lineage.start is None:
            lineage.write(start)
        log.info(
            "PBT %r: %d members x %d rounds of %d steps, ranked on %s -> %s",
            self.settings.name,
            settings.population,
            settings.rounds,
            settings.steps_per_round,
            job_cfg.optimized_metric,
            sweep_dir,
        )
        base_seed = start["base_seed"]
        if not settings.synchronous:
            self._async_rounds(arguments, lineage, params, settings, base_seed, job_cfg.optimized_metric)
        for round_ in range(settings.rounds if settings.synchronous else 0):
            if round_ not in lineage.scores:
                self._train_round(arguments, lineage, params, settings, base_seed, round_, job_cfg.optimized_metric)
            if round_ == settings.rounds - 1:
                break
            if round_ not in lineage.decisions:
                values = [lineage.values[m][round_] for m in range(settings.population)]
                looks = (read_json(sweep_dir / LOOKS / f"round-{round_}.json") or {}).get("members")
                propose = _pb2(lineage, params, settings, round_) if settings.explore == "pb2" else None
                take_overs, held_back = decide(lineage.scores[round_], values, params, settings, round_, looks, propose)
                lineage.write({"event": "decide", "round": round_, "take_overs": take_overs, "held_back": held_back})
            if round_ not in lineage.carried_out:
                step = (round_ + 1) * settings.steps_per_round
                copied = [take_over(sweep_dir, t["member"], t["donor"], step) for t in lineage.decisions[round_]]
                lineage.write({"event": "carried_out", "round": round_, "bytes": sum(copied)})
        if lineage.test is None:
            self._test_best(arguments, lineage, params, settings, base_seed, job_cfg.optimized_metric)
        replay = self._write_best_schedule(arguments, lineage, params, settings, job_cfg)
        head_to_head = self._head_to_head(arguments, lineage, params, settings)
        from .plot import plot_pbt

        looks = {r: (read_json(sweep_dir / LOOKS / f"round-{r}.json") or {}).get("members") for r in lineage.scores}
        metric = job_cfg.optimized_metric
        plot_pbt(lineage, params, settings.steps_per_round, metric, sweep_dir / PLOT, looks, settings.noise_z)
        report = write_report(sweep_dir, lineage, params, metric, shell_line(replay), head_to_head, looks)
        print(pbt_report(lineage, params, sweep_dir, metric, replay))
        print(f"{head_to_head}\nreport with the lineage, the moved values' plot and the verdict: {report}")
        return []

    # -- the gate ------------------------------------------------------------------------------------------
    def _start_row(self, settings: Settings, params: list[Param], job_cfg: DictConfig) -> dict:
        return start_row(self.settings.name, settings, params, job_cfg.optimized_metric, job_cfg.trainer.seed)

    def _check_ranges(self, arguments: list[str], params: list[Param]) -> None:
        """Each range's ends on the base config through the config's checks: a value no run can take would fail
        the member that draws it, rounds later."""
        from ...config.show import first_line
        from ...launching.gate import check_config

        for p in params:
            for value in (p.low, p.high):
                try:
                    check_config(self._compose(merge_overrides(arguments, [f"{p.key}={value!r}"])), False)
                except Exception as exc:  # noqa: BLE001 - composition's errors as well as the checks'
                    raise PBTError(f"hydra.sweeper.params.{p.key}: {value:g} is refused: {first_line(exc)}") from None

    @staticmethod
    def _jobs(
        arguments: list[str],
        params: list[Param],
        settings: Settings,
        base_seed: int,
        histories: Sequence[list[dict]] | Mapping[int, list[dict]],
        members: list[int],
        pause: bool = True,
    ) -> list[list[str]]:
        return [
            merge_overrides(arguments, member_overrides(m, histories[m], params, settings, base_seed, pause))
            for m in members
        ]

    # -- rounds --------------------------------------------------------------------------------------------
    def _launch(self, jobs: list[list[str]], members: list[int], first_index: int) -> None:
        """Start ``jobs`` (one a member) on the launcher and wait (``_remember`` first)."""
        self._remember(jobs, members)
        self.launch(jobs, first_index, "a PBT member's job")  # one that died: the member has no score this round

    def _remember(self, jobs: list[list[str]], members: list[int]) -> None:
        """Record in each member's directory that its config for this round is its own (the run's resume refuses a
        directory started with another config)."""
        from ...launching.gate import compose_runs

        sweep_dir = Path(self.config.hydra.sweep.dir)
        for m, cfg in zip(members, compose_runs(self.hydra_context.config_loader, self.config, jobs)):
            if (member_dir(sweep_dir, m) / CHECKPOINTS).exists():
                remember_config(member_dir(sweep_dir, m), cfg)

    def _async_rounds(
        self,
        arguments: list[str],
        lineage: Lineage,
        params: list[Param],
        settings: Settings,
        base_seed: int,
        metric: str,
    ) -> None:
        """``hydra.sweeper.synchronous=false``: each member's rounds on its own clock (asynchronous.py), as many
        in flight as the launcher trains at once; each job started without waiting where the launcher can (the
        pool, submitit), else run before the next is started (hydra/launcher=local)."""
        from ...launching.gate import Started, stop
        from ...run.validate import ConfigError
        from .asynchronous import AsyncRounds

        sweep_dir = Path(self.config.hydra.sweep.dir)
        concurrent = getattr(self.launcher, "concurrent_runs", None)
        capacity = concurrent(settings.population) if concurrent else 1
        if hasattr(self.launcher, "runs_at_once"):
            self.launcher.runs_at_once = capacity

        def start_job(m: int, r: int) -> Any:
            jobs = self._jobs(arguments, params, settings, base_seed, {m: lineage.history(m, r)}, [m])
            self._remember(jobs, [m])
            index = r * settings.population + m
            if hasattr(self.launcher, "start"):
                return self.launcher.start(jobs, index)
            return Started(lambda: True, lambda: list(self.launcher.launch(jobs, index)), eager=True)

        def look(m: int, r: int, score: float | None) -> dict | None:
            step = (r + 1) * settings.steps_per_round
            found = _looks(sweep_dir, step, metric, [score if j == m else None for j in range(settings.population)])
            look_file = sweep_dir / LOOKS / f"round-{r}.json"
            members = (read_json(look_file) or {}).get("members") or [None] * settings.population
            members[m] = found[m]
            write_json_atomic(look_file, {"step": step, "metric": metric, "members": members})
            return found[m]

        def kept_look(m: int, r: int) -> dict | None:
            members = (read_json(sweep_dir / LOOKS / f"round-{r}.json") or {}).get("members") or []
            return members[m] if m < len(members) else None

        propose_for = (lambda r: _pb2(lineage, params, settings, r)) if settings.explore == "pb2" else None
        log.info("PBT asynchronous: each member decides as its round ends; %d jobs at a time", capacity)
        AsyncRounds(
            sweep_dir, lineage, params, settings, metric, start_job, look, kept_look, capacity, propose_for
        ).run()
        last = lineage.scores.get(settings.rounds - 1) or []
        if all(score is None for score in last):
            stop(
                ConfigError(
                    f"no member of PBT {self.settings.name!r} finished its last round; "
                    f"{_member_error(sweep_dir, settings.population)}"
                )
            )

    def _train_round(
        self,
        arguments: list[str],
        lineage: Lineage,
        params: list[Param],
        settings: Settings,
        base_seed: int,
        round_: int,
        metric: str,
    ) -> None:
        from ...launching.gate import stop
        from ...run.validate import ConfigError

        sweep_dir = Path(self.config.hydra.sweep.dir)
        step = (round_ + 1) * settings.steps_per_round
        population = range(settings.population)
        # a member whose round is on disk already (the driver was killed after it) is not trained again
        todo = [m for m in population if round_score(member_dir(sweep_dir, m), step, metric) is None]
        started = time.time()
        if todo:
            log.info(
                "PBT round %d of %d: members %s train to step %d",
                round_ + 1,
                settings.rounds,
                ",".join(map(str, todo)),
                step,
            )
            histories = [lineage.history(m, round_) for m in population]
            self._launch(
                self._jobs(arguments, params, settings, base_seed, histories, todo), todo, round_ * settings.population
            )
        scores = [round_score(member_dir(sweep_dir, m), step, metric) for m in population]
        # the look's per-question values, kept before anything of the round is decided or taken over
        looks = _looks(sweep_dir, step, metric, scores)
        look_file = sweep_dir / LOOKS / f"round-{round_}.json"
        write_json_atomic(look_file, {"step": step, "metric": metric, "members": looks})
        # where each member's round started from: its lineage's score at the round's first step (PB2's improvement)
        if round_ == 0:
            start = [logged_score(member_dir(sweep_dir, m), 0, metric) for m in population]
        else:
            donors = {t["member"]: t["donor"] for t in lineage.decisions.get(round_ - 1, [])}
            start = [lineage.scores[round_ - 1][donors.get(m, m)] for m in population]
        lineage.write(
            {
                "event": "round",
                "round": round_,
                "step": step,
                "scores": scores,
                "start": start,
                "values": [lineage.values[m][round_] for m in population],
                "trained": todo,
                "seconds": round(time.time() - started, 3),
            }
        )
        if all(score is None for score in scores):
            stop(
                ConfigError(
                    f"every member of PBT {self.settings.name!r} failed in round {round_ + 1}; "
                    f"{_member_error(sweep_dir, settings.population)}"
                )
            )

    def _test_best(
        self,
        arguments: list[str],
        lineage: Lineage,
        params: list[Param],
        settings: Settings,
        base_seed: int,
        metric: str,
    ) -> None:
        """The best member of the last round runs on to its end: its final evaluation, the test split once."""
        from ...launching.gate import stop
        from ...run.validate import ConfigError

        last = settings.rounds - 1
        scores = lineage.scores[last]
        best = ranked(scores, settings.direction)[0]
        if lineage.best is None:
            lineage.write(
                {"event": "best", "member": best, "score": scores[best], "values": lineage.history(best, last)}
            )
        sweep_dir = Path(self.config.hydra.sweep.dir)
        histories = [lineage.history(m, last) for m in range(settings.population)]
        self._launch(
            self._jobs(arguments, params, settings, base_seed, histories, [best], pause=False),
            [best],
            settings.rounds * settings.population,
        )
        summary = _member_summaries(sweep_dir, settings.population)[best]
        if summary is None or summary.status != "completed":
            why = (summary.error if summary else None) or "no summary.json"
            stop(
                ConfigError(
                    f"PBT {self.settings.name!r}: the best member {best}'s final evaluation did not "
                    f"complete ({why}); the same command tries it again"
                )
            )
        lineage.write(
            {
                "event": "test",
                "member": best,
                "test_accuracy": summary.test_accuracy,
                "test_accuracy_before": summary.test_accuracy_before,
                "test_pass_at_k": summary.test_pass_at_k,
                "test_maj_at_k": summary.test_maj_at_k,
                "test_k": summary.test_k,
                "test_samples": summary.test_samples,
                metric: summary.objective,
            }
        )

    # -- the answer ----------------------------------------------------------------------------------------
    def _head_to_head(self, arguments: list[str], lineage: Lineage, params: list[Param], settings: Settings) -> str:
        """Does moving the values during training beat holding them? The best lineage's schedule (its values round
        by round, as the replay trains them) against the best starting point held fixed (the member that led after
        round 0, its first values), each over ``head_to_head_seeds`` fresh seeds, judged by the sweep's verdicts
        (reading/: ranked on validation, test paired by seed and question). Runs in ``head_to_head/``; with 0 seeds,
        the command that runs them instead. Returns the lines to print (and report.md's)."""
        from ...reading.results import SweepResults
        from ...reading.tables import seed_block

        sweep_dir = Path(self.config.hydra.sweep.dir)
        n = int(self.settings.get("head_to_head_seeds") or 0)
        best = lineage.best["member"]
        start_best = ranked(lineage.scores[0], settings.direction)[0]
        arms = {
            "schedule": lineage_overrides(lineage.history(best, settings.rounds - 1), params, settings),
            "fixed": lineage_overrides([lineage.start["population"][start_best]] * settings.rounds, params, settings),
        }
        first_seed = lineage.start["base_seed"] + settings.population  # seeds no member trained with
        seeds = list(range(first_seed, first_seed + n))
        moved = arms["schedule"] != arms["fixed"]
        how = "its values round by round" if moved else "its values never moved"
        title = (
            f"Schedule or fixed? member {best}'s lineage ({how}) against member {start_best}'s starting values held "
            "fixed (the best after round 1)"
        )
        if not moved:
            title += " (the two are one configuration, and the verdict can only be seed noise)"
        if n == 0:
            return (
                f"{title}: not run (hydra.sweeper.head_to_head_seeds=0); the same command with "
                "hydra.sweeper.head_to_head_seeds=5 runs both over 5 fresh seeds and gives the verdict"
            )
        finished = {
            run.dir.name for run in SweepResults.read(sweep_dir / HEAD_TO_HEAD).runs if run.state == "completed"
        }
        jobs, where = [], []
        for arm, overrides in arms.items():
            for seed in seeds:
                subdir = f"{HEAD_TO_HEAD}/{arm}-{seed}"
                if f"{arm}-{seed}" in finished:
                    continue  # a continued PBT: what finished is not trained again
                jobs.append(
                    merge_overrides(arguments, [*overrides, f"trainer.seed={seed}", f"hydra.sweep.subdir={subdir}"])
                )
                where.append(subdir)
        if jobs:
            log.info("PBT head-to-head: %d runs (%s)", len(jobs), ", ".join(where))
            self.launch(jobs, settings.rounds * settings.population + 1, "a head-to-head run")
        read = SweepResults.read(sweep_dir / HEAD_TO_HEAD)
        # each configuration by its arm's name (its directory's), not its many overrides
        runs = [replace(run, config=run.dir.name.rsplit("-", 1)[0]) for run in read.runs]
        results = SweepResults(read.sweep_dir, runs, read.direction)
        block = seed_block(results)
        verdicts = {c.config: c.verdict for c in results.comparisons}
        if lineage.head_to_head is None and verdicts:
            lineage.write({"event": "head_to_head", "seeds": seeds, "arms": arms, "verdicts": verdicts})
        return "\n".join([f"{title}, {len(seeds)} seeds each ({sweep_dir / HEAD_TO_HEAD}):", *block])

    # -- what it leaves ------------------------------------------------------------------------------------
    def _write_best_schedule(
        self, arguments: list[str], lineage: Lineage, params: list[Param], settings: Settings, job_cfg: DictConfig
    ) -> list[str]:
        """The best member's mix as an option of the reward_mix group (``<sweep>/conf/reward_mix/
        best_schedule.yaml``: its weights as step schedules); returns the command line's overrides that train its
        whole lineage as one plain run: that mix, round 0's other values and seed, and from each later round's first
        step that round's values and the seed of the member whose job trained it (``trainer.phases``)."""
        from ...run.files import write_text_atomic

        sweep_dir = Path(self.config.hydra.sweep.dir).resolve()
        best = lineage.best["member"]
        last = settings.rounds - 1
        history = lineage.history(best, last)
        trained_by = lineage.trained_by[best][: last + 1]
        base_seed = lineage.start["base_seed"]
        [job] = self._jobs(arguments, params, settings, base_seed, [history] * settings.population, [best], pause=False)
        mix = OmegaConf.to_container(self._compose(job).reward_mix, resolve=True)
        conf_dir = sweep_dir / BEST_SCHEDULE.parent.parent
        searchpath = [str(p) for p in self.config.hydra.searchpath or []] + [f"file://{conf_dir}"]
        lineage_run = lineage_overrides(
            history, params, settings, [base_seed + m for m in trained_by], weights_inline=False
        )
        set_here = {o.split("=", 1)[0] for o in lineage_run}
        plain = [
            o
            for o in self._reproduce_overrides(arguments, job_cfg)
            if not o.lstrip("+~").split("=", 1)[0].startswith(("reward_mix", "hydra.searchpath"))
            and o.lstrip("+~").split("=", 1)[0] not in set_here
        ]
        overrides = [
            f"hydra.searchpath=[{','.join(map(quoted, searchpath))}]",
            *plain,
            "reward_mix=best_schedule",
            *(o for o in lineage_run if o != "trainer.pause_at_step=null"),
        ]
        score = lineage.best["score"]
        text = (
            f"# PBT {self.settings.name!r}: member {best}'s lineage (best on {lineage.start['metric']}, {score:.3f} "
            f"at step {settings.max_steps}), its reward weights as step schedules over trainer.max_steps="
            f"{settings.max_steps}; its other values and seeds round by round are the replay's trainer.phases. "
            f"Replay:\n#   python launch.py {shell_line(overrides)}\n"
        )
        write_text_atomic(sweep_dir / BEST_SCHEDULE, text + OmegaConf.to_yaml(OmegaConf.create(mix)))
        return overrides


def shell_line(overrides: list[str]) -> str:
    """The overrides as one shell command line's arguments (a list's commas and braces quoted from the shell)."""
    import shlex

    return " ".join(shlex.quote(o) for o in overrides)


def _pb2(lineage: Lineage, params: list[Param], settings: Settings, round_: int):
    """PB2's ``propose`` for the take-overs after ``round_``: a GP over every member's rounds so far, each round's
    values against its improvement (its score less its start's, better up), asked for the next round."""
    from .pb2 import pb2_explore

    observations = lineage.observations(settings.direction, None if lineage.reports else round_)

    def propose(donor: dict, going_on: list[dict], rng) -> tuple[dict, dict]:
        new, label = pb2_explore(observations, params, round_ + 1, going_on, rng)
        return new, {p.key: label for p in params}

    return propose


def _looks(sweep_dir: Path, step: int, metric: str, scores: list) -> list[dict | None]:
    """Each member's per-question values of its ranking look at ``step`` (its outcomes/val.jsonl, which a run paused
    there writes), for a metric that averages them (``val_accuracy``, ``val_accuracy_lenient``); None for another
    metric, a member without a score, or one whose record is not of that step."""
    from ...reading.results import SweepResults
    from ...run.record import OUTCOME_FIELDS

    field = OUTCOME_FIELDS.get(metric)
    if field is None:
        return [None] * len(scores)
    results = SweepResults.read(Path(sweep_dir) / MEMBERS_DIR)
    looks = []
    for m, score in enumerate(scores):
        run = results.run_at(member_dir(sweep_dir, m))
        of_step = score is not None and run is not None and run.summary.reported_step == step
        looks.append(results.outcomes(run, field, "val") if of_step else None)
    return looks


def _member_summaries(sweep_dir: Path, population: int) -> dict[int, Any]:
    """Each member's summary.json as the sweep's one reader reads it (None: the member has none)."""
    from ...reading.results import SweepResults

    results = SweepResults.read(sweep_dir)
    out: dict[int, Any] = {}
    for m in range(population):
        found = results.run_at(member_dir(sweep_dir, m))
        out[m] = found.summary if found is not None and found.summary.status != "running" else None
    return out


def _member_error(sweep_dir: Path, population: int) -> str:
    for m, summary in sorted(_member_summaries(sweep_dir, population).items()):
        if summary is not None and summary.error:
            return f"member {m}: {str(summary.error).splitlines()[0]}"
    return "no member left an error (see each member's launch.log)"


def pbt_report(lineage: Lineage, params: list[Param], sweep_dir: Path, metric: str, replay: list[str]) -> str:
    """The PBT's end on the terminal: each round's scores and take-overs, the best member, its test, the replay."""
    s = lineage.start["settings"]
    short = {p.key: (p.term or "lr") for p in params}

    def values(v: dict) -> str:
        return " ".join(f"{short[k]}={x:.3g}" for k, x in v.items())

    def score(x: Any) -> str:
        return "failed" if x is None else f"{x:.3f}"

    z = s.get("noise_z", 1.645)

    def lead(t: dict) -> str:
        return lead_text(t, z)

    lines = [
        f"PBT {lineage.start['name']!r}: {s['population']} members x {s['rounds']} rounds of "
        f"{s['steps_per_round']} steps, ranked on {metric} ({s['direction']}) -> {sweep_dir}"
    ]
    if lineage.reports:
        lines.append("  asynchronous: each member ranked as its round ended, against the others' latest looks")
        lines += timeline(lineage, params, z, bullet="    ")
    for round_, scores in sorted(lineage.scores.items() if not lineage.reports else ()):
        lines.append(
            f"  round {round_ + 1} (step {(round_ + 1) * s['steps_per_round']}): "
            + "  ".join(f"m{m} {score(x)}" for m, x in enumerate(scores))
        )
        for t in lineage.decisions.get(round_, []):
            lines.append(
                f"    m{t['member']} <- m{t['donor']}'s checkpoint{lead(t)}, then {values(t['values'])} "
                f"({'; '.join(f'{short[k]} {h}' for k, h in t['how'].items())})"
            )
        for t in lineage.held_back.get(round_, []):
            lines.append(f"    m{t['member']} goes on from its own weights: its nearest donor m{t['donor']}{lead(t)}")
    lines.append(f"  exploits: {exploits_text(lineage.exploits())}; noise guard {guard_text(s)}")
    best, test = lineage.best, lineage.test or {}
    lines.append(
        f"  best: m{best['member']} ({metric} {score(best['score'])} at step {s['rounds'] * s['steps_per_round']}); "
        f"its lineage: " + " | ".join(values(v) for v in best["values"])
    )
    if test:
        k = (
            f", pass@{test['test_k']} {score(test['test_pass_at_k'])}, "
            f"maj@{test['test_k']} {score(test['test_maj_at_k'])}"
            if test.get("test_k")
            else ""
        )
        lines.append(
            f"  test ({test.get('test_samples')} prompts, measured once, on the best member only): accuracy "
            f"{score(test.get('test_accuracy_before'))} -> {score(test.get('test_accuracy'))}{k}"
        )
    lines.append(f"  lineage: {sweep_dir / LINEAGE}, {sweep_dir / PLOT}; best mix: {sweep_dir / BEST_SCHEDULE}")
    lines.append(f"  replay as a plain run: python launch.py {shell_line(replay)}")
    return "\n".join(lines)
