"""Hostile input, end to end: each input ends in one line naming it before anything is queued or written, or in a
run that is honest about what it did. docs/validation.md's "Hostile inputs" tables are these lists.

A case is ``(id, setup, expected)``. ``setup(inputs)`` writes whatever files the input needs under ``inputs`` and
returns the launch's arguments (``str.format``-ed with ``inputs=``). ``expected`` is one of:

- ``Refused(text)``: `python launch.py ARGS` exits non-zero, prints exactly one line, ``grpo-sweep: ...`` with
  ``text`` in it, no traceback, and leaves nothing under the output root (a refused sweep leaves no directory);
- ``Failed(text)``: the run started and ended ``failed`` (summary.json says so), the exit status is non-zero, the
  last line printed is one ``grpo-sweep: ...`` line with ``text`` in it, and nothing printed is a traceback;
- ``Trains()``: the run completes and trains (exit status 0, at least one optimizer step).

The launches run in this process (``conftest.launch_here``): a refusal costs the compose and the gate, not an
interpreter's start-up. The Values and Files refusals are checked at the single-run gate itself (``AT_THE_GATE``);
the cases that train are the slow stage's (``slow``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pytest

from . import test_hostile_readers, test_hostile_runs, test_hostile_secrets, test_hostile_studies
from .conftest import ROOT
from .hostile import (
    SLOW_CASES,
    Case,
    Failed,
    Refused,
    args,
    jsonl_text,
    judge,
    run_case,
    slow,
    with_file,
)
from .support.judge_servers import free_port


def more_processes_than_cores(inputs: Path) -> list[str]:
    # one more than this machine has for the test, whatever it has; a batch of 8 keeps the train split filled
    cores = len(os.sched_getaffinity(0))
    return ["distributed=ddp", f"distributed.nproc_per_node={cores + 1}", "trainer.per_device_train_batch_size=8"]


OVERLONG = "+reward_mix.o.factory=trl.rewards.get_soft_overlong_punishment"
REPETITION = "+reward_mix.r.factory=trl.rewards.get_repetition_penalty_reward"
TEN_ROWS = jsonl_text([{"prompt": f"{i} + 1?", "ground_truth": str(i + 1)} for i in range(10)])

# --- Values: trainer, optimizer, processes, factory arguments; runs that would train nothing --------------------
VALUES: list[Case] = [
    (
        "batch of more prompts than the train split",
        args("trainer.per_device_train_batch_size=1024", "trainer.max_steps=1"),
        Refused(
            "trainer.per_device_train_batch_size x steps_per_generation = 1024 x 1 = 1024 completions a generation, "
            "128 prompts of trainer.num_generations=8 each, but the train split has 115 (data.arithmetic.n_train)"
        ),
    ),
    (
        "processes x batch more prompts than the train split",
        args("distributed=ddp", "distributed.nproc_per_node=2", "trainer.per_device_train_batch_size=512"),
        Refused(
            "trainer.per_device_train_batch_size x distributed.nproc_per_node x steps_per_generation = 512 x 2 x 1"
        ),
    ),
    (
        "file data's train split smaller than a generation's prompts",
        with_file(
            "d.jsonl", TEN_ROWS, "data=file", "data.path={inputs}/d.jsonl", "trainer.per_device_train_batch_size=80"
        ),
        Refused("10 prompts of trainer.num_generations=8 each, but the train split has 8 (data.path, less the carved"),
    ),
    (
        "per_device_train_batch_size=0",
        args("trainer.per_device_train_batch_size=0"),
        Refused("trainer.per_device_train_batch_size=0: must be >= 1"),
    ),
    (
        "gradient_accumulation_steps=0",
        args("trainer.gradient_accumulation_steps=0"),
        Refused("trainer.gradient_accumulation_steps=0: must be >= 1"),
    ),
    (
        "learning_rate=nan",
        args("optimizer.learning_rate=nan"),
        Refused("optimizer.learning_rate=nan: must be a finite number"),
    ),
    ("adam_beta1=2.0", args("optimizer.adam_beta1=2.0"), Refused("optimizer.adam_beta1=2.0: must be in [0, 1)")),
    ("weight_decay<0", args("optimizer.weight_decay=-0.1"), Refused("optimizer.weight_decay=-0.1: must be >= 0")),
    ("temperature=-1.0", args("trainer.temperature=-1.0"), Refused("trainer.temperature=-1.0: must be > 0")),
    ("top_p=0.0", args("trainer.top_p=0.0"), Refused("trainer.top_p=0.0: must be in (0, 1]")),
    (
        "trainer.args.epsilon=-1.0",
        args("+trainer.args.epsilon=-1.0"),
        Refused("trainer.args.epsilon=-1.0: must be >= 0"),
    ),
    (
        "trainer.args.epsilon_high=inf",
        args("+trainer.args.epsilon_high=inf"),
        Refused("trainer.args.epsilon_high=inf: must be a finite number"),
    ),
    (
        "trainer.args.num_iterations=0",
        args("+trainer.args.num_iterations=0"),
        Refused("trainer.args.num_iterations=0: must be >= 1"),
    ),
    ("more CPU processes than cores", more_processes_than_cores, Refused("processes on a CPU machine with")),
    (
        "factory argument of the wrong type",
        args(
            OVERLONG,
            "+reward_mix.o.factory_args.max_completion_len=abc",
            "+reward_mix.o.factory_args.soft_punish_cache=4",
        ),
        Refused(
            "reward_mix.o.factory_args.max_completion_len='abc': trl.rewards.get_soft_overlong_punishment's "
            "max_completion_len takes int, not str"
        ),
    ),
    (
        "factory argument outside its domain",
        args(REPETITION, "+reward_mix.r.factory_args.ngram_size=0"),
        Refused("reward_mix.r.factory_args.ngram_size=0: must be >= 1"),
    ),
    (
        "reward param of the wrong type",
        args("+reward_mix.x.fn=length", "+reward_mix.x.weight=0.1", "+reward_mix.x.params.max_completion_length=abc"),
        Refused(
            "reward_mix.x.params.max_completion_length='abc': reward length's max_completion_length takes int, not str"
        ),
    ),
    (
        "factory raising while it is built",
        args("+reward_mix.f.factory=tests.reward_plugins.make_failing_reward", "+reward_mix.f.factory_args.n=9"),
        Refused("calling it with {'n': 9} raised ValueError: n=9 is too big"),
    ),
    (
        "reward failing on every sample",
        args(
            "reward_errors=skip",
            "+reward_mix.bad.fn=tests.reward_plugins.always_raises",
            "+reward_mix.bad.weight=0.5",
            "trainer.max_steps=2",
            "trainer.save_steps=2",
        ),
        Failed("reward_mix.bad failed on every sample of training"),
    ),
    (
        "reward taking no completions parameter",
        args("reward_mix=none", "+reward_mix.t.fn=tests.test_custom_rewards.scores_text"),
        Refused("reward_mix.t (tests.test_custom_rewards.scores_text): scores_text(text, **kwargs) has no"),
    ),
]

# --- Files the gate reads: data files, reward-model directories -------------------------------------------------
ROWS = [{"prompt": f"What is {i} + 1?", "ground_truth": str(i + 1)} for i in range(40)]


def data_file(name: str, content: str | bytes, *overrides: str) -> Callable[[Path], list[str]]:
    """A data file ``inputs/name`` (text or bytes) as ``data.path``."""

    def setup(inputs: Path) -> list[str]:
        path = inputs / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return ["data=file", f"data.path={path}", *overrides]

    return setup


def with_row(index: int, line: str) -> str:
    """ROWS as JSON lines with ``line`` put in as line ``index + 1``."""
    lines = [json.dumps(row) for row in ROWS]
    return "\n".join(lines[:index] + [line] + lines[index:]) + "\n"


def model_copy(kind: str, edit: Callable[[Path], None], key: str) -> Callable[[Path], list[str]]:
    """A copy of the tiny policy (``kind="policy"``) or the tiny reward model (``"reward"``), ``edit``-ed, named by
    ``key`` (``model.name_or_path`` or ``+reward_mix.rm.model``)."""

    def setup(inputs: Path) -> list[str]:
        import shutil

        if kind == "reward":
            from grpo_sweep.models.tiny_reward import ensure_reward_model

            source = ensure_reward_model()
        else:
            from grpo_sweep.models.tiny import TinySpec, ensure_tiny_model

            source = ensure_tiny_model(TinySpec())
        copy = inputs / kind
        shutil.copytree(source, copy)
        edit(copy)
        return ["model.tiny=null", f"model.name_or_path={copy}"] if kind == "policy" else [f"{key}={copy}"]

    return setup


def edit_config(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(directory: Path) -> None:
        config = json.loads((directory / "config.json").read_text())
        change(config)
        (directory / "config.json").write_text(json.dumps(config))

    return edit


def write(name: str, content: str) -> Callable[[Path], None]:
    return lambda directory: (directory / name).write_text(content)


def cut(name: str, keep: int) -> Callable[[Path], None]:
    return lambda directory: (directory / name).write_bytes((directory / name).read_bytes()[:keep])


def remove(*names: str) -> Callable[[Path], None]:
    return lambda directory: [(directory / name).unlink() for name in names]


def saved_dict(splits_json: str) -> Callable[[Path], list[str]]:
    def setup(inputs: Path) -> list[str]:
        (inputs / "saved").mkdir()
        (inputs / "saved" / "dataset_dict.json").write_text(splits_json)
        return ["data=file", f"data.path={inputs / 'saved'}"]

    return setup


RM = "+reward_mix.rm.model"
FILES: list[Case] = [
    (
        "jsonl-line-37-a-number",
        data_file("d.jsonl", with_row(36, "5")),
        Refused("d.jsonl' line 37: expected a JSON object per line, got 5"),
    ),
    (
        "jsonl-line-37-a-list",
        data_file("d.jsonl", with_row(36, "[1, 2]")),
        Refused("d.jsonl' line 37: expected a JSON object per line, got [1, 2]"),
    ),
    (
        "jsonl-line-not-json",
        data_file("d.jsonl", with_row(10, "what is 2 + 2?")),
        Refused("d.jsonl' line 11: not JSON (Expecting value at column 1)"),
    ),
    (
        "jsonl-not-utf8",
        data_file(
            "d.jsonl",
            with_row(5, '{"prompt": "2 + 2 = ?", "ground_truth": "4"}').encode().replace(b"2 + 2 = ?", b"2 + 2 = \xff"),
        ),
        Refused("d.jsonl' line 6: not UTF-8 text (byte 0xff); save the file as UTF-8"),
    ),
    (
        "json-a-list-of-numbers",
        data_file("d.json", "[1, 2, 3]"),
        Refused("d.json' item 1: expected a JSON object per item of the list, got 1"),
    ),
    ("json-a-number", data_file("d.json", "5"), Refused("d.json' line 1: expected a JSON object per line, got 5")),
    (
        "json-a-string",
        data_file("d.json", '"hello"'),
        Refused('d.json\' line 1: expected a JSON object per line, got "hello"'),
    ),
    (
        "json-one-object-of-columns",
        data_file(
            "d.json",
            json.dumps(
                {"prompt": [r["prompt"] for r in ROWS], "ground_truth": [r["ground_truth"] for r in ROWS]}, indent=2
            ),
        ),
        Refused("""d.json' line 1: the prompt (data.prompt_column='prompt') is ["What is 0 + 1?", "What is 1 + 1?","""),
    ),
    (
        "prompt-a-mapping",
        data_file("d.jsonl", with_row(3, '{"prompt": {"text": "hi"}, "ground_truth": "1"}')),
        Refused(
            """d.jsonl' line 4: the prompt (data.prompt_column='prompt') is {"text": "hi"}; give a string or a """
            "list of chat messages"
        ),
    ),
    (
        "prompt-a-message-without-content",
        data_file("d.jsonl", with_row(3, '{"prompt": [{"role": "user"}], "ground_truth": "1"}')),
        Refused("""d.jsonl' line 4: the prompt (data.prompt_column='prompt') is [{"role": "user"}]"""),
    ),
    (
        "prompt-missing",
        data_file("d.jsonl", with_row(3, '{"ground_truth": "1"}')),
        Refused("d.jsonl' line 4: the prompt (data.prompt_column='prompt') is null"),
    ),
    (
        "ground-truth-a-list",
        data_file("d.jsonl", with_row(3, '{"prompt": "hi", "ground_truth": ["1", "one"]}')),
        Refused(
            """d.jsonl' line 4: the ground truth (data.ground_truth_column='ground_truth') is ["1", "one"]; give a """
            "string or a number"
        ),
    ),
    (
        "csv-row-with-extra-fields",
        data_file("d.csv", "prompt,ground_truth\n" + "".join(f"q{i},{i}\n" for i in range(20)) + "q20,20,oops\n"),
        Refused("d.csv' line 22: 3 fields, but the header has 2"),
    ),
    (
        "parquet-not-parquet",
        data_file("d.parquet", b"PAR1 this is no parquet file"),
        Refused("d.parquet' cannot be read as Parquet: "),
    ),
    (
        "saved-dataset-dict-splits-not-a-list",
        saved_dict("[]"),
        Refused('saved\': its dataset_dict.json is []; save_to_disk writes {"splits": [<split names>]}'),
    ),
    (
        "reward-model-config-a-list",
        model_copy("reward", write("config.json", "[]"), RM),
        Refused("reward': its config.json is [], not a JSON object"),
    ),
    (
        "reward-model-config-not-json",
        model_copy("reward", write("config.json", '{"architectures": '), RM),
        Refused("reward': its config.json is not JSON (Expecting value at line 1 column 19)"),
    ),
    (
        "reward-model-without-architectures",
        model_copy("reward", edit_config(lambda c: c.pop("architectures")), RM),
        Refused("reward': its config.json names no architectures, so it may get a new, random score head"),
    ),
    (
        "reward-model-a-causal-lm",
        model_copy("reward", edit_config(lambda c: c.update(architectures=["LlamaForCausalLM"])), RM),
        Refused("reward' is a LlamaForCausalLM, not a sequence-classification reward model"),
    ),
    (
        "reward-model-without-weights",
        model_copy("reward", remove("model.safetensors"), RM),
        Refused(
            "reward' has a config.json but no weights (model.safetensors, pytorch_model.bin, or a sharded *.index.json)"
        ),
    ),
    (
        "reward-model-weights-cut-short",
        model_copy("reward", cut("model.safetensors", 4096), RM),
        Refused("reward': its model.safetensors is cut short (4096 bytes, its header describes"),
    ),
    (
        "reward-model-without-a-tokenizer",
        model_copy("reward", remove("tokenizer.json", "tokenizer_config.json"), RM),
        Refused(
            "reward' has no tokenizer (tokenizer.json or tokenizer_config.json): save the tokenizer beside the "
            "model, or name one with its model_args.tokenizer"
        ),
    ),
    (
        "policy-no-such-directory",
        args("model.tiny=null", "model.name_or_path={inputs}/no-such-model"),
        Refused("no-such-model': no such directory"),
    ),
    (
        "policy-config-a-list",
        model_copy("policy", write("config.json", "[]"), ""),
        Refused("policy': its config.json is [], not a JSON object"),
    ),
    (
        "policy-a-reward-model",
        model_copy("policy", edit_config(lambda c: c.update(architectures=["LlamaForSequenceClassification"])), ""),
        Refused("policy' is a LlamaForSequenceClassification, not a causal language model (*ForCausalLM)"),
    ),
    (
        "policy-without-weights",
        model_copy("policy", remove("model.safetensors"), ""),
        Refused("policy' has a config.json but no weights"),
    ),
    (
        "run-directory-record-not-yaml",
        with_file("run/checkpoints/config.yaml", "lora: [16, 32\n", "hydra.run.dir={inputs}/run"),
        Refused(
            "run/checkpoints/config.yaml cannot be read (while parsing a flow sequence): it records the config this "
            "run directory was started with"
        ),
    ),
    (
        "run-directory-record-a-list",
        with_file("run/checkpoints/config.yaml", "- lora\n- r\n", "hydra.run.dir={inputs}/run"),
        Refused("run/checkpoints/config.yaml holds no config (a YAML mapping)"),
    ),
]


