"""Held-out evaluation: generate for held-out prompts and score them, before, during and after training.

What one evaluation measures (keys as in ``summary.json``):

- ``eval_accuracy``: greedy decoding, scored by ``trainer.eval.accuracy_reward`` (default ``correct``: the answer
  in the asked format). Strict: a right number outside ``<answer>`` earns nothing.
- ``eval_accuracy_lenient``: the same greedy completions, the last number/expression anywhere in the text
  (``rewards.extract_lenient``) compared with the ground truth. Strict vs lenient tells whether a reward taught
  the format, the answer, or both.
- ``eval_rewards``: the held-out mean of every reward of the mix.
- ``eval_pass_at_k`` / ``eval_maj_at_k`` (final evaluation only, ``trainer.eval.k`` > 0): ``k`` samples per
  prompt at ``trainer.eval.temperature``; pass@k = share of prompts with at least one sample the accuracy reward
  scores 1, maj@k = share whose most frequent extracted answer is right.

``PeriodicEval`` runs the greedy part before training (step 0) and every ``trainer.eval.every_steps`` steps, writes
``eval/accuracy``, ``eval/accuracy_lenient`` and ``eval/<reward>`` rows into ``metrics.jsonl`` (and the tracker),
and keeps the adapter of the best evaluation so far in ``<run_dir>/best/``.
"""
from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from transformers import TrainerCallback

from .results import lookup, measured_periodically, without_best
from ..rewards import build_reward
from ..rewards.answer import equivalent, extract_answer, extract_boxed, extract_lenient
from ..rewards.mix import terms

log = logging.getLogger(__name__)

BEST_DIR = "best"
BEST_RECORD = "best.json"


class EvaluationFailed(RuntimeError):
    """The held-out evaluation raised; the run's adapter is saved and the summary says so."""


def _mean(values: list) -> float | None:
    kept = [v for v in values if v is not None and math.isfinite(v)]
    return sum(kept) / len(kept) if kept else None


def accuracy_reward(cfg: Any):
    """The accuracy reward, with the params the mix gives it (e.g. a custom answer tag)."""
    name = cfg.trainer.eval.accuracy_reward
    for term in terms(cfg.reward_mix):
        if term.target == name:
            return build_reward(name, name, term.params, term.columns)
    return build_reward(name)


def answer_key(cfg: Any) -> Callable[[str], str | None]:
    """What the accuracy reward reads as "the answer" of a completion, for majority voting."""
    name = cfg.trainer.eval.accuracy_reward
    params = next((t.params for t in terms(cfg.reward_mix) if t.target == name), {})
    if name == "correct":
        tag = params.get("answer_tag", "answer")
        return lambda text: extract_answer(text, tag)
    if name == "boxed":
        return extract_boxed
    return extract_lenient  # a custom accuracy reward: its extraction is unknown, vote on the last answer


def _ignore(*args, **kwargs) -> None:
    pass


def _normal(answer: str | None) -> str | None:
    return None if answer is None else " ".join(answer.split()) or None


def selection_metric(optimized_metric: str) -> str:
    """The metric the best step is chosen on: the objective without ``best.``, when the evaluations measure it."""
    return without_best(optimized_metric) if measured_periodically(optimized_metric) else "eval_accuracy"


