"""backend=unsloth: config, pinned-stack and GPU checks (no unsloth needed), and a real run through Unsloth's
CPU fallback (skipped where unsloth is not importable: see docs/gpu.md "On CPU" for the CPU install)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest

from grpo_sweep.backends.gpu_stack import GPU_PINS, BackendError, check_cpu_fallback, check_device, check_stack
from grpo_sweep.run.validate import ConfigError, validate

from .conftest import FAST, ROOT, compose, launch_here, needs_unsloth, run_launch


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def pinned(**changes):
    versions = {**GPU_PINS, "torch": GPU_PINS["torch"] + "+cpu", **changes}
    return lambda name: versions.get(name)


# -- the pinned stack -------------------------------------------------------------------------------------------


def test_pins_are_pyprojects_gpu_extra_and_core_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {}
    for requirement in project["optional-dependencies"]["gpu"] + project["dependencies"]:
        if "==" in requirement:
            name, version = requirement.split("==")
            declared[name] = version
    assert {name: declared[name] for name in GPU_PINS} == GPU_PINS


def test_pinned_stack_passes_and_a_local_build_tag_is_the_same_release():
    assert check_stack(need_vllm=True, version_of=pinned(), env={}) == []


def test_stack_check_names_every_problem_and_the_fix_in_one_line():
    version_of = pinned(unsloth=None, transformers="5.18.0")
    with pytest.raises(BackendError) as err:
        check_stack(need_vllm=False, version_of=version_of, env={})
    message = str(err.value)
    assert "\n" not in message
    assert "unsloth is not installed" in message
    assert "transformers 5.18.0 is installed, the [gpu] stack pins transformers==5.17.0" in message
    assert 'pip install "unsloth==2026.10.9" "transformers==5.17.0"  (or pip install -e ".[gpu]"' in message
    with pytest.raises(BackendError, match='Fix: pip install --no-deps "unsloth==2026.10.9"'):
        check_stack(need_vllm=False, version_of=version_of, env={}, cuda=False)


def test_vllm_is_required_only_for_fast_inference_but_must_match_when_present():
    assert check_stack(need_vllm=False, version_of=pinned(vllm=None), env={}) == []
    with pytest.raises(BackendError, match='vllm is not installed.*"vllm==0.30.0"'):
        check_stack(need_vllm=True, version_of=pinned(vllm=None), env={})
    with pytest.raises(BackendError, match="vllm 0.31.0 is installed"):
        check_stack(need_vllm=False, version_of=pinned(vllm="0.31.0"), env={})


def test_skip_env_lets_a_mismatch_through_and_reports_it():
    problems = check_stack(False, pinned(trl="1.15.0"), env={"GRPO_SWEEP_SKIP_STACK_CHECK": "1"})
    assert problems == ["trl 1.15.0 is installed, the [gpu] stack pins trl==1.14.2"]


# -- GPU-only options -------------------------------------------------------------------------------------------


def test_gpu_only_options_are_rejected_without_a_gpu_with_the_fix():
    cfg = compose(["backend=unsloth", "model.load_in_4bit=true", "backend.fast_inference=true"])
    validate(cfg)  # valid config: it is the machine that cannot run it
    with pytest.raises(BackendError) as err:
        check_device(cfg, cuda=False, version_of=pinned(), env={})
    assert str(err.value) == (
        "model.load_in_4bit=true (QLoRA), backend.fast_inference=true need a GPU and this machine has no GPU; "
        "on CPU: model.load_in_4bit=false, backend.fast_inference=false"
    )
    check_device(cfg, cuda=True, version_of=pinned(), env={})


def test_trl_vllm_generation_needs_a_gpu_and_vllm():
    cfg = compose(["trainer.use_vllm=true", "trainer.vllm_mode=colocate"])
    validate(cfg)
    with pytest.raises(BackendError, match="trainer.use_vllm=true needs a GPU.*on CPU: trainer.use_vllm=false"):
        check_device(cfg, cuda=False, version_of=pinned(), env={})
    with pytest.raises(BackendError, match='trainer.use_vllm=true needs vllm; fix: pip install "vllm==0.30.0"'):
        check_device(cfg, cuda=True, version_of=pinned(vllm=None), env={})
    check_device(cfg, cuda=True, version_of=pinned(), env={})


def test_disabled_cpu_fallback_is_named_before_unsloth_raises_deep_inside():
    with pytest.raises(BackendError, match="UNSLOTH_DISABLE_CPU_FALLBACK=1"):
        check_cpu_fallback(cuda=False, env={"UNSLOTH_DISABLE_CPU_FALLBACK": "1"})
    check_cpu_fallback(cuda=True, env={"UNSLOTH_DISABLE_CPU_FALLBACK": "1"})
    check_cpu_fallback(cuda=False, env={})


@pytest.mark.skipif(_cuda(), reason="checks the CPU refusal; this machine has a GPU")
def test_trl_vllm_run_on_cpu_fails_before_training_with_one_line(tmp_path):
    result = launch_here(["trainer.use_vllm=true", *FAST], tmp_path)
    assert result.returncode != 0
    assert (
        "trainer.use_vllm=true needs a GPU and this machine has no GPU; on CPU: trainer.use_vllm=false" in result.stderr
    )
    assert not list(tmp_path.glob("grpo/runs/*/metrics.jsonl"))  # refused on the training machine, before training


# -- configs ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["backend.fast_inference=true"], "backend.fast_inference=true is Unsloth's vLLM generation and backend=trl"),
        (["backend=unsloth", "trainer.use_vllm=true"], "trainer.use_vllm=true with backend=unsloth"),
        (["trainer.vllm_mode=remote"], "trainer.vllm_mode='remote'"),
        (["backend=unsloth", "backend.gpu_memory_utilization=1.5"], "backend.gpu_memory_utilization=1.5"),
        (["backend=unsloth", "backend.fast_inference=true", "lora=none"], "backend.fast_inference=true with lora=none"),
    ],
)
def test_backend_combinations_that_cannot_work_fail_at_compose_time(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        validate(compose(overrides))


def test_walkthrough_experiment_trains_with_unsloth_and_vllm():
    cfg = compose(["experiment=walkthrough_llama8b"])
    assert cfg.backend.name == "unsloth" and cfg.backend.fast_inference
    assert (cfg.model.load_in_4bit, cfg.model.max_seq_length, cfg.lora.r) == (True, 1024, 32)
    assert (cfg.backend.gpu_memory_utilization, cfg.backend.use_gradient_checkpointing) == (0.6, "unsloth")
    assert cfg.backend.random_state == 3407
    validate(cfg)


def test_gsm8k_experiment_trains_16bit_lora_with_unsloth_and_vllm():
    cfg = compose(["experiment=gsm8k_qwen0_5b"])
    assert cfg.backend.name == "unsloth" and cfg.backend.fast_inference and not cfg.model.load_in_4bit
    assert cfg.model.name_or_path == "Qwen/Qwen2.5-0.5B-Instruct" and cfg.lora.r == 32
    # the published GRPO-LoRA baseline's settings (verl: 49.6 -> 54.3 on GSM8K)
    assert (cfg.optimizer.learning_rate, cfg.lora.alpha, cfg.lora.target_modules) == (3e-5, 32, "all-linear")
    t = cfg.trainer
    assert (t.num_generations, t.max_completion_length, t.beta, t.max_steps) == (5, 1024, 0.001, 108)
    prompts_per_step = t.per_device_train_batch_size * t.gradient_accumulation_steps // t.num_generations
    assert prompts_per_step == 64 and t.max_steps == (7473 - 500) // 64  # one epoch of what validation leaves
    assert cfg.data.max_val_samples is None and cfg.data.max_test_samples is None and cfg.trainer.eval.temperature > 0
    validate(cfg)


def test_composing_and_validating_unsloth_configs_stays_light():
    code = (
        "import sys; sys.path.insert(0, 'tests'); from conftest import compose;"
        "from grpo_sweep.run.validate import validate;"
        "validate(compose(['experiment=walkthrough_llama8b']));"
        "heavy = [m for m in ('torch', 'unsloth', 'vllm', 'transformers', 'trl') if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


# -- a real run through Unsloth's CPU fallback ------------------------------------------------------------------


@pytest.mark.slow
@needs_unsloth
def test_unsloth_backend_trains_saves_and_generates_on_cpu(tmp_path):
    result = run_launch(["backend=unsloth", *FAST], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    [run_dir] = [p.parent for p in tmp_path.glob("grpo/runs/*/summary.json")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 6
    assert summary["versions"]["unsloth"] == GPU_PINS["unsloth"]
    assert (run_dir / "lora" / "adapter_model.safetensors").is_file()
    output = result.stdout + result.stderr
    assert "Unsloth (CPU)" in output  # FastLanguageModel built the model, not the TRL backend
    assert "imported before" not in output  # neither Unsloth's warning nor ours: unsloth came first
    # Unsloth's GRPOConfig would make these 0.28 and False for loss_type=dapo: the run keeps TRL's objective
    grpo = json.loads((run_dir / "grpo_config.json").read_text())
    assert (grpo["loss_type"], grpo["epsilon"], grpo["epsilon_high"]) == ("dapo", 0.2, 0.2)
    assert grpo["vllm_importance_sampling_correction"] is True and grpo["mask_truncated_completions"] is False

    answer = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpo_sweep.run.generate",
            str(run_dir),
            "What is 2 + 3?",
            "--seed",
            "0",
            "--max-new-tokens",
            "8",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert answer.returncode == 0, answer.stderr[-3000:]
    assert "is a LoRA adapter; loading its base" in answer.stdout + answer.stderr  # the run's adapter was loaded
    assert answer.stdout.strip()


@pytest.fixture(scope="module")
def unsloth_imported_late(tmp_path_factory):
    """One process that imports transformers, then the Unsloth backend (importing unsloth takes ~10 s: once for the
    tests below). Its cache is its own; its compile location the parent's, as a pool worker inherits it."""
    cache = tmp_path_factory.mktemp("cache")
    code = (
        "import transformers; import os, grpo_sweep.backends.unsloth_backend, unsloth_zoo.compiler as c; "
        "print(c.UNSLOTH_COMPILE_LOCATION, os.getpid(), os.path.isdir(c.UNSLOTH_COMPILE_LOCATION))"
    )
    env = {
        **os.environ,
        "GRPO_SWEEP_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join(sys.path),
        "UNSLOTH_COMPILE_LOCATION": str(cache / "unsloth_compiled_cache" / "1"),
    }
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=cache, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return cache, result


