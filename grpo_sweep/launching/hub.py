"""The hub models and datasets a run names, resolved on the launching machine before anything runs or is queued.

Cluster compute nodes usually cannot reach the Hugging Face hub; login nodes can. A model the node cannot fetch
would otherwise end in transformers' ``OSError: We couldn't connect to 'https://huggingface.co'`` on the node,
after queueing. So the gate (``gate.check_config``) resolves every hub id here, once per process:

- the hub is reachable: fetched into the HF cache the nodes share (``$HF_HOME``), or, when cached, checked
  against the hub and completed (``huggingface_hub.snapshot_download`` for a model,
  ``datasets``' own download for a dataset);
- the hub cannot be reached (or ``HF_HUB_OFFLINE=1``): the cached copy; without one, refused in one line
  naming the id and the ways out.

Once every id a run names is in the cache, ``HF_HUB_OFFLINE=1`` is set in this process's environment, which every
launcher hands to its jobs (in-process runs, pool workers, submitit's local jobs, and ``sbatch``'s default
``--export=ALL``): the jobs then read the cache without asking the hub. The hub library here is
``huggingface_hub`` (light); ``datasets`` runs in a subprocess, so this process imports neither it nor torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from ..adapters.hf_hub import go_offline
from ..rewards import RewardError
from ..rewards.mix import terms
from ..rewards.reward_model import check_config_file, hub_sources, is_local
from ..run.validate import ConfigError

OFFLINE_ENV = "HF_HUB_OFFLINE"
# what transformers' PyTorch loader never reads: fetching them would fill a shared cache with duplicates
# (Llama repos carry a second copy of the weights under original/)
IGNORE = ["original/*", "*.pth", "*.gguf", "*.onnx", "onnx/*", "*.h5", "*.msgpack", "*.ot", "flax_model*", "tf_model*"]
# seconds to wait for the hub's answer per file before taking the cache's copy (huggingface_hub's default is 10)
ETAG_TIMEOUT = 10
# a dataset's download and preparation, in its subprocess
DATASET_TIMEOUT = 1800

_TRUE = {"1", "on", "yes", "true"}
# whether HF_HUB_OFFLINE=1 is this module's, set for the jobs, rather than the user's own
_set_here = False
_resolved: dict[tuple[str, str, str | None], None] = {}


def hub_ids(cfg: Any) -> list[tuple[str, str, str | None]]:
    """(kind, id, subset) for every hub model and dataset the run names; local directories are not hub ids."""
    ids: list[tuple[str, str, str | None]] = []
    model = cfg.get("model")
    if model is not None and model.get("tiny") is None:
        name = model.get("name_or_path")
        if isinstance(name, str) and name and not is_local(name):
            ids.append(("model", name, None))
    data = cfg.get("data")
    if data is not None and data.get("source") == "hub" and data.get("path") and not is_local(str(data.path)):
        ids.append(("dataset", str(data.path), data.get("subset")))
    return ids


def reward_model_ids(cfg: Any) -> list[tuple[str, str]]:
    """(config key, hub id) for every reward model of the mix (and its tokenizer) that is not on this machine."""
    mix = cfg.get("reward_mix") or {}
    mix = OmegaConf.to_container(mix, resolve=True) if OmegaConf.is_config(mix) else mix
    return [
        source for term in terms(mix) if term.model for source in hub_sources(term.name, term.target, term.model_args)
    ]


def _offline() -> bool:
    """Whether the user asked for the cache only (HF_HUB_OFFLINE=1)."""
    return not _set_here and os.environ.get(OFFLINE_ENV, "").lower() in _TRUE


def _ways_out(kind: str, repo_id: str, key: str = "model.name_or_path") -> str:
    fix = f"{key}=<local dir>" if kind == "model" else "data.source=file data.path=<local dir or file>"
    return (
        f"run this launch once on a machine that reaches the hub (it fetches {repo_id!r} into the HF cache the "
        f"nodes share, $HF_HOME), or use {fix}"
    )


def _reachable(kind: str, repo_id: str, key: str | None = None) -> bool:
    """Whether the hub answers for ``repo_id`` (False: no network); an id the hub does not know is a ConfigError.
    ``key``: the config key that names it (default: the policy's or the dataset's)."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, HFValidationError, RepositoryNotFoundError

    key = key or ("model.name_or_path" if kind == "model" else "data.path")
    info = HfApi().model_info if kind == "model" else HfApi().dataset_info
    try:
        info(repo_id, timeout=ETAG_TIMEOUT)
    except HFValidationError:
        raise ConfigError(f"{key}={repo_id!r} is neither a path on this machine nor a hub id (org/name)") from None
    except (GatedRepoError, RepositoryNotFoundError):
        raise ConfigError(
            f"{key}={repo_id!r} is not a {kind} on the hub, or is gated or private (then set HF_TOKEN "
            f"in the environment)"
        ) from None
    except HfHubHTTPError as exc:
        if exc.response is not None and exc.response.status_code < 500:
            raise ConfigError(
                f"{key}={repo_id!r}: the hub answered {exc.response.status_code} ({str(exc).strip().splitlines()[0]})"
            ) from None
        return False
    except Exception:  # no route, no name service, a timeout: the cache is all there is
        return False
    return True


