"""Evaluation decodes with exactly the settings the config states: nothing from the model's generation_config.json
(Qwen2.5-Instruct ships repetition_penalty 1.05-1.1 and top_k 20), on HF generate, Unsloth's vLLM and the run's
own vLLM (colocated or its server); and the plan says which engine evaluates a run."""

from __future__ import annotations

import json
import shutil
import sys
import types

import pytest
import torch

from grpo_sweep.backends import trl_backend
from grpo_sweep.backends.decoding import TRL_DEFAULTS, Decoding, evaluation_engine

from .conftest import FAST, compose, needs_unsloth

PROMPTS = [[{"role": "user", "content": f"What is {a} + {b}?"}] for a, b in ((2, 3), (17, 25), (40, 2), (9, 9))]
# The fields of vLLM's SamplingParams these settings use (vllm/sampling_params.py, SamplingParams; the same names
# and "0 (or -1): all tokens" for top_k from vLLM 0.10 through 0.30 and later): a name outside it would raise there.
VLLM_SAMPLING_FIELDS = {
    "n",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "max_tokens",
}
# TRL 1.14.2 VLLMClient.generate's keyword arguments (trl/generation/vllm_client.py)
CLIENT_FIELDS = {"n", "repetition_penalty", "temperature", "top_p", "top_k", "min_p", "max_tokens"}


@pytest.fixture(scope="module")
def two_copies(tmp_path_factory):
    """The tiny model twice: once with a generation_config.json that sets what Qwen's does (and worse), once
    without that file at all."""
    cfg = compose(FAST)
    source = trl_backend.model_source(cfg.model, cfg.data)
    root = tmp_path_factory.mktemp("models")
    plain, loaded = root / "plain", root / "penalised"
    shutil.copytree(source, plain)
    shutil.copytree(source, loaded)
    (plain / "generation_config.json").unlink(missing_ok=True)
    own = (
        json.loads((loaded / "generation_config.json").read_text())
        if (loaded / "generation_config.json").exists()
        else {}
    )
    own.update(repetition_penalty=1.3, top_k=2, do_sample=True, temperature=0.3, top_p=0.5, no_repeat_ngram_size=2)
    (loaded / "generation_config.json").write_text(json.dumps(own))

    def load(path):
        from transformers import AutoModelForCausalLM

        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), trl_backend.load_tokenizer(str(path))

    return load(plain), load(loaded)


def test_greedy_outputs_ignore_the_models_generation_config(two_copies):
    (plain, tokenizer), (penalised, _) = two_copies
    greedy = Decoding(max_new_tokens=24)
    expected = trl_backend.generate(plain, tokenizer, PROMPTS, greedy)
    assert trl_backend.generate(penalised, tokenizer, PROMPTS, greedy) == expected
    # the way it was: do_sample=False alone lets generate fill repetition_penalty 1.3 (and the n-gram ban) from the file
    ids = tokenizer.pad({"input_ids": trl_backend.chat_prompt_ids(tokenizer, PROMPTS)}, return_tensors="pt")
    old = penalised.generate(**ids, max_new_tokens=24, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert tokenizer.batch_decode(old[:, ids["input_ids"].shape[1] :], skip_special_tokens=True) != expected
    # and the model keeps its own config for whoever else reads it
    assert penalised.generation_config.repetition_penalty == 1.3


def test_sampled_outputs_ignore_it_too_seed_for_seed(two_copies):
    (plain, tokenizer), (penalised, _) = two_copies
    sampled = Decoding(max_new_tokens=24, temperature=1.0)
    torch.manual_seed(3)
    expected = trl_backend.generate(plain, tokenizer, PROMPTS, sampled)
    torch.manual_seed(3)
    assert trl_backend.generate(penalised, tokenizer, PROMPTS, sampled) == expected


def test_decoding_defaults_are_grpoconfigs_and_the_run_states_the_rest():
    from trl import GRPOConfig

    fields = GRPOConfig.__dataclass_fields__
    assert fields["top_k"].default == TRL_DEFAULTS["top_k"]
    assert fields["repetition_penalty"].default == TRL_DEFAULTS["repetition_penalty"]
    assert fields["min_p"].default in (None, TRL_DEFAULTS["min_p"])
    cfg = compose(FAST + ["+trainer.args.top_k=20", "+trainer.args.repetition_penalty=1.1", "trainer.top_p=0.9"])
    greedy = Decoding.from_config(cfg)
    assert (greedy.greedy, greedy.top_k, greedy.repetition_penalty, greedy.top_p, greedy.max_new_tokens) == (
        True,
        20,
        1.1,
        0.9,
        16,
    )
    sampled = greedy.at(cfg.trainer.eval.temperature)
    assert sampled.sampling_params()["top_k"] == 20 and sampled.sampling_params()["seed"] == cfg.trainer.seed
    # greedy is greedy in every engine: no truncation, no seed
    assert greedy.sampling_params() | {"repetition_penalty": 1.0} == {
        "n": 1,
        "max_tokens": 16,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "seed": None,
    }
    assert set(greedy.sampling_params()) <= VLLM_SAMPLING_FIELDS
    assert set(greedy.client_params()) <= CLIENT_FIELDS


class FakeSamplingParams:
    made: list[dict] = []

    def __init__(self, **kwargs):
        unknown = set(kwargs) - VLLM_SAMPLING_FIELDS
        assert not unknown, f"not a SamplingParams field: {unknown}"
        self.kwargs = kwargs
        FakeSamplingParams.made.append(kwargs)


@pytest.fixture
def fake_vllm(monkeypatch):
    FakeSamplingParams.made = []
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=FakeSamplingParams))
    return FakeSamplingParams


