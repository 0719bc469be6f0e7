"""Guards for the private APIs grpo_sweep/adapters/ use: each fails naming the library and its version when an
upgrade takes away what the adapter relies on."""

from __future__ import annotations

import inspect
import subprocess
import sys
from importlib import metadata

import pytest


def _version(package: str) -> str:
    return f"{package} {metadata.version(package)}"


def test_trl_grpo_trainer_keeps_its_latest_batch_in_logs(tmp_path):
    """A real GRPOTrainer step on the tiny model: what the W&B completions table reads is the batch just generated."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_sweep.adapters.trl import LATEST_BATCH_KEYS, latest_completions
    from grpo_sweep.models.tiny import TinySpec, ensure_tiny_model

    def length(completions, **kwargs):
        return [float(len(c)) for c in completions]

    path = ensure_tiny_model(TinySpec())
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=4,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path),
        reward_funcs=[length],
        args=args,
        train_dataset=datasets.Dataset.from_list([{"prompt": "1 + 1 ="}] * 4),
        processing_class=AutoTokenizer.from_pretrained(path),
    )
    where = f"{_version('trl')} (adapters/trl.py)"
    assert latest_completions(trainer) is None, where  # before the first batch
    trainer.train()
    logs = latest_completions(trainer)
    assert logs is not None and set(LATEST_BATCH_KEYS) <= set(logs), where
    assert len(logs["prompt"]) == len(logs["completion"]) == len(logs["advantages"]) == 4, where
    assert list(logs["rewards"]) == ["length"] and len(logs["rewards"]["length"]) == 4, where


def test_trl_grpo_trainer_weights_each_scoring_with_the_reward_weights_set_in_place(tmp_path):
    """Weights set between two steps are the ones the next step's rewards are summed with: what a scheduled mix
    (run/train.RewardSchedule) relies on."""
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_sweep.adapters.trl import set_reward_weights
    from grpo_sweep.models.tiny import TinySpec, ensure_tiny_model

    def one(completions, **kwargs):
        return [1.0] * len(completions)

    def three(completions, **kwargs):
        return [3.0] * len(completions)

    class Swap(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            set_reward_weights(trainer, [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]][state.global_step])

    path = ensure_tiny_model(TinySpec())
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=4,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        logging_steps=1,
        disable_tqdm=True,
        reward_weights=[1.0, 1.0],
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path),
        reward_funcs=[one, three],
        args=args,
        train_dataset=datasets.Dataset.from_list([{"prompt": "1 + 1 ="}] * 12),
        processing_class=AutoTokenizer.from_pretrained(path),
        callbacks=[Swap()],
    )
    trainer.train()
    rewards = [row["reward"] for row in trainer.state.log_history if "reward" in row]
    assert rewards == [1.0, 3.0, 2.0], f"{_version('trl')} (adapters/trl.py): {rewards}"


def test_hydra_internals_the_adapter_calls_are_there():
    from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
    from hydra_plugins.hydra_joblib_launcher._core import execute_job

    from grpo_sweep.adapters import hydra as adapter  # its own imports are the rest of the guard

    where = f"{_version('hydra-core')} ({adapter.__name__})"
    assert list(inspect.signature(ConfigLoaderImpl._apply_overrides_to_config).parameters) == ["overrides", "cfg"], (
        where
    )
    assert list(inspect.signature(get_overrides_dirname).parameters) == [
        "overrides",
        "exclude_keys",
        "item_sep",
        "kv_sep",
    ], where
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
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import (
        BaseSubmititLauncher,
        LocalLauncher,
        SlurmLauncher,
    )

    from grpo_sweep.adapters.hydra import BasicLauncher
    from grpo_sweep.adapters.submitit import JOB_ARGUMENTS, executor_kind, job_arguments, process_per_job

    where = f"{_version('hydra-submitit-launcher')} (adapters/submitit.py)"
    assert (executor_kind(LocalLauncher), executor_kind(SlurmLauncher)) == ("local", "slurm"), where
    assert process_per_job(LocalLauncher) and process_per_job(SlurmLauncher) and not process_per_job(BasicLauncher), (
        where
    )
    assert tuple(inspect.signature(BaseSubmititLauncher.__call__).parameters)[1:] == JOB_ARGUMENTS, where
    assert len(job_arguments(["a=1"], 3)) == len(JOB_ARGUMENTS) - 1  # Hydra's state goes last


def test_loky_names_the_dead_workers_exit_codes_in_its_error():
    import os

    from joblib.externals.loky import get_reusable_executor

    from grpo_sweep.adapters.loky import BrokenProcessPool, worker_exit_codes

    where = f"{_version('joblib')} (adapters/loky.py)"
    executor = get_reusable_executor(max_workers=1, kill_workers=True)
    try:
        executor.submit(os._exit, 137).result()  # the worker dies as the OOM killer would end it
    except BrokenProcessPool as error:
        assert worker_exit_codes(error) == "EXIT(137)", (where, str(error))
    else:
        raise AssertionError(f"{where}: a dead worker raised no BrokenProcessPool")
    finally:
        executor.shutdown(kill_workers=True)
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


def test_hydra_loader_repository_and_basic_sweeper_batches_are_there(tmp_path):
    from types import SimpleNamespace

    from hydra.core.config_store import ConfigStore

    from grpo_sweep.adapters.hydra import is_config_group, store_over_plugin, sweep_jobs

    from .conftest import CONF

    where = f"{_version('hydra-core')} (adapters/hydra.py)"
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.utils import create_config_search_path

    loader = ConfigLoaderImpl(config_search_path=create_config_search_path(str(CONF)))
    assert is_config_group(loader, "reward_mix") and not is_config_group(loader, "trainer.max_steps"), where
    # a BasicSweeper's jobs, its params (hydra.sweeper.params) first, in the order of its batches; that a real
    # sweep's second batch is gated with its first is test_gate.py's
    # test_a_grid_with_one_bad_job_starts_no_run[local-batches]
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    sweeper = object.__new__(BasicSweeper)
    sweeper.params, sweeper.max_batch_size = {"b": "x,y"}, 1
    sweeper.hydra_context = SimpleNamespace(config_loader=loader)
    assert sweep_jobs(sweeper, ["a=1,2"]) == [["b=x", "a=1"], ["b=x", "a=2"], ["b=y", "a=1"], ["b=y", "a=2"]], where
    # after the plugin scan, the stored entry is ours
    store_over_plugin("hydra/launcher", "guard_entry", {"x": 1}, provider="test")
    assert ConfigStore.instance().load("hydra/launcher/guard_entry.yaml").node.x == 1, where


def test_latex2sympy_keeps_the_written_order_of_a_chain():
    from math_verify import parse

    from grpo_sweep.adapters.latex2sympy import conjuncts_in_order

    chain = parse("$x = 2 = y$", parsing_timeout=None)[0]
    assert hasattr(chain, "_unsorted_args"), (
        f"{_version('latex2sympy2_extended')}: a parsed chain lost _unsorted_args (adapters/latex2sympy.py)"
    )
    assert [str(c) for c in conjuncts_in_order(chain)] == ["Eq(x, 2)", "Eq(2, y)"]
    assert [str(c) for c in chain.args] == ["Eq(2, y)", "Eq(x, 2)"]  # what sympy's sorted args would give


def test_submitit_executor_is_set_up_from_the_launchers_params(tmp_path):
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher

    from grpo_sweep.adapters.submitit import make_executor

    launcher = LocalLauncher(
        submitit_folder=str(tmp_path / "%j"),
        timeout_min=7,
        cpus_per_task=1,
        gpus_per_node=0,
        tasks_per_node=1,
        mem_gb=1,
        nodes=1,
        name="guard",
    )
    executor = make_executor(launcher)
    where = f"{_version('hydra-submitit-launcher')}/{_version('submitit')} (adapters/submitit.py)"
    assert executor.cluster == "local" and executor.parameters["timeout_min"] == 7, where


PRIVATE = __import__("re").compile(r"^_[a-z][a-z0-9_]*[a-z0-9]$")
# documented functions of the standard library that happen to start with an underscore
STDLIB_UNDERSCORED = {"_exit"}


def _python_files():
    from .conftest import ROOT

    for folder in ("grpo_sweep", "hydra_plugins"):
        yield from sorted((ROOT / folder).rglob("*.py"))
    yield ROOT / "launch.py"


def test_optuna_trial_rebuilt_from_its_id_reports_to_the_same_trial(tmp_path):
    import optuna

    from grpo_sweep.adapters.optuna import trial_id, trial_of

    where = f"{_version('optuna')} (adapters/optuna.py)"
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    study = optuna.create_study(study_name="s", storage=storage)
    study.ask()
    trial = study.ask()  # not the first: its id and its number need not agree
    rebuilt = trial_of(optuna.load_study(study_name="s", storage=storage), trial_id(trial))
    assert rebuilt.number == trial.number, where
    rebuilt.report(0.5, 4)
    assert study.trials[trial.number].intermediate_values == {4: 0.5}, where


def test_optuna_workers_racing_for_the_last_trials_make_exactly_the_budget():
    """Study.optimize makes each trial through Study.ask (what load_budgeted_study overrides): four processes whose
    trials end at once, the race that gave a two-worker SLURM study 7 trials for 6, make exactly the budget. The race
    is the benchmark's (its lock arm, once), run as the command a user reruns."""
    from .conftest import ROOT

    cmd = [sys.executable, "-m", "bench.optuna_budget_race", "--repeats", "1", "--workers", "4", "--trials", "60"]
    done = subprocess.run([*cmd, "--arms", "lock"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    where = f"{_version('optuna')} (adapters/optuna.py)"
    assert done.returncode == 0, f"{where}: {done.stderr[-2000:]}"
    assert "budget lock: [60] (0 of 1 over the budget of 60)" in done.stdout, f"{where}: {done.stdout}"


def test_a_study_has_the_trial_numbers_it_made_and_none_beyond(tmp_path):
    """has_trial_number, the lock's test of a spent budget, on a study whose trials one process made."""
    import optuna

    from grpo_sweep.adapters.optuna import TrialBudgetSpent, has_trial_number, load_budgeted_study
    from grpo_sweep.search.optuna.storage import open_storage

    url = f"sqlite:///{tmp_path / 'o.db'}"
    optuna.create_study(study_name="s", storage=url)
    study = load_budgeted_study("s", open_storage(url), None, None, 6, str(tmp_path / "budget"))
    with pytest.raises(TrialBudgetSpent):
        study.optimize(lambda t: t.suggest_float("x", 0, 1))
    where = f"{_version('optuna')} (adapters/optuna.py)"
    assert len(study.trials) == 6, where
    assert has_trial_number(study, 5) and not has_trial_number(study, 6), where


def test_hydra_composition_errors_are_one_line_while_it_lasts(tmp_path, monkeypatch, capsys):
    """What Hydra's run_and_report prints for an override it cannot compose, as one line; HYDRA_FULL_ERROR=1 still
    gives the trace; any other exception is Hydra's to report."""
    import pytest
    from hydra import compose, initialize_config_dir
    from hydra._internal import utils

    from grpo_sweep.adapters.hydra import one_line_errors
    from grpo_sweep.configstore import register_configs

    from .conftest import CONF

    register_configs()
    where = f"{_version('hydra-core')} (adapters/hydra.py)"
    assert list(inspect.signature(utils.run_and_report).parameters) == ["func"], where

    def composing(override):
        def run():
            with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
                compose(config_name="config", overrides=[override])

        return lambda: utils.run_and_report(run)

    lines = {
        "lora.r=two": "Error merging override lora.r=two: Value 'two' of type 'str' could not be converted to Integer",
        "lora.rr=3": (
            "Could not override 'lora.rr': Key 'rr' not in 'LoraConfig'; To append to your config use +lora.rr=3"
        ),
        "lora=nope": "In 'config': Could not find 'lora/nope'; options: default, none, wide",
        "lora.r=[": (
            "lora.r=[: no viable alternative at input '['; See "
            "https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details"
        ),
    }
    with one_line_errors("grpo-sweep: "):
        for override, line in lines.items():
            with pytest.raises(SystemExit) as stopped:
                composing(override)()
            assert stopped.value.code == f"grpo-sweep: {line}", where
        monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
        with pytest.raises(Exception, match="Could not override 'lora.rr'"):
            composing("lora.rr=3")()
        monkeypatch.delenv("HYDRA_FULL_ERROR")

        def bug():
            raise RuntimeError("a bug")

        with pytest.raises(SystemExit) as stopped:  # Hydra's own report: a traceback, exit status 1
            utils.run_and_report(bug)
        assert stopped.value.code == 1 and "RuntimeError: a bug" in capsys.readouterr().err, where
    with pytest.raises(SystemExit) as stopped:  # afterwards Hydra reports as it did
        composing("lora.r=two")()
    assert stopped.value.code == 1, where


def test_transformers_trainer_loads_a_checkpoint_and_a_scheduler_keeps_its_last_rates(tmp_path):
    """adapters/transformers.py: ``Trainer._load_from_checkpoint(path)`` is there with the signature it calls, and
    a torch LR scheduler's ``get_last_lr()`` (what the Trainer logs) reads ``_last_lr``, which scale_learning_rate
    sets; the next step follows the new base rate."""
    import torch
    from transformers import Trainer, get_scheduler

    from grpo_sweep.adapters.transformers import scale_learning_rate

    params = list(inspect.signature(Trainer._load_from_checkpoint).parameters)
    assert params[:2] == ["self", "resume_from_checkpoint"]
    weight = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.AdamW([weight], lr=1e-3)
    scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=10)
    for _ in range(4):
        optimizer.step()
        scheduler.step()
    assert scheduler.get_last_lr() == pytest.approx([1e-3 * 6 / 10])
    assert scale_learning_rate(optimizer, scheduler, 5e-4) == pytest.approx(1e-3)
    assert scheduler.get_last_lr() == pytest.approx([5e-4 * 6 / 10]) and scheduler._last_lr == scheduler.get_last_lr()
    optimizer.step()
    scheduler.step()
    assert optimizer.param_groups[0]["lr"] == pytest.approx(5e-4 * 5 / 10)


def test_no_private_api_of_another_library_outside_adapters():
    """Another library's underscored attribute, getattr name or module is used only in grpo_sweep/adapters/, behind a
    guard test above. An underscored name that grpo-sweep defines itself (a function, an attribute it sets) is its
    own."""
    import ast

    from .conftest import ROOT

    own: set[str] = set()
    trees = {path: ast.parse(path.read_text()) for path in _python_files()}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                own.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                own.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                own.add(node.attr)
            elif isinstance(node, ast.arg):
                own.add(node.arg)
    found = []
    for path, tree in trees.items():
        if path.is_relative_to(ROOT / "grpo_sweep" / "adapters"):
            continue
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute) and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            ):
                name = node.attr
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                name = node.args[1].value
            elif (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and not (node.module or "").startswith("grpo_sweep")
            ):
                parts = (node.module or "").split(".") + [alias.name for alias in node.names]
                name = next((part for part in parts if PRIVATE.match(part)), None)
                if name is not None:
                    found.append(f"{where}:{node.lineno} imports {name} of {node.module}")
                continue
            if name is not None and PRIVATE.match(name) and name not in own and name not in STDLIB_UNDERSCORED:
                found.append(f"{where}:{node.lineno} uses .{name}")
    assert not found, "another library's private API outside grpo_sweep/adapters/: " + "; ".join(found)


