"""Launching many runs: the planning gate every launcher passes (gate.py: each run composed and checked, its
directory, the launcher's resources), a single run's preflight (preflight.py), the hub checks (hub.py), the pool of
worker processes (pool.py), submitting to submitit/SLURM (submit.py), the jobs and what SLURM says of them (jobs.py),
and resubmitting what did not finish (resubmit.py). The launchers themselves are Hydra plugins
(hydra_plugins/grpo_sweep_launcher). Nothing here reads a sweep's results beyond which runs exist.
"""
