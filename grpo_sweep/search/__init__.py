"""Optuna search over reward weights, num_generations, learning rate and any config value.

A Hydra sweeper (``hydra/sweeper=grpo_optuna``, used by ``hparams_search/*``) creates or resumes the study and
launches worker jobs on the configured launcher; each worker pulls trials from the shared storage
(Optuna's distributed pattern), trains them in-process, reports a held-out metric every N steps and
stops pruned trials at once. No batch barriers: a worker starts its next trial as soon as one ends.
"""