def test_trl_vllm_generation_keeps_what_an_evaluation_through_it_reads():
    """adapters/trl.py generates an evaluation through the trainer's VLLMGeneration (no GPU here to build one, so
    its source is read): the handle's name on the trainer, its mode and engines, sync_weights, and the sleep flag
    its own generate reads to push the weights again."""
    from trl import GRPOTrainer
    from trl.generation.vllm_generation import VLLMGeneration

    where = f"{_version('trl')} (adapters/trl.py: trainer_vllm, vllm_completion_ids)"
    trainer = inspect.getsource(GRPOTrainer)
    assert "self.use_vllm = args.use_vllm" in trainer and "self.vllm_generation = VLLMGeneration(" in trainer, where
    handle = inspect.getsource(VLLMGeneration)
    for read in (
        "self.mode = mode",
        "self.enable_sleep_mode = enable_sleep_mode",
        "self.vllm_client = VLLMClient(",
        "self.llm = LLM(",
        "def sync_weights(self)",
        "self.llm.sleep(level=2)",
        "self._llm_weights_sleeping = True",
        "and self._llm_weights_sleeping:",
    ):
        assert read in handle, f"{where}: VLLMGeneration no longer has {read!r}"


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
def test_http_client_reads_a_body_a_response_hook_bounded(library):
    """A response hook swaps the body for the judge's bounded stream (adapters/httpx.py): the body read after the
    hook is the bounded one, cut past the size cap and at the wall clock with the client's own ReadTimeout."""
    import asyncio

    from grpo_sweep.adapters.httpx import bound_reply

    http = pytest.importorskip(library, reason=f"{library}: the client openai uses, installed with it")
    where = f"{_version(library)} (adapters/httpx.py)"

    class TooLarge(Exception):
        pass

    async def body(pause_s: float):
        for _ in range(3):
            await asyncio.sleep(pause_s)
            yield b"x" * 10

    async def read(max_bytes: int, pause_s: float, timeout_s: float) -> bytes:
        async def hook(response):
            bound_reply(response, asyncio.get_running_loop().time() + timeout_s, max_bytes, TooLarge)

        transport = http.MockTransport(lambda request: http.Response(200, content=body(pause_s)))
        async with http.AsyncClient(transport=transport, event_hooks={"response": [hook]}) as client:
            return (await client.get("http://judge.invalid/")).content

    assert asyncio.run(read(30, 0.0, 5.0)) == b"x" * 30, where
    with pytest.raises(TooLarge):
        asyncio.run(read(25, 0.0, 5.0))
    with pytest.raises(http.ReadTimeout):
        asyncio.run(read(30, 0.2, 0.3))


def test_math_verify_tells_a_bare_variable_from_a_value():
    """adapters/math_verify.py: the left side of ``x = 12`` is a name, the left side of ``2 + 10 = 12`` a value."""
    from sympy import Integer, Symbol

    from grpo_sweep.adapters.math_verify import only_symbols

    where = f"{_version('math-verify')} (adapters/math_verify.py: math_verify.grader.is_expr_of_only_symbols)"
    x, y = Symbol("x"), Symbol("y")
    assert only_symbols(x) and only_symbols(x * y), where
    assert not only_symbols(Integer(2)) and not only_symbols(x + 1), where
