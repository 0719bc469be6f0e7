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


# The shape of the GSM8K correctness reward in willccbb's "GRPO Llama-1B" demo (grpo_demo.py gist, 2025), reused
# in Unsloth's Llama3.1_(8B)-GRPO notebook and its many copies: same signature and scoring, written anew here.
# There the dataset's `answer` column already holds the number after "####" (its extract_hash_answer), so it
# compares the last <answer> text with `answer` as strings and pays 2.0.
def extract_xml_answer(text: str) -> str:
    """The text between the last `<answer>` and the `</answer>` after it, stripped (the whole text without tags)."""
    after = text.rsplit("<answer>", 1)[-1]
    return after.split("</answer>", 1)[0].strip()


def correctness_reward_func(prompts, completions, answer, **kwargs) -> list[float]:
    """2.0 when the extracted answer equals the row's `answer` string exactly, else 0.0."""
    extracted = [extract_xml_answer(completion[0]["content"]) for completion in completions]
    print(f"Question: {prompts[0][-1]['content']!r}  Answer: {answer[0]!r}  Extracted: {extracted[0]!r}")
    return [2.0 if got == expected else 0.0 for got, expected in zip(extracted, answer)]


def needs_source(completions, source, **kwargs):
    """1 when the completion cites the row's `source` column."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [1.0 if str(s) in t else 0.0 for t, s in zip(texts, source)]


def reads_named_column(completions, cases_column="cases", **kwargs):
    """Reads the column its parameter names, through **kwargs: declared, as the built-in `code` reward does."""
    return [1.0 if case else 0.0 for case in kwargs[cases_column]]


def ends_with_block(completions, tag="final", **kwargs):
    """1 when the completion ends with a non-blank `<final>…</final>` block: a reward that pays for the tag its
    parameter names, declared as the built-in format rewards declare theirs."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    opening, closing = f"<{tag}>", f"</{tag}>"
    return [
        1.0 if t.rstrip().endswith(closing) and t[t.rfind(opening) + len(opening) : t.rfind(closing)].strip() else 0.0
        for t in texts
    ]


def _declare():
    from grpo_sweep.rewards import Needs

    reads_named_column.reward_needs = Needs(column_params={"cases_column": "cases"})
    ends_with_block.reward_needs = Needs(tag_params=("tag",))


_declare()


def make_positional_reward():
    """A factory whose reward TRL could not call (it passes everything by keyword)."""
    return no_kwargs


def make_failing_reward(n):
    """A factory that refuses its argument with a multi-line message."""
    raise ValueError(f"n={n} is too big\nsee the docs")


def always_raises(completions, **kwargs):
    """A reward broken on every sample (with reward_errors=skip each is scored None and counted)."""
    raise ValueError("this reward cannot score anything")


def make_interrupting_reward():
    """A factory that raises KeyboardInterrupt itself (no Ctrl-C was pressed)."""
    raise KeyboardInterrupt


def make_exiting_reward():
    """A factory that ends the process itself."""
    raise SystemExit(3)


def make_ctrl_c_reward():
    """A factory during which the user presses Ctrl-C (SIGINT reaches the process)."""
    import signal

    signal.raise_signal(signal.SIGINT)
    return prefix_reward


def ctrl_c_in_training(completions, **kwargs):
    """A reward during whose first call the user presses Ctrl-C: the run is training then."""
    import signal

    signal.raise_signal(signal.SIGINT)
    return [0.0] * len(completions)


def killed_on_rank(completions, rank=1, **kwargs):
    """SIGKILLs its own process in one rank of a multi-process run (its RANK), as the OOM killer would; scores 0 in
    the others."""
    import os
    import signal

    if os.environ.get("RANK") == str(rank):
        os.kill(os.getpid(), signal.SIGKILL)
    return [0.0] * len(completions)


def first_batch(completions, prompts, trainer_state=None, path="", **kwargs):
    """Appends the prompts and completions TRL scores at step 0 to ``path`` (a JSON line a call), then pays nothing:
    a spy on what a run trains on first."""
    import json

    if trainer_state is not None and trainer_state.global_step == 0:
        texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
        shown = [p if isinstance(p, str) else p[-1]["content"] for p in prompts]
        with open(path, "a") as f:
            f.write(json.dumps({"prompts": shown, "completions": texts}) + "\n")
    return [0.0 for _ in completions]