def _outputs(rows):
    return [
        types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"<{len(r['prompt_token_ids'])}>", token_ids=[7, 8])])
        for r in rows
    ]


@needs_unsloth
def test_unsloths_vllm_path_gets_every_setting_and_the_seed(fake_vllm, two_copies):
    from grpo_sweep.backends import unsloth_backend

    _, (_, tokenizer) = two_copies

    class EngineModel:
        vllm_engine = object()

        def fast_generate(self, prompts, sampling_params, lora_request):
            assert all(set(p) == {"prompt_token_ids"} for p in prompts)
            return _outputs(prompts)

    sampled = Decoding(max_new_tokens=9, temperature=0.8, top_p=0.95, seed=7)
    assert unsloth_backend.generate(EngineModel(), tokenizer, PROMPTS[:2], sampled) == [
        f"<{len(r)}>" for r in trl_backend.chat_prompt_ids(tokenizer, PROMPTS[:2])
    ]
    assert fake_vllm.made == [sampled.sampling_params()]
    assert fake_vllm.made[0] | {} == {
        "n": 1,
        "max_tokens": 9,
        "temperature": 0.8,
        "top_p": 0.95,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "seed": 7,
    }


def test_generate_cli_seeds_vllms_sampling(monkeypatch, tmp_path):
    from omegaconf import OmegaConf

    import grpo_sweep.backends as backends
    from grpo_sweep.run import generate as cli

    cfg = compose(FAST)
    (tmp_path / ".hydra").mkdir()
    OmegaConf.save(cfg, tmp_path / ".hydra" / "config.yaml")
    seen = []
    fake = types.SimpleNamespace(
        load_trained=lambda cfg, path: (None, None),
        generate=lambda model, tokenizer, messages, decoding: seen.append(decoding) or ["42"],
    )
    monkeypatch.setattr(backends, "get_backend", lambda name: fake)
    assert cli.main([str(tmp_path), "What is 40 + 2?", "--seed", "11", "--temperature", "0.7"]) == 0
    [decoding] = seen
    assert decoding.sampling_params()["seed"] == 11 and decoding.temperature == 0.7 and decoding.top_p == 0.95


@pytest.mark.parametrize(
    "overrides, engine",
    [
        ([], "hf"),
        (["trainer.use_vllm=true", "trainer.vllm_mode=colocate"], "vllm"),
        (["trainer.use_vllm=true", "trainer.vllm_mode=colocate", "+trainer.args.vllm_tensor_parallel_size=2"], "hf"),
        (["trainer.use_vllm=true", "trainer.vllm_mode=server"], "vllm"),
        (["experiment=qwen7b_server_1node"], "vllm"),
        (["experiment=walkthrough_llama8b"], "vllm"),
        (["backend=unsloth"], "hf"),
    ],
)
def test_the_plan_names_the_engine_that_evaluates(overrides, engine):
    plan = evaluation_engine(compose(overrides))
    assert plan.name == engine, plan.why


class FakeHandle:
    """TRL's VLLMGeneration as adapters/trl.py reads it."""

    def __init__(self, mode):
        self.mode, self.calls, self.enable_sleep_mode = mode, [], mode == "colocate"
        self._llm_weights_sleeping = False
        handle = self

        class Client:
            def generate(self, prompts, generation_kwargs=None, **params):
                handle.calls.append(("client.generate", params, generation_kwargs))
                return {"completion_ids": [[7, 8] for _ in prompts]}

        class LLM:
            def generate(self, prompts, sampling_params, use_tqdm):
                handle.calls.append(("llm.generate", sampling_params.kwargs, None))
                return _outputs(prompts)

            def wake_up(self, tags):
                handle.calls.append(("wake_up", tags, None))

            def sleep(self, level):
                handle.calls.append(("sleep", level, None))

        self.vllm_client, self.llm = Client(), LLM()

    def sync_weights(self):
        self.calls.append(("sync_weights", None, None))


@pytest.mark.parametrize("mode", ["colocate", "server"])
def test_the_runs_vllm_evaluates_on_the_weights_it_has_now(mode, fake_vllm, two_copies):
    from grpo_sweep.run.evaluate import run_engine

    _, (_, tokenizer) = two_copies
    handle = FakeHandle(mode)
    cfg = compose(["trainer.use_vllm=true", f"trainer.vllm_mode={mode}"])
    engine = run_engine(cfg, types.SimpleNamespace(use_vllm=True, vllm_generation=handle))
    sampled = Decoding.from_config(cfg, 1.0)
    texts = engine.generate(tokenizer, PROMPTS, sampled)
    assert texts == tokenizer.batch_decode([[7, 8]] * len(PROMPTS), skip_special_tokens=True)
    assert handle.calls[0][0] == "sync_weights"  # before it generates, every time
    if mode == "server":
        assert handle.calls[1] == ("client.generate", sampled.client_params(), {"seed": cfg.trainer.seed})
    else:
        assert [c[0] for c in handle.calls] == ["sync_weights", "wake_up", "llm.generate", "sleep"]
        assert handle.calls[2][1] == sampled.sampling_params() and handle._llm_weights_sleeping
    # HF where the plan says so, and a plan the trainer cannot keep is an error, not a silent HF
    assert run_engine(compose([]), types.SimpleNamespace(use_vllm=False)) is None
    with pytest.raises(RuntimeError, match="has no vLLM engine"):
        run_engine(cfg, types.SimpleNamespace(use_vllm=False))
