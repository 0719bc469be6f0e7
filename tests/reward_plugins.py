"""User-style reward functions, imported by path in tests."""


def prefix_reward(completions, prefix="<think>", **kwargs):
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [1.0 if t.startswith(prefix) else 0.0 for t in texts]


def no_kwargs(completions):
    return [0.0 for _ in completions]


def odd_length_raises(completions, **kwargs):
    """Raises on any completion of odd length: a reward with a bug that bites some samples."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    for t in texts:
        if len(t) % 2:
            raise ValueError(f"cannot parse {t[:20]!r}")
    return [0.5 for _ in texts]


def leaks_secrets(completions, **kwargs):
    """A careless reward: logs a token and raises an error quoting a key."""
    import logging
    import os

    logging.getLogger("careless_reward").warning("using token %s", os.environ.get("HF_TOKEN"))
    raise RuntimeError(f"auth failed for key {os.environ.get('WANDB_API_KEY')}")


def needs_answer(completions, answer, **kwargs):
    """1 when the completion's text equals the row's `answer` column: a reward that needs a column by name."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [1.0 if t.strip() == str(a) else 0.0 for t, a in zip(texts, answer)]


def needs_prompt(completions, prompt, **kwargs):
    """Asks for `prompt`, which TRL never passes to rewards (it passes `prompts`)."""
    return [0.0 for _ in completions]


# A faithful copy of the GSM8K correctness reward from willccbb's "GRPO Llama-1B" demo (grpo_demo.py gist,
# 2025), reused unchanged in Unsloth's Llama3.1_(8B)-GRPO notebook and countless copies. There the dataset's
# `answer` column already holds the number after "####" (its extract_hash_answer), hence `r == a`.
def extract_xml_answer(text: str) -> str:
    answer = text.split("<answer>")[-1]
    answer = answer.split("</answer>")[0]
    return answer.strip()


def correctness_reward_func(prompts, completions, answer, **kwargs) -> list[float]:
    responses = [completion[0]['content'] for completion in completions]
    q = prompts[0][-1]['content']
    extracted_responses = [extract_xml_answer(r) for r in responses]
    print('-'*20, f"Question:\n{q}", f"\nAnswer:\n{answer[0]}", f"\nResponse:\n{responses[0]}", f"\nExtracted:\n{extracted_responses[0]}")
    return [2.0 if r == a else 0.0 for r, a in zip(extracted_responses, answer)]


def needs_source(completions, source, **kwargs):
    """1 when the completion cites the row's `source` column."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [1.0 if str(s) in t else 0.0 for t, s in zip(texts, source)]