# --- The Optuna search: its space, its storage, a study whose every trial fails --------------------------------
def space(param: str, *overrides: str) -> Callable[[Path], list[str]]:
    """A study (hparams_search=bad, from {inputs}) whose space is the one parameter ``param`` (a YAML line)."""
    text = (
        "# @package _global_\ndefaults:\n  - /hparams_search/common/study_dir\n"
        "  - override /hydra/sweeper: grpo_optuna\n"
        f"hydra:\n  sweeper:\n    study_name: bad\n    n_trials: 2\n    params:\n      {param}\n"
    )
    return with_file(
        "hparams_search/bad.yaml", text, "-m", "--config-dir", "{inputs}", "hparams_search=bad", *overrides
    )


def study(*overrides: str) -> Callable[[Path], list[str]]:
    return args("-m", "hparams_search=lr", *overrides)


LR = "hydra.sweeper.params.optimizer.learning_rate"
SEARCH: list[Case] = [
    (
        "an int log range from 0",
        space("trainer.max_steps: {type: int, low: 0, high: 8, log: true}"),
        Refused(
            "hydra.sweeper.params.trainer.max_steps={'type': 'int', 'low': 0, 'high': 8, 'log': True}: low >= 1 "
            "must hold for log=True"
        ),
    ),
    slow(
        (
            "a range to .inf",
            space("optimizer.learning_rate: {type: float, low: 1e-4, high: .inf}"),
            Refused(f"{LR}.high=inf: a float range needs a finite number here"),
        )
    ),
    (
        "a learning-rate range [-1, -0.5]",
        space("optimizer.learning_rate: {type: float, low: -1, high: -0.5}"),
        Refused("hydra.sweeper.params: optimizer.learning_rate=-1 is refused: optimizer.learning_rate=-1: must be > 0"),
    ),
    slow(
        (
            "a range from low: abc",
            space("optimizer.learning_rate: {type: float, low: abc, high: 1e-2}"),
            Refused(f"{LR}.low='abc': a float range needs a finite number here"),
        )
    ),
    slow(
        (
            "low above high",
            space("optimizer.learning_rate: {type: float, low: 1e-2, high: 1e-4}"),
            Refused(f"{LR}: float needs low < high, got low=0.01, high=0.0001"),
        )
    ),
    slow(
        (
            "step 0",
            space("trainer.max_steps: {type: int, low: 2, high: 8, step: 0}"),
            Refused(
                "hydra.sweeper.params.trainer.max_steps={'type': 'int', 'low': 2, 'high': 8, 'step': 0}: step > 0 "
                "must hold"
            ),
        )
    ),
    slow(
        (
            "a categorical with no choices",
            space("lora.r: {type: categorical, choices: []}"),
            Refused("hydra.sweeper.params.lora.r.choices=[]: categorical needs a non-empty list of choices"),
        )
    ),
    slow(
        (
            "a choice its key cannot take",
            space("lora.r: {type: categorical, choices: [8, -4]}"),
            Refused("hydra.sweeper.params: lora.r=-4 is refused: lora.r=-4: LoRA rank must be > 0"),
        )
    ),
    slow(
        (
            "a misspelt setting of a range",
            space("lora.r: {type: int, lo: 2, high: 8}"),
            Refused("hydra.sweeper.params.lora.r.lo: not a setting of a parameter of type int"),
        )
    ),
    slow(
        (
            "a study whose every trial fails in training",
            args(
                "-m",
                "hparams_search=lr",
                "hydra.sweeper.n_trials=1",
                "+reward_mix.flaky.fn=tests.failing_rewards.flaky",
                "+reward_mix.flaky.weight=0.5",
                "+reward_mix.flaky.params.fail=true",
            ),
            Failed("the only trial failed (Optuna study 'lr'); last error: RewardFailure: reward 'flaky' raised"),
        )
    ),
    (
        "a PostgreSQL URL with a password, server down",
        study("hydra.sweeper.storage=postgresql://u:secretpw@127.0.0.1:1/optuna"),
        Refused("hydra.sweeper.storage='postgresql://u:***@127.0.0.1:1/optuna': a password in the URL would be saved"),
    ),
    (
        "a MySQL URL with a password, server down",
        study("hydra.sweeper.storage=mysql://u:pw@127.0.0.1:1/x"),
        Refused("hydra.sweeper.storage='mysql://u:***@127.0.0.1:1/x': a password in the URL would be saved"),
    ),
    slow(
        (
            "a PostgreSQL URL, server down",
            study("hydra.sweeper.storage=postgresql://u@127.0.0.1:1/optuna"),
            Refused("hydra.sweeper.storage='postgresql://u@127.0.0.1:1/optuna' cannot be opened"),
        )
    ),
    (
        "a storage that is no URL",
        study("hydra.sweeper.storage=notaurl"),
        Refused("hydra.sweeper.storage='notaurl' cannot be opened: ArgumentError"),
    ),
    slow(
        (
            "an SQLite file where none can be made",
            study("hydra.sweeper.storage=sqlite:////proc/nope/x.db"),
            Refused("hydra.sweeper.storage='sqlite:////proc/nope/x.db' cannot be opened"),
        )
    ),
    (
        "a study its launcher refuses (no study directory left)",
        args("-m", "hparams_search=lr", "hydra/launcher=submitit_local", "hydra.launcher.tasks_per_node=2"),
        Refused("hydra.launcher.tasks_per_node=2 on submitit_local: a job is one run"),
    ),
]


