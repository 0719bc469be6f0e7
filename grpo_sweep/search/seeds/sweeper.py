"""The seeds sweeper (``hydra/sweeper=seeds``): a grid whose seeds go where a comparison is still open.

``python launch.py -m hydra/sweeper=seeds reward_mix=format,correct,format_correct hydra.sweeper.max_seeds=8``
runs every configuration of the grid at ``min_seeds`` seeds, then in rounds adds a seed to the leader and to each
configuration whose comparison with it validation has not decided (search/seeds/sequential.py: the design, its error
budget and the verdicts). Each round goes through the configured launcher (local, pool, submitit_local, SLURM) and
its gate like any batch of a grid. The driver keeps no state: each round is replayed from the runs on disk
(design.Adaptive), so the same command with ``hydra.sweep.dir=<its dir>`` continues a killed sweep
and trains nothing twice. With ``hydra.launcher.detach=true`` on SLURM it submits the round and, after it, a small
job that runs the same command again (``--dependency=afterany``): that job submits the next round, and so on.
No torch here.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...config.checks import SEED_MAX, seed_error
from ...reading.stats import is_seed
from ...run.files import write_json_atomic
from ..base import StrategySweeper, read_json, same_design
from .design import SEEDS_FILE, seeds_run_dir
from .sequential import Settings, check_settings, recorded_settings

log = logging.getLogger(__name__)


class SeedsSweeperImpl(StrategySweeper):
    # its first round passes the gate before anything is written; every later round passes it in the launcher

    def sweep(self, arguments: list[str]) -> Any:
        from ...adapters.hydra import grid_jobs
        from ...launching.gate import plan_runs

        sweep_dir = Path(self.config.hydra.sweep.dir)
        s = self.settings
        with self._refusals():
            for argument in arguments:
                key = argument.split("=", 1)[0].lstrip("+~")
                if key == s.seed_key or (is_seed(key) and not key.startswith("hydra.")):
                    raise ValueError(
                        f"{argument}: hydra/sweeper=seeds picks the seeds ({s.seed_key}="
                        f"{s.first_seed}, {s.first_seed + 1}, ...); drop it (hydra.sweeper.first_seed "
                        "sets the first)"
                    )
            if not is_seed(str(s.seed_key)):
                raise ValueError(
                    f"hydra.sweeper.seed_key={s.seed_key!r}: its last dotted part must be `seed` (e.g. trainer.seed)"
                )
            if isinstance(s.first_seed, bool) or not isinstance(s.first_seed, int):
                raise ValueError(f"hydra.sweeper.first_seed={s.first_seed!r}: use a whole number")
            # the last seed a configuration can reach, too: a later round's runs would fail when they start
            for seed in (s.first_seed, s.first_seed + max(int(s.max_seeds or 1), 1) - 1):
                if seed_error("hydra.sweeper.first_seed", seed):
                    raise ValueError(
                        f"hydra.sweeper.first_seed={s.first_seed}: the seeds {s.first_seed}..{seed} "
                        f"(hydra.sweeper.max_seeds={s.max_seeds}) must be in 0..{SEED_MAX}"
                    )
            configs = grid_jobs(self.hydra_context.config_loader, list(arguments))
            settings = Settings(
                min_seeds=s.min_seeds, max_seeds=s.max_seeds, max_runs=s.max_runs, alpha=s.alpha, verdicts=s.verdicts
            )
            check_settings(settings, len(configs))
            design = {
                "settings": {
                    "min_seeds": settings.min_seeds,
                    "max_seeds": settings.max_seeds,
                    "max_runs": settings.max_runs,
                    "alpha": settings.alpha,
                    "verdicts": settings.verdicts,
                },
                "configs": configs,
                "seed_key": str(s.seed_key),
                "first_seed": int(s.first_seed),
            }
            recorded = read_json(sweep_dir / SEEDS_FILE)
            if recorded is not None:  # a sweep begun before verdicts was a setting ran strict ones
                recorded["settings"] = asdict(recorded_settings(recorded.get("settings")))
            same_design(
                sweep_dir / SEEDS_FILE,
                recorded,
                design,
                ("configs", "settings", "seed_key", "first_seed"),
                "a seeds sweep",
                "give another hydra.sweep.dir",
            )
            first = [(c, i) for c in range(len(configs)) for i in range(settings.min_seeds)]
            jobs = self._jobs(design, first)
            if not (sweep_dir / SEEDS_FILE).exists():  # the first round, as the launcher will start it
                plan_runs(self.launcher, jobs, 0, config=self.config, loader=self.hydra_context.config_loader)
        if self._dry_run_or_begin(sweep_dir, jobs):
            return []  # the launcher printed the first round's jobs; the later ones depend on its results
        write_json_atomic(sweep_dir / SEEDS_FILE, design)
        log.info(
            "seeds sweep: %d configurations, %d to %d seeds each, at most %d runs -> %s (continue it: the same "
            "command with hydra.sweep.dir=%s)",
            len(configs),
            settings.min_seeds,
            settings.max_seeds,
            settings.budget(len(configs)),
            sweep_dir,
            sweep_dir,
        )
        returns = []
        if self.config.hydra.launcher.get("detach"):
            from ...launching.submit import record_lost_jobs

            record_lost_jobs(sweep_dir)
        from . import STRATEGY

        while True:
            adaptive = STRATEGY.design(STRATEGY.read(sweep_dir))
            plan = adaptive.plan
            if plan.done:
                break
            # the whole round (numbered where the design puts it): its finished runs are skipped by the launcher
            # and the run itself, a killed one resumes from its checkpoint
            round_ = plan.round
            first_num = plan.runs - len(round_)
            log.info(
                "seeds sweep: round of %d run(s) (%s)",
                len(round_),
                ", ".join(f"{adaptive.labels[c]} seed {adaptive.seed(i)}" for c, i in round_),
            )
            jobs = self._jobs(design, round_)
            if self.config.hydra.launcher.get("detach"):
                returns += self.launcher.launch(jobs, initial_job_idx=first_num)
                self._follow_up(sweep_dir)
                return returns
            returns += self.launch(
                jobs, first_num, "a run of the seeds sweep"
            )  # one that died: the design sees it failed
            again = STRATEGY.design(STRATEGY.read(sweep_dir)).plan
            if again.todo == plan.todo:  # nothing new finished (every run of the round failed to start): stop
                log.error("seeds sweep: the round's runs did not finish; the same command tries them again")
                break
        return returns

    def _jobs(self, design: dict, runs: list[tuple[int, int]]) -> list[list[str]]:
        sweep_dir = Path(self.config.hydra.sweep.dir)
        out = []
        for c, i in runs:
            seed = design["first_seed"] + i
            subdir = seeds_run_dir(sweep_dir, c, seed).relative_to(sweep_dir).as_posix()
            out.append([*design["configs"][c], f"{design['seed_key']}={seed}", f"hydra.sweep.subdir={subdir}"])
        return out

    def _follow_up(self, sweep_dir: Path) -> None:
        """SLURM, detached: after this round's jobs end, a small job runs this command again (the next round)."""
        from ...launching.jobs import JOBS

        params = self.launcher.params
        jobs = json.loads((sweep_dir / JOBS).read_text())["jobs"] if (sweep_dir / JOBS).exists() else []
        ids = sorted({str(j["job_id"]) for j in jobs if j.get("job_id")})
        argv = [sys.executable, *sys.argv]
        if not any(a.startswith("hydra.sweep.dir=") for a in argv):
            argv.append(f"hydra.sweep.dir={sweep_dir.resolve()}")
        command = [
            "sbatch",
            "--parsable",
            "--job-name=seeds-driver",
            "--ntasks=1",
            "--cpus-per-task=1",
            f"--output={sweep_dir.resolve()}/driver-%j.log",
            f"--chdir={Path.cwd()}",
        ]
        if ids:
            command.append(f"--dependency=afterany:{':'.join(i.split('_')[0] for i in ids)}")
        if params.get("partition"):
            command.append(f"--partition={params['partition']}")
        # the job's own SLURM_* variables (its memory, its id) would be inherited by the jobs it submits; srun
        # refuses some of them together. SLURM_CONF says which cluster: kept.
        unset = "unset $(env | sed -n 's/^\\(SLURM_[A-Za-z0-9_]*\\)=.*/\\1/p' | grep -vx SLURM_CONF); "
        command.append("--wrap=" + unset + "exec " + " ".join(shlex.quote(a) for a in argv))
        out = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"sbatch of the next round's driver failed: {out.stderr.strip() or out.stdout.strip()}")
        print(
            f"The next round is decided by job {out.stdout.strip()} once these jobs end (it runs this command "
            f"again); the sweep ends when a round leaves nothing open: python -m grpo_sweep.sweeps.status "
            f"{sweep_dir}",
            flush=True,
        )