class Evaluator:
    """Everything one run's evaluations share: the held-out data, the rewards, the scorers."""

    def __init__(self, backend, tokenizer, held_out, reward_funcs: list, cfg: Any, run_dir: Path | None = None):
        self.backend, self.tokenizer, self.cfg = backend, tokenizer, cfg
        self.eval_cfg = cfg.trainer.eval
        self.reward_funcs = reward_funcs
        self.accuracy = accuracy_reward(cfg)
        self.answer_of = answer_key(cfg)
        self.prompts = list(held_out["prompt"])
        self.columns = {name: list(held_out[name]) for name in held_out.column_names if name != "prompt"}
        self.truths = self.columns.get("ground_truth")
        self.run_dir = run_dir

    def _generate(self, model, prompts: list, temperature: float) -> list[str]:
        prepare = getattr(self.backend, "prepare_generation", None)
        if prepare is not None and self.run_dir is not None:
            prepare(model, self.tokenizer, self.run_dir)  # vLLM serves a saved adapter: save the current one
        return self.backend.generate(
            model,
            self.tokenizer,
            prompts,
            max_new_tokens=self.eval_cfg.max_new_tokens or self.cfg.trainer.max_completion_length,
            temperature=temperature,
            top_p=self.cfg.trainer.top_p,
            batch_size=self.eval_cfg.batch_size,
        )

    def _kwargs(self, prompts: list, texts: list[str], columns: dict) -> dict:
        completions = [[{"role": "assistant", "content": text}] for text in texts]
        completion_ids = [self.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        # what TRL passes a reward besides the columns; outside training there is no trainer state to give
        return dict(prompts=prompts, completions=completions, completion_ids=completion_ids, trainer_state=None,
                    log_extra=_ignore, log_metric=_ignore, **columns)

    def lenient(self, texts: list[str], truths: list | None) -> list[float | None]:
        if truths is None:
            return [None] * len(texts)
        return [equivalent(extract_lenient(text), truth) for text, truth in zip(texts, truths)]

    def greedy(self, model, limit: int | None = None) -> dict:
        """Greedy completions for the held-out prompts (the first ``limit``), scored every way but sampling."""
        n = len(self.prompts) if limit is None else min(limit, len(self.prompts))
        prompts = self.prompts[:n]
        columns = {k: v[:n] for k, v in self.columns.items()}
        texts = self._generate(model, prompts, 0.0)
        kwargs = self._kwargs(prompts, texts, columns)
        scores = {fn.__name__: fn(**kwargs) for fn in self.reward_funcs}
        accuracy = self.accuracy(**kwargs)
        lenient = self.lenient(texts, columns.get("ground_truth"))
        samples = [
            {
                "prompt": prompts[i],
                "ground_truth": columns.get("ground_truth", [None] * n)[i],
                "completion": texts[i],
                "accuracy": accuracy[i],
                "accuracy_lenient": lenient[i],
                "scores": {name: values[i] for name, values in scores.items()},
            }
            for i in range(min(self.eval_cfg.num_samples, n))
        ]
        return {
            "eval_accuracy": _mean(accuracy),
            "eval_accuracy_lenient": _mean(lenient),
            "eval_rewards": {name: _mean(values) for name, values in scores.items()},
            "eval_samples": n,
            "samples": samples,
        }

    def sampled(self, model) -> dict:
        """pass@k and maj@k from ``k`` samples per prompt at ``trainer.eval.temperature``."""
        k = int(self.eval_cfg.k or 0)
        if k <= 0:
            return {}
        n = len(self.prompts)
        prompts = [p for p in self.prompts for _ in range(k)]
        columns = {name: [v for v in values for _ in range(k)] for name, values in self.columns.items()}
        texts = self._generate(model, prompts, float(self.eval_cfg.temperature))
        scores = self.accuracy(**self._kwargs(prompts, texts, columns))
        passed, majority, judged = 0, 0, 0
        for i in range(n):
            group = range(i * k, (i + 1) * k)
            values = [scores[j] for j in group]
            if all(v is None for v in values):
                continue  # the truth is unusable: not counted, like the accuracy reward's None
            judged += 1
            passed += any(v == 1.0 for v in values)
            keys = [_normal(self.answer_of(texts[j])) for j in group]
            votes = Counter(key for key in keys if key is not None)
            if votes:
                # most votes; a tie goes to the answer sampled first (Counter keeps first-seen order)
                winner = max(votes, key=votes.__getitem__)
                majority += values[keys.index(winner)] == 1.0
        return {
            "eval_k": k,
            "eval_pass_at_k": passed / judged if judged else None,
            "eval_maj_at_k": majority / judged if judged else None,
        }


def evaluate(backend, model, tokenizer, held_out, reward_funcs: list, cfg: Any) -> dict:
    """One greedy evaluation of ``held_out`` (the Optuna pruning probe's quick look)."""
    return Evaluator(backend, tokenizer, held_out, reward_funcs, cfg).greedy(model)


def metrics_row(step: int, result: dict, seconds: float) -> dict:
    """The ``metrics.jsonl`` row of one evaluation: ``eval/accuracy``, ``eval/accuracy_lenient``, ``eval/<reward>``."""
    row = {"step": step, "eval/accuracy": result.get("eval_accuracy"),
           "eval/accuracy_lenient": result.get("eval_accuracy_lenient")}
    row.update({f"eval/{name}": value for name, value in (result.get("eval_rewards") or {}).items()})
    row["eval/runtime"] = round(seconds, 3)
    return row


def row_result(row: dict) -> dict:
    """A ``metrics.jsonl`` eval row back in summary.json's key shape."""
    rewards = {k[len("eval/"):]: v for k, v in row.items()
               if k.startswith("eval/") and k not in ("eval/accuracy", "eval/accuracy_lenient", "eval/runtime", "eval/error")}
    return {"eval_accuracy": row.get("eval/accuracy"), "eval_accuracy_lenient": row.get("eval/accuracy_lenient"),
            "eval_rewards": rewards}


class PeriodicEval(TrainerCallback):
    """Greedy held-out evaluation at step 0 and every ``every`` steps; keeps the best step's adapter.

    ``write`` gets each metrics row (metrics.jsonl and the tracker). A periodic evaluation that raises is recorded
    (``eval/error`` row, ``error``) and turns the periodic evaluations off; training goes on.
    """

    def __init__(self, evaluator: Evaluator, run_dir: Path, every: int, metric: str, write: Callable[[dict], None],
                 save: Callable[[Any, Path], None], history: list[dict] | None = None):
        self.evaluator, self.run_dir, self.every, self.metric = evaluator, run_dir, max(0, int(every)), metric
        self.write, self.save = write, save
        self.results: dict[int, dict] = {}
        self.error: str | None = None
        self.seconds = 0.0
        self.best_step: int | None = None
        self.best_value: float | None = None
        self.best_adapter: str | None = None
        for row in history or []:  # a resumed run: evaluations before its checkpoint
            if "eval/accuracy" in row or any(k.startswith("eval/") for k in row):
                self.results[int(row["step"])] = row_result(row)
        self._restore_best()

    # -- best step -------------------------------------------------------------------------------------------
    def _restore_best(self) -> None:
        record = self.run_dir / BEST_DIR / BEST_RECORD
        try:
            best = json.loads(record.read_text())
        except (OSError, ValueError):
            shutil.rmtree(self.run_dir / BEST_DIR, ignore_errors=True)
            return
        if best.get("step") in self.results:  # else it is from steps a resume dropped: gone with them
            self.best_step, self.best_value, self.best_adapter = best["step"], best.get("value"), best.get("adapter")
        else:
            shutil.rmtree(self.run_dir / BEST_DIR, ignore_errors=True)

    def offer(self, step: int, result: dict, model, saved: Path | None = None) -> None:
        """Keep ``model``'s adapter when ``result`` is the best so far (ties go to the later step, which trained
        more for the same score). ``saved``: the adapter is already on disk there (the final one), copy nothing."""
        value = lookup(result, self.metric)
        if value is None or not math.isfinite(value):
            return
        if self.best_value is not None and value < self.best_value:
            return
        target = self.run_dir / BEST_DIR
        shutil.rmtree(target, ignore_errors=True)
        if saved is None:
            saved = self.save(model, target)
            (target / BEST_RECORD).write_text(json.dumps({"step": step, "metric": self.metric, "value": value,
                                                          "adapter": str(Path(saved).relative_to(self.run_dir))}))
        self.best_step, self.best_value = step, value
        self.best_adapter = str(Path(saved).relative_to(self.run_dir))

    # -- evaluations -----------------------------------------------------------------------------------------
    def run(self, step: int, model) -> dict | None:
        if self.error is not None:
            return None
        started = time.perf_counter()
        try:
            result = self.evaluator.greedy(model)
        except Exception as exc:  # noqa: BLE001  (an evaluation must not cost the training run)
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("held-out evaluation at step %d failed, periodic evaluation off: %s", step, self.error)
            self.write({"step": step, "eval/error": self.error[:500]})
            return None
        seconds = time.perf_counter() - started
        self.seconds += seconds
        result.pop("samples", None)
        self.results[step] = result
        self.write(metrics_row(step, result, seconds))
        self.offer(step, result, model)
        return result

    def final(self, step: int, result: dict, seconds: float, model, saved: Path) -> None:
        """The evaluation after training: one more row, and a candidate for best (its adapter is ``saved``)."""
        self.results[step] = {k: result.get(k) for k in ("eval_accuracy", "eval_accuracy_lenient", "eval_rewards")}
        self.write(metrics_row(step, result, seconds))
        self.offer(step, result, model, saved=saved)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0 and 0 not in self.results:
            self.run(0, model)
        return control

    def on_step_end(self, args, state, control, model=None, **kwargs):
        step = state.global_step
        if self.every and step % self.every == 0 and step < state.max_steps and step not in self.results:
            self.run(step, model)
        return control