# --- Credentials: never on disk, never echoed ---------------------------------------------------------------------
CREDENTIALS: list[Case] = [
    # the refusal shows the URL with its password masked (the value named, the secret not)
    (
        "password in a judge's base_url",
        judge("base_url=http://judge:s3cretpw@127.0.0.1:18080/v1"),
        Refused(
            "reward_mix.judge.factory_args.base_url=http://judge:***@127.0.0.1:18080/v1: a password in a URL is "
            "written into the run's files; put the URL in an environment variable and write ${oc.env:JUDGE_URL}"
        ),
    ),
    (
        "password in a URL in a list",
        args("logger.tags=[run-a,http://me:hunter2pw@tracker.example/x]"),
        Refused("logger.tags.1=http://me:***@tracker.example/x: a password in a URL is written into the run's files"),
    ),
    (
        "token in any config value",
        args("logger.notes=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
        Refused(
            "logger.notes=***: an API token is written into the run's files; put the token in an environment "
            "variable and write ${oc.env:LOGGER_TOKEN}"
        ),
    ),
]

# --- The judge under faults ----------------------------------------------------------------------------------------
# The faults of a judge that answers badly (a reply of megabytes, one that trickles in, a score of 1000000) are
# tests/test_judge.py's, against servers that misbehave so; a judge that is down, a run: tests/test_judge.py too.
JUDGE: list[Case] = [
    (
        "a judge URL whose port is 99999",
        judge("base_url=http://127.0.0.1:99999/v1"),
        Refused("factory_args.base_url='http://127.0.0.1:99999/v1': the port must be a number from 1 to 65535"),
    ),
    (
        "a judge URL that is not http(s)",
        judge("base_url=ftp://judge:21/v1"),
        Refused("factory_args.base_url='ftp://judge:21/v1': give the endpoint's URL"),
    ),
    (
        "an API key pasted as key_env",
        judge("base_url=http://127.0.0.1:8000/v1", "key_env=sk-abcdef1234567890abcdef"),
        Refused("factory_args.key_env must be the NAME of an environment variable"),
    ),
    (
        "a reply cap too small for a score",
        judge("base_url=http://127.0.0.1:8000/v1", "max_reply_bytes=100"),
        Refused("factory_args.max_reply_bytes=100: give a whole number >= 1024"),
    ),
    slow(
        (
            "a judge that is down (a closed port)",
            lambda inputs: [
                *judge(f"base_url=http://127.0.0.1:{free_port()}/v1")(inputs),
                "trainer.max_steps=2",
                "trainer.save_steps=2",
            ],
            Failed("reward_mix.judge failed on every sample of training", also=lambda *run: down_judge_cost(*run)),
        )
    ),
]


def down_judge_cost(out, run_dir: Path, summary: dict) -> None:
    """A judge that is down: every sample it was asked (the step-0 validation, 2 training batches of 8) a counted
    failure; only the first call waits out the client's retries (~3.5 s, before its time in training), each later
    one is a refused connection (before: 3.3 s each), and the log has a line per call, not one per retry."""
    assert summary["steps"] == 2 and summary["reward_failures"]["judge"] == 3 * 8, summary
    assert summary["reward_cost"]["judge"]["seconds"] < 1
    lines = (out.stdout + out.stderr).splitlines()
    assert not [line for line in lines if "Retrying request" in line]
    assert sum("judge 'judge' could not score 8 of 8 samples (8 unreachable)" in line for line in lines) == 3
    assert sum("took no connection" in line for line in lines) == 1


# --- What Hydra and the process itself print: type errors, a killed rank, an interrupted factory -----------------
STOP = "+reward_mix.stop.weight=1"
TOP: list[Case] = [
    (
        "distributed.nproc_per_node=two",
        args("distributed.nproc_per_node=two"),
        Refused(
            "Error merging override distributed.nproc_per_node=two: Value 'two' of type 'str' could not be "
            "converted to Integer"
        ),
    ),
    (
        "distributed.nproc_per_node=1.5",
        args("distributed.nproc_per_node=1.5"),
        Refused(
            "Error merging override distributed.nproc_per_node=1.5: Value '1.5' of type 'float' could not be "
            "converted to Integer"
        ),
    ),
    (
        "trainer.max_steps=1e9",
        args("trainer.max_steps=1e9"),
        Refused(
            "Error merging override trainer.max_steps=1e9: Value '1000000000.0' of type 'float' could not be "
            "converted to Integer"
        ),
    ),
    (
        "unknown key lora.rr=3",
        args("lora.rr=3"),
        Refused("Could not override 'lora.rr': Key 'rr' not in 'LoraConfig'; To append to your config use +lora.rr=3"),
    ),
    (
        "unknown group option reward_mix=nope",
        args("reward_mix=nope"),
        Refused(
            "Could not find 'reward_mix/nope'; options: correct, format, format_correct, format_then_correct, "
            "length, none, smoke"
        ),
    ),
    ("bad override syntax lora.r=[", args("lora.r=["), Refused("lora.r=[: no viable alternative at input '['")),
    (
        "-m with a wrong-typed sweep value lora.r=two,3",
        args("-m", "lora.r=two,3"),
        Refused("Error merging override lora.r=two: Value 'two' of type 'str' could not be converted to Integer"),
    ),
    ("-m with an unknown key lora.rr=3,4", args("-m", "lora.rr=3,4"), Refused("Could not override 'lora.rr'")),
    (
        "-m trainer.num_generations=1 (a refused sweep)",
        args("-m", "trainer.num_generations=1"),
        Refused("trainer.num_generations=1: GRPO compares completions within a group, use >= 2; no run was started"),
    ),
    (
        "a reward factory raising KeyboardInterrupt",
        args("+reward_mix.stop.factory=tests.reward_plugins.make_interrupting_reward", STOP),
        Refused(
            "reward_mix.stop.factory=tests.reward_plugins.make_interrupting_reward raised KeyboardInterrupt at the gate"
        ),
    ),
    (
        "-m with a reward factory raising KeyboardInterrupt",
        args("-m", "+reward_mix.stop.factory=tests.reward_plugins.make_interrupting_reward", STOP),
        Refused(
            "reward_mix.stop.factory=tests.reward_plugins.make_interrupting_reward raised KeyboardInterrupt at the "
            "gate; no run was started"
        ),
    ),
    (
        "a reward factory raising SystemExit(3)",
        args("+reward_mix.stop.factory=tests.reward_plugins.make_exiting_reward", STOP),
        Refused("reward_mix.stop.factory=tests.reward_plugins.make_exiting_reward raised SystemExit: 3 at the gate"),
    ),
    (
        "an interpolation that fails, hydra.run.dir=${oops}",
        args("hydra.run.dir=${{oops}}"),
        Refused("hydra.run.dir: Interpolation key 'oops' not found"),
    ),
    (
        "-m with an interpolation that fails, lora.r=${oops}",
        args("-m", "lora.r=${{oops}}"),
        Refused("lora.r: Interpolation key 'oops' not found; no run was started"),
    ),
    (
        "-m with a sweep type the sweeper lacks, lora.r=interval(1,3)",
        args("-m", "lora.r=interval(1,3)"),
        Refused("BasicSweeper does not support sweep type : INTERVAL_SWEEP"),
    ),
    (
        "-m hydra.sweeper.max_batch_size=0",
        args("-m", "lora.r=8,16", "hydra.sweeper.max_batch_size=0"),
        Refused("hydra.sweeper.max_batch_size=0: a batch holds at least one run"),
    ),
    (
        "-m hydra/launcher=nope",
        args("-m", "hydra/launcher=nope", "lora.r=8,16"),
        Refused("Could not find 'hydra/launcher/nope'; options: basic, grpo_basic"),
    ),
]

TABLES = {
    "Values": VALUES,
    "Files": FILES,
    "Search": SEARCH,
    "Credentials": CREDENTIALS,
    "Judge": JUDGE,
    "Top": TOP,
    # the third round's surfaces (issue 52): their tables sit beside the tests of what a launch cannot show
    "URL secrets": test_hostile_secrets.CASES,
    "Optuna studies": test_hostile_studies.CASES,
    "Runs, phases and PBT": test_hostile_runs.CASES,
    "Launchers": test_hostile_readers.CASES,
}
ALL = [(title, case) for title, cases in TABLES.items() for case in cases]


@pytest.mark.parametrize(
    "table, name, setup, expected",
    [
        pytest.param(title, *case, id=case[0], marks=[pytest.mark.slow] if case[0] in SLOW_CASES else [])
        for title, case in ALL
    ],
)
def test_hostile_input(table, name, setup, expected, tmp_path):
    run_case(table, setup, expected, tmp_path)


def describe(expected) -> str:
    if isinstance(expected, Refused):
        return f"refused: `{expected.text}`"
    if isinstance(expected, Failed):
        return f"failed: `{expected.text}`"
    return "trains"


def test_the_docs_tables_are_these_cases():
    """docs/validation.md's "Hostile inputs" section has one table per list above, its rows exactly the list's cases
    in order: `| <table letter><n> | id | outcome |`."""
    page = (ROOT / "docs" / "validation.md").read_text()
    section = page.split("## Hostile inputs", 1)[1].split("\n## ", 1)[0]
    for title, cases in TABLES.items():
        letter = title[0]
        block = section.split(f"### {title}", 1)[1].split("\n### ", 1)[0]
        rows = [line for line in block.splitlines() if line.startswith(f"| {letter}")]
        expected = [
            f"| {letter}{i} | {case_id} | {describe(outcome)} |" for i, (case_id, _, outcome) in enumerate(cases, 1)
        ]
        assert rows == expected, title
