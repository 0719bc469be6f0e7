"""Guards for the private APIs grpo_sweep/adapters/ use: each fails naming the library and its version when an
upgrade takes away what the adapter relies on."""
from __future__ import annotations

import inspect
from importlib import metadata


def _version(package: str) -> str:
    return f"{package} {metadata.version(package)}"


def test_trl_grpo_trainer_keeps_its_latest_batch_in_logs():
    from trl import GRPOTrainer

    from grpo_sweep.adapters.trl import LATEST_BATCH_KEYS

    source = inspect.getsource(GRPOTrainer)
    assert "self._logs" in source, f"{_version('trl')}: GRPOTrainer no longer has _logs (adapters/trl.py)"
    for key in LATEST_BATCH_KEYS:
        assert f'self._logs["{key}"]' in source, f"{_version('trl')}: GRPOTrainer._logs has no {key!r} (adapters/trl.py)"


def test_hydra_internals_the_adapter_calls_are_there():
    from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
    from hydra_plugins.hydra_joblib_launcher._core import execute_job

    from grpo_sweep.adapters import hydra as adapter  # its own imports are the rest of the guard

    where = f"{_version('hydra-core')} ({adapter.__name__})"
    assert list(inspect.signature(ConfigLoaderImpl._apply_overrides_to_config).parameters) == ["overrides", "cfg"], where
    assert list(inspect.signature(get_overrides_dirname).parameters) == ["overrides", "exclude_keys", "item_sep", "kv_sep"], where
    assert list(inspect.signature(execute_job).parameters)[:2] == ["idx", "overrides"], where


def test_hydra_apply_overrides_sets_plain_values_as_hydra_does():
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    from grpo_sweep.adapters.hydra import apply_overrides, overrides_dirname

    cfg = OmegaConf.create({"lora": {"r": 8}, "trainer": {"seed": 1}})
    parsed = OverridesParser.create().parse_overrides(["lora.r=16", "trainer.seed=2"])
    apply_overrides(parsed, cfg)
    assert (cfg.lora.r, cfg.trainer.seed) == (16, 2)
    assert overrides_dirname(parsed, [], ",", "=") == "lora.r=16,trainer.seed=2"


def test_submitit_launchers_keep_their_executor_and_positional_job_side():
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher, LocalLauncher, SlurmLauncher

    from grpo_sweep.adapters.hydra import BasicLauncher
    from grpo_sweep.adapters.submitit import JOB_ARGUMENTS, executor_kind, job_arguments, process_per_job

    where = f"{_version('hydra-submitit-launcher')} (adapters/submitit.py)"
    assert (executor_kind(LocalLauncher), executor_kind(SlurmLauncher)) == ("local", "slurm"), where
    assert process_per_job(LocalLauncher) and process_per_job(SlurmLauncher) and not process_per_job(BasicLauncher), where
    assert tuple(inspect.signature(BaseSubmititLauncher.__call__).parameters)[1:] == JOB_ARGUMENTS, where
    assert len(job_arguments(["a=1"], 3)) == len(JOB_ARGUMENTS) - 1  # Hydra's state goes last


def test_loky_names_the_dead_workers_exit_codes_in_its_error():
    from grpo_sweep.adapters.loky import BrokenProcessPool, worker_exit_codes

    where = f"{_version('joblib')} (adapters/loky.py)"
    import joblib.externals.loky.process_executor as executor

    source = inspect.getsource(executor)
    assert "exit codes of the workers are {" in source or "The exit codes of the workers are" in source, where
    error = BrokenProcessPool("A worker process managed by the executor was unexpectedly terminated. "
                              "The exit codes of the workers are {EXIT(137)}")
    assert worker_exit_codes(error) == "EXIT(137)"
    assert worker_exit_codes(ValueError("other")) is None


def test_hf_hub_offline_switch_reaches_what_transformers_and_datasets_ask(monkeypatch):
    import datasets.config
    import huggingface_hub
    from huggingface_hub import constants

    from grpo_sweep.adapters.hf_hub import go_offline

    where = f"{_version('huggingface_hub')}, {_version('datasets')} (adapters/hf_hub.py)"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    assert not huggingface_hub.is_offline_mode(), where
    go_offline()
    assert huggingface_hub.is_offline_mode() and datasets.config.HF_HUB_OFFLINE, where
    from transformers.utils import hub

    assert hub.is_offline_mode is huggingface_hub.is_offline_mode, where  # transformers asks huggingface_hub