@needs_unsloth
def test_unsloth_writes_its_generated_code_under_the_cache_per_process(unsloth_imported_late):
    cache, result = unsloth_imported_late
    location, pid, existed = result.stdout.split()[-3:]
    assert location == str(cache / "unsloth_compiled_cache" / pid) and existed == "True"
    assert not (cache / "unsloth_compiled_cache" / pid).exists()  # removed when the process ended


@needs_unsloth
def test_importing_transformers_before_the_unsloth_backend_is_reported(unsloth_imported_late):
    _, result = unsloth_imported_late
    assert "transformers imported before unsloth" in result.stderr


# An import hook for every Python process of a launch (a sitecustomize.py on PYTHONPATH): each process that imports
# unsloth writes what was imported when `import unsloth` began and the class of every GRPOTrainer it built. On a
# GPU, `import unsloth` replaces trl.GRPOTrainer with UnslothGRPOTrainer (unsloth/models/rl.py); its CPU fallback
# does not, so the hook makes the same replacement right after it.
IMPORT_ORDER_PROBE = """
import importlib.util, json, os, sys
record = {"trainers": []}

def save():
    with open(os.path.join(os.environ["PROBE_DIR"], f"{os.getpid()}.json"), "w") as f:
        json.dump(record, f)

def replace_trainer():
    import trl
    import trl.trainer.grpo_trainer as grpo
    base = grpo.GRPOTrainer
    init = base.__init__
    def recording_init(self, *args, **kwargs):
        record["trainers"].append(type(self).__name__)
        save()
        init(self, *args, **kwargs)
    base.__init__ = recording_init
    if base.__name__ == "GRPOTrainer":
        patched = type("UnslothGRPOTrainer", (base,), {})
        trl.GRPOTrainer = trl.trainer.GRPOTrainer = grpo.GRPOTrainer = patched

class Watch:
    def find_spec(self, name, path=None, target=None):
        # a bare importlib.util.find_spec("unsloth") (the stack check) also lands here: record at execution
        if name != "unsloth" or "before_unsloth" in record:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        exec_module = spec.loader.exec_module
        def run(module):
            record["before_unsloth"] = sorted(m for m in ("trl", "transformers", "peft") if m in sys.modules)
            exec_module(module)
            replace_trainer()
            save()
        spec.loader.exec_module = run
        return spec

sys.meta_path.insert(0, Watch())
"""


