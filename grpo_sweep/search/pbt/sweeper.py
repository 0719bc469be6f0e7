"""The PBT sweeper (``hydra/sweeper=grpo_pbt``, chosen by ``hparams_search=pbt``): it drives the population's
rounds on the login node (rounds.py), each member's round one job on the configured launcher (local, pool,
submitit_local, SLURM), every job through the same gate as any sweep's; then tests the best member once, writes
its replay and runs the head-to-head.

One job a member and round: a job is a plain run continued in its member's directory (``trainer.pause_at_step``),
so a preempted or requeued member resumes from its own checkpoint as any run does, and the driver holds no state
but pbt.jsonl. No torch here.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from ...config.checks import SEED_MAX, seed_error
from ...run.files import check_path_name, write_json_atomic
from ...run.phases import phases_of
from ...run.resume import CHECKPOINTS, remember_config
from ..base import StrategySweeper, dotted_params, merge_overrides, quoted, read_json, same_design
from .decisions import ranked, start_row
from .lineage import Due, Lineage
from .members import BEST_SCHEDULE, HEAD_TO_HEAD, LINEAGE, LOOKS, MEMBERS_DIR, PLOT, member_dir
from .overrides import lineage_overrides, member_overrides
from .report import shell_line, terminal_report, write_report
from .rounds import PBTRun, Rounds
from .settings import Param, PBTError, check_metric, check_settings, parse_params

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
            # each member's seed is trainer.seed + member, the head-to-head's the ones after: the last must be a seed
            last_seed = job_cfg.trainer.seed + settings.population + settings.head_to_head_seeds - 1
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
            start = start_row(settings.name, settings, params, job_cfg.optimized_metric, job_cfg.trainer.seed)
            same_design(
                sweep_dir / LINEAGE,
                lineage.start,
                start,
                ("settings", "params", "metric", "base_seed"),
                "a PBT",
                "give another hydra.sweeper.name",
            )
            self._check_ranges(arguments, params)
            run = PBTRun(sweep_dir, lineage, params, settings, job_cfg.optimized_metric, start["base_seed"], arguments)
            first = self._jobs(run, [[v] for v in start["population"]], list(range(settings.population)))
            if lineage.start is None:  # round 0's runs, as the launcher will start them (nothing is written before)
                plan_runs(self.launcher, first, 0, config=self.config, loader=self.hydra_context.config_loader)
        if self._dry_run_or_begin(sweep_dir, first):
            return []  # the launcher printed the first round's jobs; the later ones depend on its results
        if lineage.start is None:
            lineage.write(start)
        log.info(
            "PBT %r: %d members x %d rounds of %d steps, ranked on %s -> %s",
            settings.name,
            settings.population,
            settings.rounds,
            settings.steps_per_round,
            run.metric,
            sweep_dir,
        )
        self._rounds(run)
        if lineage.test is None:
            self._test_best(run)
        replay = self._write_best_schedule(run, job_cfg)
        head_to_head = self._head_to_head(run)
        from .plot import plot_pbt

        looks = {r: (read_json(sweep_dir / LOOKS / f"round-{r}.json") or {}).get("members") for r in lineage.scores}
        plot_pbt(lineage, params, run.metric, sweep_dir / PLOT, looks)
        report = write_report(sweep_dir, lineage, params, run.metric, shell_line(replay), head_to_head, looks)
        print(terminal_report(lineage, params, sweep_dir, run.metric, replay))
        print(f"{head_to_head}\nreport with the lineage, the moved values' plot and the verdict: {report}")
        return []

    # -- the gate ------------------------------------------------------------------------------------------
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
        run: PBTRun,
        histories: Sequence[list[dict]] | Mapping[int, list[dict]],
        members: list[int],
        pause: bool = True,
    ) -> list[list[str]]:
        return [
            merge_overrides(
                run.arguments, member_overrides(m, histories[m], run.params, run.settings, run.base_seed, pause)
            )
            for m in members
        ]

    # -- rounds --------------------------------------------------------------------------------------------
    def _remember(self, jobs: list[list[str]], members: list[int]) -> None:
        """Record in each member's directory that its config for this round is its own (the run's resume refuses a
        directory started with another config)."""
        from ...launching.gate import compose_runs

        sweep_dir = Path(self.config.hydra.sweep.dir)
        for m, cfg in zip(members, compose_runs(self.hydra_context.config_loader, self.config, jobs)):
            if (member_dir(sweep_dir, m) / CHECKPOINTS).exists():
                remember_config(member_dir(sweep_dir, m), cfg)

    def _rounds(self, run: PBTRun) -> None:
        """Every member's rounds (rounds.py), as many in flight as the launcher trains at once; each job started
        without waiting where the launcher can (the pool, submitit), else run before the next is started
        (hydra/launcher=local). Synchronous or not, the same driver: a synchronous PBT's decisions wait for the
        round's last report."""
        from ...launching.gate import Started, stop
        from ...run.validate import ConfigError

        lineage, settings, sweep_dir = run.lineage, run.settings, run.sweep_dir
        concurrent = getattr(self.launcher, "concurrent_runs", None)
        capacity = concurrent(settings.population) if concurrent else 1
        if hasattr(self.launcher, "runs_at_once"):
            self.launcher.runs_at_once = capacity

        def start_job(m: int, r: int) -> Any:
            jobs = self._jobs(run, {m: lineage.history(m, r)}, [m])
            self._remember(jobs, [m])
            index = r * settings.population + m
            if hasattr(self.launcher, "start"):
                return self.launcher.start(jobs, index)
            return Started(lambda: True, lambda: list(self.launcher.launch(jobs, index)), eager=True)

        def look(m: int, r: int, score: float | None) -> dict | None:
            step = run.step_of(r)
            found = _looks(sweep_dir, step, run.metric, [score if j == m else None for j in range(settings.population)])
            look_file = sweep_dir / LOOKS / f"round-{r}.json"
            members = (read_json(look_file) or {}).get("members") or [None] * settings.population
            members[m] = found[m]
            write_json_atomic(look_file, {"step": step, "metric": run.metric, "members": members})
            return found[m]

        def kept_look(m: int, r: int) -> dict | None:
            members = (read_json(sweep_dir / LOOKS / f"round-{r}.json") or {}).get("members") or []
            return members[m] if m < len(members) else None

        propose_for = (lambda r: _pb2(run, r)) if settings.explore == "pb2" else None
        log.info(
            "PBT %s: %d jobs at a time",
            "synchronous: a round's decisions once every member has reported it"
            if settings.synchronous
            else "asynchronous: each member decides as its round ends",
            capacity,
        )
        Rounds(run, start_job, look, kept_look, capacity, propose_for).run()
        if any(due is Due.FINISHED for due in lineage.due.values()):
            return
        failed = [r for r, scores in lineage.scores.items() if all(score is None for score in scores)]
        where = f"every member failed in round {failed[0] + 1}" if failed else "no member finished its last round"
        stop(ConfigError(f"PBT {settings.name!r}: {where}; {_member_error(sweep_dir, settings.population)}"))

    def _test_best(self, run: PBTRun) -> None:
        """The best member of the last round runs on to its end: its final evaluation, the test split once."""
        from ...launching.gate import stop
        from ...run.validate import ConfigError

        lineage, settings = run.lineage, run.settings
        last = settings.rounds - 1
        scores = lineage.scores[last]
        best = ranked(scores, settings.direction)[0]
        if lineage.best is None:
            lineage.write(
                {"event": "best", "member": best, "score": scores[best], "values": lineage.history(best, last)}
            )
        histories = [lineage.history(m, last) for m in range(settings.population)]
        jobs = self._jobs(run, histories, [best], pause=False)
        self._remember(jobs, [best])
        self.launch(jobs, settings.rounds * settings.population, "a PBT member's job")
        summary = _member_summaries(run.sweep_dir, settings.population)[best]
        if summary is None or summary.status != "completed":
            why = (summary.error if summary else None) or "no summary.json"
            stop(
                ConfigError(
                    f"PBT {settings.name!r}: the best member {best}'s final evaluation did not "
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
                run.metric: summary.objective,
            }
        )

    # -- the answer ----------------------------------------------------------------------------------------
    def _head_to_head(self, run: PBTRun) -> str:
        """Does moving the values during training beat holding them? The best lineage's schedule (its values round
        by round, as the replay trains them) against the best starting point held fixed (the member that led after
        round 0, its first values), each over ``head_to_head_seeds`` fresh seeds, judged by the sweep's verdicts
        (reading/: ranked on validation, test paired by seed and question; ``hydra.sweeper.verdicts``). Runs in
        ``head_to_head/``; with 0 seeds, the command that runs them instead. Returns the lines to print (and
        report.md's)."""
        from ...reading.results import SweepResults
        from ...reading.tables import seed_block

        lineage, settings, sweep_dir = run.lineage, run.settings, run.sweep_dir
        n = settings.head_to_head_seeds
        best = lineage.best["member"]
        start_best = ranked(lineage.scores[0], settings.direction)[0]
        arms = {
            "schedule": lineage_overrides(lineage.history(best, settings.rounds - 1), run.params, settings),
            "fixed": lineage_overrides(
                [lineage.start["population"][start_best]] * settings.rounds, run.params, settings
            ),
        }
        first_seed = run.base_seed + settings.population  # seeds no member trained with
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
                    merge_overrides(run.arguments, [*overrides, f"trainer.seed={seed}", f"hydra.sweep.subdir={subdir}"])
                )
                where.append(subdir)
        if jobs:
            log.info("PBT head-to-head: %d runs (%s)", len(jobs), ", ".join(where))
            self.launch(jobs, settings.rounds * settings.population + 1, "a head-to-head run")
        read = SweepResults.read(sweep_dir / HEAD_TO_HEAD, verdicts=settings.verdicts)
        # each configuration by its arm's name (its directory's), not its many overrides
        runs = [replace(one, config=one.dir.name.rsplit("-", 1)[0]) for one in read.runs]
        results = SweepResults(read.sweep_dir, runs, read.direction, verdicts=settings.verdicts)
        block = seed_block(results)
        verdicts = {c.config: c.verdict for c in results.comparisons}
        if lineage.head_to_head is None and verdicts:
            lineage.write({"event": "head_to_head", "seeds": seeds, "arms": arms, "verdicts": verdicts})
        return "\n".join([f"{title}, {len(seeds)} seeds each ({sweep_dir / HEAD_TO_HEAD}):", *block])

    # -- what it leaves ------------------------------------------------------------------------------------
    def _write_best_schedule(self, run: PBTRun, job_cfg: DictConfig) -> list[str]:
        """The best member's mix as an option of the reward_mix group (``<sweep>/conf/reward_mix/
        best_schedule.yaml``: its weights as step schedules); returns the command line's overrides that train its
        whole lineage as one plain run: that mix, round 0's other values and seed, and from each later round's first
        step that round's values and the seed of the member whose job trained it (``trainer.phases``)."""
        from ...run.files import write_text_atomic

        lineage, settings = run.lineage, run.settings
        sweep_dir = Path(self.config.hydra.sweep.dir).resolve()
        best = lineage.best["member"]
        last = settings.rounds - 1
        history = lineage.history(best, last)
        trained_by = lineage.trained_by[best][: last + 1]
        [job] = self._jobs(run, [history] * settings.population, [best], pause=False)
        mix = OmegaConf.to_container(self._compose(job).reward_mix, resolve=True)
        conf_dir = sweep_dir / BEST_SCHEDULE.parent.parent
        searchpath = [str(p) for p in self.config.hydra.searchpath or []] + [f"file://{conf_dir}"]
        lineage_run = lineage_overrides(
            history, run.params, settings, [run.base_seed + m for m in trained_by], weights_inline=False
        )
        set_here = {o.split("=", 1)[0] for o in lineage_run}
        plain = [
            o
            for o in self._reproduce_overrides(run.arguments, job_cfg)
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
            f"# PBT {settings.name!r}: member {best}'s lineage (best on {lineage.start['metric']}, {score:.3f} "
            f"at step {settings.max_steps}), its reward weights as step schedules over trainer.max_steps="
            f"{settings.max_steps}; its other values and seeds round by round are the replay's trainer.phases. "
            f"Replay:\n#   python launch.py {shell_line(overrides)}\n"
        )
        write_text_atomic(sweep_dir / BEST_SCHEDULE, text + OmegaConf.to_yaml(OmegaConf.create(mix)))
        return overrides


def _pb2(run: PBTRun, round_: int):
    """PB2's ``propose`` for the take-overs after ``round_``: a GP over the members' rounds reported so far (a
    synchronous PBT's up to ``round_``), each round's values against its improvement (its score less its start's,
    better up), asked for the next round."""
    from .pb2 import pb2_explore

    upto = round_ if run.settings.synchronous else None
    observations = run.lineage.observations(run.settings.direction, upto)

    def propose(donor: dict, going_on: list[dict], rng) -> tuple[dict, dict]:
        new, label = pb2_explore(observations, run.params, round_ + 1, going_on, rng)
        return new, {p.key: label for p in run.params}

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