def _resolve_model(repo_id: str, online: bool, key: str = "model.name_or_path") -> None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        if online:  # fetches what the cache lacks; a complete cached snapshot costs one request a file
            snapshot_download(repo_id, ignore_patterns=IGNORE, etag_timeout=ETAG_TIMEOUT)
        else:
            snapshot_download(repo_id, local_files_only=True)
    except LocalEntryNotFoundError:
        where = "HF_HUB_OFFLINE is set" if _offline() else "the hub cannot be reached from this machine"
        raise ConfigError(
            f"{key}={repo_id!r} is not in the HF cache and {where}: {_ways_out('model', repo_id, key)}"
        ) from None
    except OSError as exc:  # a download cut short, a full disk
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ConfigError(
            f"{key}={repo_id!r} could not be fetched ({first}): {_ways_out('model', repo_id, key)}"
        ) from None


# datasets' own download (and preparation into its cache); offline, the cached copy or an error
_DATASET_SCRIPT = (
    "import sys, datasets\ndatasets.load_dataset_builder(sys.argv[1], sys.argv[2] or None).download_and_prepare()\n"
)


def _resolve_dataset(repo_id: str, subset: str | None, online: bool) -> None:
    offline = not online
    env = {**os.environ, OFFLINE_ENV: "1" if offline else "0"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _DATASET_SCRIPT, repo_id, subset or ""],
            env=env,
            capture_output=True,
            text=True,
            timeout=DATASET_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"data.path={repo_id!r}: its download took over {DATASET_TIMEOUT} s: {_ways_out('dataset', repo_id)}"
        ) from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        why = "HF_HUB_OFFLINE is set" if _offline() else "the hub cannot be reached from this machine"
        where = f"not in the datasets cache and {why}" if offline else f"could not be fetched ({last})"
        raise ConfigError(f"data.path={repo_id!r} (subset {subset!r}) is {where}: {_ways_out('dataset', repo_id)}")


def _check_reward_model(key: str, repo_id: str) -> None:
    """A hub reward model's cached config.json checked as a local one's is (a sequence classifier, one label)."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json")
    if not isinstance(found, str):  # None, or the cache's record that the repo has no such file
        raise ConfigError(f"{key}={repo_id!r} has no config.json: it is not a transformers model")
    try:
        check_config_file(key, repo_id, Path(found))
    except RewardError as exc:
        raise ConfigError(str(exc)) from None


def resolve_hub(cfg: Any) -> None:
    """Make every hub model and dataset ``cfg`` names available in the HF cache, or raise ConfigError (one line)."""
    global _set_here
    ids = hub_ids(cfg)
    # a reward model (or its tokenizer) is fetched like the policy, its errors naming its own key
    sources = [(key, ("model", repo_id, None)) for key, repo_id in reward_model_ids(cfg)]
    for config_key, key in [(None, key) for key in ids] + sources:
        if key in _resolved:
            continue
        kind, repo_id, subset = key
        online = not _offline() and _reachable(kind, repo_id, config_key)
        if not online:
            go_offline()  # this process's own loads (a single run trains here) then skip the hub's retries
        if kind == "model":
            _resolve_model(repo_id, online, config_key or "model.name_or_path")
            if config_key is not None and config_key.endswith(".model"):
                _check_reward_model(config_key, repo_id)
        else:
            _resolve_dataset(repo_id, subset, online)
        _resolved[key] = None
    if (ids or sources) and not _offline():
        os.environ[OFFLINE_ENV] = "1"  # the jobs this process starts read the cache only (see the module's doc)
        _set_here = True