def _probe_launch(tmp_path, args: list[str]) -> list[dict]:
    """The records of the processes of `launch.py ARGS` that imported unsloth."""
    hook, records = tmp_path / "hook", tmp_path / "records"
    hook.mkdir()
    records.mkdir()
    (hook / "sitecustomize.py").write_text(IMPORT_ORDER_PROBE)
    path = os.pathsep.join([str(hook), *filter(None, [os.environ.get("PYTHONPATH")])])
    result = run_launch(args, tmp_path, env={"PYTHONPATH": path, "PROBE_DIR": str(records)})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "imported before" not in result.stdout + result.stderr
    return [json.loads(p.read_text()) for p in sorted(records.glob("*.json"))]


def _trained_in_one_process_with_unsloth_first(records: list[dict]) -> None:
    trainers = [r for r in records if r["trainers"]]
    assert len(trainers) == 1, records  # both runs in one process: the case where the first run could differ
    assert trainers[0]["before_unsloth"] == []
    assert trainers[0]["trainers"] == ["UnslothGRPOTrainer", "UnslothGRPOTrainer"]


@pytest.mark.slow
@needs_unsloth
def test_two_trials_of_a_study_in_one_worker_import_unsloth_first_and_train_with_the_same_trainer(tmp_path):
    _trained_in_one_process_with_unsloth_first(
        _probe_launch(
            tmp_path,
            [
                "-m",
                "hparams_search=reward_design",
                "hydra.sweeper.n_trials=2",
                "hydra.sweeper.seeds_per_trial=1",
                "hydra.sweeper.pruner.name=none",
                "hydra.sweeper.sampler.seed=0",
                "backend=unsloth",
                *FAST,
            ],
        )
    )


