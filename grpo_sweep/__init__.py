"""grpo-sweep: GRPO training runs and sweeps over reward designs. Where things are (lowest layer first; a module
imports only from lower layers or its own package — docs/architecture.md, checked by tests/test_architecture.py):

- ``config/``, ``adapters/``: the config schema; every use of another library's private API
- ``rewards/``, ``data/``: reward functions and the mix; datasets as TRL wants them
- ``models/``: the tiny local model and its warm start
- ``backends/``: building, training-ready adapting, generating from and saving the model (trl, unsloth)
- ``run/``: one training run — its context, config checks, train, evaluate, the files it writes
- ``tracking/`` (W&B) and ``sweeps/`` (the planning gate, launchers' glue, reading a sweep back): siblings
- ``search/``: Optuna (sweeper, worker, study report)
- ``app.py`` (the Hydra task), ``configstore.py`` (what Hydra is told), with ``launch.py`` and ``hydra_plugins/``
"""
