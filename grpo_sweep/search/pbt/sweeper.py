"""The PBT sweeper (``hydra/sweeper=grpo_pbt``, chosen by ``hparams_search=pbt``): it drives the population's
rounds on the login node, each member's round one job on the configured launcher (local, pool, submitit_local,
SLURM), every job through the same gate as any sweep's. The population's logic is ``population.py``, its plot
``plot.py``.

One job a member and round: a job is a plain run continued in its member's directory (``trainer.pause_at_step``),
so a preempted or requeued member resumes from its own checkpoint as any run does, and the driver holds no state
but pbt.jsonl. No torch here.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ...run.files import write_json_atomic
from ...run.resume import CHECKPOINTS, remember_config
from ..base import StrategySweeper, merge_overrides, quoted, read_json, same_design
from .population import (
    BEST_SCHEDULE,
    LINEAGE,
    LOOKS,
    PLOT,
    Lineage,
    Param,
    PBTError,
    Settings,
    check_metric,
    check_settings,
    decide,
    initial_population,
    member_dir,
    member_overrides,
    parse_params,
    ranked,
    round_look,
    round_score,
    take_over,
)

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
            settings = check_settings(self.settings, job_cfg.trainer.max_steps)
            # GRPO divides each group's weighted reward by its spread unless scale_rewards is none: then the
            # weights' total is a step size of its own, and each weight moves alone
            scale = OmegaConf.select(job_cfg, "trainer.args.scale_rewards", default="group")
            settings = replace(settings, weights_by_ratio=scale not in ("none", False))
            mix = OmegaConf.to_container(job_cfg.reward_mix, resolve=True)
            params = parse_params(OmegaConf.to_container(self.settings.params, resolve=True), mix, job_cfg)
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
        for round_ in range(settings.rounds):
            if round_ not in lineage.scores:
                self._train_round(arguments, lineage, params, settings, base_seed, round_, job_cfg.optimized_metric)
            if round_ == settings.rounds - 1:
                break
            if round_ not in lineage.decisions:
                values = [lineage.values[m][round_] for m in range(settings.population)]
                looks = (read_json(sweep_dir / LOOKS / f"round-{round_}.json") or {}).get("members")
                take_overs, held_back = decide(lineage.scores[round_], values, params, settings, round_, looks)
                lineage.write({"event": "decide", "round": round_, "take_overs": take_overs, "held_back": held_back})
            if round_ not in lineage.carried_out:
                step = (round_ + 1) * settings.steps_per_round
                copied = [take_over(sweep_dir, t["member"], t["donor"], step) for t in lineage.decisions[round_]]
                lineage.write({"event": "carried_out", "round": round_, "bytes": sum(copied)})
        if lineage.test is None:
            self._test_best(arguments, lineage, params, settings, base_seed, job_cfg.optimized_metric)
        replay = self._write_best_schedule(arguments, lineage, params, settings, job_cfg)
        from .plot import plot_lineage

        plot_lineage(
            lineage.scores, lineage.decisions, settings.steps_per_round, sweep_dir / PLOT, job_cfg.optimized_metric
        )
        print(pbt_report(lineage, params, sweep_dir, job_cfg.optimized_metric, replay))
        return []

    # -- the gate ------------------------------------------------------------------------------------------
    def _start_row(self, settings: Settings, params: list[Param], job_cfg: DictConfig) -> dict:
        row = {
            "event": "start",
            "name": self.settings.name,
            "settings": asdict(settings),
            "params": [asdict(p) for p in params],
            "metric": job_cfg.optimized_metric,
            "base_seed": int(job_cfg.trainer.seed),
            "population": initial_population(params, settings),
        }
        return json.loads(json.dumps(row))  # as pbt.jsonl gives it back (tuples are lists there), to compare

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
        histories: list[list[dict]],
        members: list[int],
        pause: bool = True,
    ) -> list[list[str]]:
        return [
            merge_overrides(arguments, member_overrides(m, histories[m], params, settings, base_seed, pause))
            for m in members
        ]

    # -- rounds --------------------------------------------------------------------------------------------
    def _launch(self, jobs: list[list[str]], members: list[int], first_index: int) -> None:
        """Start ``jobs`` (one a member) on the launcher, after recording in each member's directory that its
        config for this round is its own (the run's resume refuses a directory started with another config)."""
        from ...launching.gate import compose_runs

        sweep_dir = Path(self.config.hydra.sweep.dir)
        for m, cfg in zip(members, compose_runs(self.hydra_context.config_loader, self.config, jobs)):
            if (member_dir(sweep_dir, m) / CHECKPOINTS).exists():
                remember_config(member_dir(sweep_dir, m), cfg)
        self.launch(jobs, first_index, "a PBT member's job")  # one that died: the member has no score this round

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
        looks = [
            None if x is None else round_look(member_dir(sweep_dir, m), step, metric) for m, x in enumerate(scores)
        ]
        look_file = sweep_dir / LOOKS / f"round-{round_}.json"
        write_json_atomic(look_file, {"step": step, "metric": metric, "members": looks})
        lineage.write(
            {
                "event": "round",
                "round": round_,
                "step": step,
                "scores": scores,
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
        moved = [p for p in params if p.term is None]  # the weights are in the mix's schedules
        plain = [
            o
            for o in self._reproduce_overrides(arguments, job_cfg)
            if not o.lstrip("+~")
            .split("=", 1)[0]
            .startswith(("reward_mix", "hydra.searchpath", "trainer.max_steps", "trainer.seed"))
            and o.lstrip("+~").split("=", 1)[0] not in {p.key for p in moved}
        ]
        phases = [
            {
                "from_step": r * settings.steps_per_round,
                "set": {
                    **{p.key: _plain_value(p, history[r][p.key]) for p in moved},
                    "trainer.seed": base_seed + trained_by[r],
                },
            }
            for r in range(1, len(history))
        ]
        overrides = [
            f"hydra.searchpath=[{','.join(map(quoted, searchpath))}]",
            *plain,
            "reward_mix=best_schedule",
            f"trainer.max_steps={settings.max_steps}",
            f"trainer.seed={base_seed + trained_by[0]}",
            *(p.override(history[0][p.key]) for p in moved),
        ]
        if phases:
            overrides.append(f"trainer.phases={_override_value(phases)}")
        score = lineage.best["score"]
        text = (
            f"# PBT {self.settings.name!r}: member {best}'s lineage (best on {lineage.start['metric']}, {score:.3f} "
            f"at step {settings.max_steps}), its reward weights as step schedules over trainer.max_steps="
            f"{settings.max_steps}; its other values and seeds round by round are the replay's trainer.phases. "
            f"Replay:\n#   python launch.py {shell_line(overrides)}\n"
        )
        write_text_atomic(sweep_dir / BEST_SCHEDULE, text + OmegaConf.to_yaml(OmegaConf.create(mix)))
        return overrides


def _plain_value(p: Param, value: float) -> float | int:
    return int(round(value)) if p.integer else float(value)


def _override_value(value: Any) -> str:
    """``value`` (lists, dicts, numbers, dotted keys) in Hydra's override grammar, on one line."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_override_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_override_value(v) for v in value) + "]"
    return repr(value)


def shell_line(overrides: list[str]) -> str:
    """The overrides as one shell command line's arguments (a list's commas and braces quoted from the shell)."""
    import shlex

    return " ".join(shlex.quote(o) for o in overrides)


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
        if t.get("gap") is None:
            return " (it failed its round)" if "gap" in t else ""
        if t.get("se") is None:
            return f" (lead {t['gap']:+.3f}, no per-question outcomes to weigh it)"
        within = "beyond" if t["beyond_noise"] else "within"
        return f" (lead {t['gap']:+.3f}, se {t['se']:.3f}: {within} {z:g} se)"

    lines = [
        f"PBT {lineage.start['name']!r}: {s['population']} members x {s['rounds']} rounds of "
        f"{s['steps_per_round']} steps, ranked on {metric} ({s['direction']}) -> {sweep_dir}"
    ]
    for round_, scores in sorted(lineage.scores.items()):
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
    counts = lineage.exploits()
    guard = (
        f"noise guard on: a member copies a donor only when its lead is more than {z:g} standard errors of the "
        "ranking look, paired by question"
        if s.get("noise_guard", False)
        else "noise guard off (plain PBT)"
    )
    lines.append(
        f"  exploits: {counts['beyond']} beyond the ranking look's noise, {counts['within']} within it, "
        f"{counts['unjudged']} not judged (no per-question outcomes), {counts['held_back']} held back; "
        f"{counts['failed']} of failed members; {guard}"
    )
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