@pytest.mark.slow
@needs_unsloth
@pytest.mark.parametrize("launcher", ["local", "pool"])
def test_two_runs_of_a_grid_in_one_process_import_unsloth_first_and_train_with_the_same_trainer(tmp_path, launcher):
    one_worker = ["hydra.launcher.n_jobs=1"] if launcher == "pool" else []
    _trained_in_one_process_with_unsloth_first(
        _probe_launch(
            tmp_path,
            [
                "-m",
                f"hydra/launcher={launcher}",
                *one_worker,
                "backend=unsloth",
                "trainer.seed=1,2",
                *FAST,
            ],
        )
    )


def test_a_trl_run_after_unsloth_replaced_trls_trainer_is_refused_in_one_line(tmp_path, monkeypatch):
    import trl

    from grpo_sweep.run.train import grpo_trainer_class, train

    stock = trl.GRPOTrainer
    assert grpo_trainer_class("trl") is stock
    patched = type("UnslothGRPOTrainer", (stock,), {})  # what `import unsloth` puts there on a GPU
    monkeypatch.setattr(trl, "GRPOTrainer", patched)
    assert grpo_trainer_class("unsloth") is patched  # read when the run starts, not when run.train was imported
    with pytest.raises(BackendError) as err:
        train(compose(FAST), tmp_path / "run")
    assert "\n" not in str(err.value)
    assert "backend=trl, but this process imported unsloth" in str(err.value)
    assert "UnslothGRPOTrainer; run each backend in its own process" in str(err.value)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


# -- the GPU check script ---------------------------------------------------------------------------------------


def test_gpu_check_shell_script_parses():
    result = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_gpu_check_cpu_dry_run_reports_every_number_it_can(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "scripts/gpu_check.py",
            "--cpu-dry-run",
            "--backends",
            "trl",
            "--skip-cli",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    [run] = json.loads((tmp_path / "gpu_check.json").read_text())["results"]
    assert run["status"] == "completed" and run["steps"] == 2
    assert run["train_generation_tokens_per_s"] > 0 and run["eval_generation_tokens_per_s"] > 0
    assert run["lora_round_trip"]["ok"] and run["lora_round_trip"]["lora_changes_logprobs"]
    assert "LoRA save -> reload -> gen" in result.stdout
