"""GPU behaviour decided on CPU: the prompt ids vLLM evaluation sends, where a finished run's model is placed, and
where Unsloth writes its generated code."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

from grpo_sweep.backends import trl_backend as trl_backend
from grpo_sweep.backends.decoding import Decoding
from grpo_sweep.backends.gpu_stack import UNSLOTH_COMPILE_DIR, UNSLOTH_COMPILE_ENV, unsloth_compile_location

BOS = "<|begin_of_text|>"
# Llama 3.1's shape: the template writes BOS itself, and the tokenizer also adds BOS to any text it encodes.
LLAMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>{{ m['content'] }}"
    "<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>{% endif %}"
)


@pytest.fixture(scope="module")
def llama_like_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = [BOS, "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<pad>", "<unk>"]
    words = ["user", "assistant", "system", "What", "is", "2", "+", "3", "?", "Hi"]
    vocab = {token: i for i, token in enumerate(specials + words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.add_special_tokens(specials)
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, vocab[BOS])]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token="<|eot_id|>",
        pad_token="<pad>",
        unk_token="<unk>",
        padding_side="left",
        chat_template=LLAMA_TEMPLATE,
    )


PROMPTS = [
    [{"role": "user", "content": "What is 2 + 3 ?"}],
    [{"role": "system", "content": "Hi"}, {"role": "user", "content": "What is 2 ?"}],
]


def test_chat_prompt_ids_have_one_bos_where_tokenizing_the_text_gives_two(llama_like_tokenizer):
    tokenizer = llama_like_tokenizer
    bos = tokenizer.bos_token_id
    text = tokenizer.apply_chat_template(PROMPTS[0], tokenize=False, add_generation_prompt=True)
    assert tokenizer(text)["input_ids"][:2] == [bos, bos]  # what vLLM does to a text prompt (vllm#9519)
    ids = trl_backend.chat_prompt_ids(tokenizer, PROMPTS)
    assert [row.count(bos) for row in ids] == [1, 1]
    assert all(row[0] == bos for row in ids)
    assert ids[0] == tokenizer(text, add_special_tokens=False)["input_ids"]  # the template's tokens, nothing added


def test_hf_generation_feeds_the_model_the_same_one_bos_ids(llama_like_tokenizer):
    tokenizer = llama_like_tokenizer
    seen = []

    class Recorder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def generate(self, input_ids, attention_mask, generation_config=None, **kwargs):
            seen.extend(row[mask.bool()].tolist() for row, mask in zip(input_ids, attention_mask))
            return torch.cat([input_ids, torch.full((len(input_ids), 1), tokenizer.eos_token_id)], dim=1)

    trl_backend.generate(Recorder(), tokenizer, PROMPTS, Decoding(max_new_tokens=1))
    assert seen == trl_backend.chat_prompt_ids(tokenizer, PROMPTS)


def test_a_finished_run_is_loaded_onto_the_gpu_when_there_is_one(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert trl_backend.inference_device() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert trl_backend.inference_device() == "cuda"

    # load_trained asks for that device (recorded here, not moved: this machine may have no GPU)
    (tmp_path / trl_backend.FULL_MODEL_DIR).mkdir()
    loads = []
    monkeypatch.setattr(trl_backend, "load_base_model", lambda model_cfg, source, device=None: loads.append(device))
    monkeypatch.setattr(trl_backend, "load_tokenizer", lambda source: None)
    cfg = SimpleNamespace(model=SimpleNamespace(tiny=None), data=None)
    trl_backend.load_trained(cfg, tmp_path)
    assert loads == ["cuda"]


def test_unsloth_compiles_into_a_directory_of_its_own_per_process(monkeypatch, tmp_path):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    ours = tmp_path / UNSLOTH_COMPILE_DIR
    assert unsloth_compile_location({}, pid=11) == str(ours / "11")
    # a pool worker inherits its parent's setting: it gets its own directory, not the parent's
    assert unsloth_compile_location({UNSLOTH_COMPILE_ENV: str(ours / "11")}, pid=12) == str(ours / "12")
    assert unsloth_compile_location({UNSLOTH_COMPILE_ENV: "/scratch/mine"}, pid=12) == "/scratch/mine"
    assert unsloth_compile_location({}) == str(ours / str(os.getpid()))
