"""Evaluation on the validation and test splits: generate for their prompts and score them.

Two splits, two jobs. **Validation** chooses: it is evaluated before training (step 0) and every
``trainer.eval.every_steps`` steps, the best step and its adapter are chosen on it, the Optuna objective and pruning
read it, and a sweep ranks by it. **Test** measures: it is evaluated once, after training, on the weights the run
reports (and on the weights before training, also only after training ends), and feeds back into nothing, so its
figure is not inflated by any choice made on it.

What one greedy evaluation of a split measures (``summary.Scores``; summary.json names them per split):

- ``accuracy``: greedy decoding, scored by ``trainer.eval.accuracy_reward`` (default ``correct``: the answer
  in the asked format). Strict: a right number outside ``<answer>`` earns nothing.
- ``accuracy_lenient``: the same greedy completions, the last number/expression anywhere in the text
  (``rewards.extract_lenient``) compared with the ground truth. Strict vs lenient tells whether a reward taught
  the format, the answer, or both.
- ``rewards``: the split's mean of every reward of the mix.
- pass@k / maj@k (``summary.Sampled``; test only, ``trainer.eval.k`` > 0): ``k`` samples per prompt at
  ``trainer.eval.temperature``; pass@k = share of prompts with at least one sample the accuracy reward scores 1,
  maj@k = share whose most frequent extracted answer is right.

Each evaluation also gives its per-question outcomes (``outcomes/<split>.jsonl``: the sweep pairs runs by question).
``PeriodicEval`` writes a validation row (``summary.val_row``) into ``metrics.jsonl`` (and the tracker) after each
evaluation, keeps the best step's adapter in ``<run_dir>/best/`` and its weights in memory, and gives the run its
``ValReport``.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from transformers import TrainerCallback

from ..backends.decoding import Decoding, evaluation_engine
from ..rewards import build_reward
from ..rewards.answer import equivalent, extract_answer, extract_boxed, extract_lenient
from ..rewards.mix import terms
from .files import write_json_atomic, write_jsonl_atomic
from .record import VAL_ACCURACY, VAL_ROW, Sampled, Scores, TestReport, ValReport, row_scores, val_figures, val_row
from .results import (
    BEST_DIR,
    DECODING,
    OUTCOMES,
    SAMPLES,
    lookup,
    measured_periodically,
    question_key,
    without_best,
    write_outcomes,
)

log = logging.getLogger(__name__)

BEST_RECORD = "best.json"


@dataclass(frozen=True)
class Evaluation:
    """One greedy evaluation: its scores, one outcome row per question (``results.write_outcomes``) and the first
    few completions (``samples.jsonl``)."""

    scores: Scores
    outcomes: list
    samples: list


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
    """The metric the best step is chosen on: the objective without ``best.``, when the validation evaluations
    measure it, else validation accuracy."""
    return without_best(optimized_metric) if measured_periodically(optimized_metric) else VAL_ACCURACY


class Evaluator:
    """Everything one split's evaluations share: its data, the rewards, the scorers, and how it generates: with
    exactly the run's decoding (``backends.decoding``), through ``engine`` (the run's vLLM, ``VLLMEngine``) or the
    backend's own ``generate``."""

    def __init__(
        self,
        backend,
        tokenizer,
        dataset,
        reward_funcs: list,
        cfg: Any,
        run_dir: Path | None = None,
        engine: VLLMEngine | None = None,
    ):
        self.backend, self.tokenizer, self.cfg = backend, tokenizer, cfg
        self.eval_cfg = cfg.trainer.eval
        self.reward_funcs = reward_funcs
        self.accuracy = accuracy_reward(cfg)
        self.answer_of = answer_key(cfg)
        self.prompts = list(dataset["prompt"])
        self.keys = [question_key(prompt) for prompt in self.prompts]
        self.columns = {name: list(dataset[name]) for name in dataset.column_names if name != "prompt"}
        self.truths = self.columns.get("ground_truth")
        self.run_dir = run_dir
        self.engine = engine
        self.decoding = Decoding.from_config(cfg)  # greedy; the samples' is .at(trainer.eval.temperature)

    def decodings(self) -> dict:
        """What the evaluations decode with and where (``outcomes/decoding.json``)."""
        plan = evaluation_engine(self.cfg)
        sampled = self.decoding.at(self.eval_cfg.temperature).record() if self.eval_cfg.k else None
        if sampled is not None and plan.name == "hf":
            sampled["seed"] = None  # HF samples from torch's generator, seeded once by trainer.seed at the run's start
        return {"engine": plan.name, "why": plan.why, "greedy": self.decoding.record(), "sampled": sampled}

    def _generate(self, model, prompts: list, decoding: Decoding) -> list[str]:
        if self.engine is not None:
            return self.engine.generate(self.tokenizer, prompts, decoding)
        prepare = getattr(self.backend, "prepare_generation", None)
        if prepare is not None and self.run_dir is not None:
            prepare(model, self.tokenizer, self.run_dir)  # vLLM serves a saved adapter: save the current one
        return self.backend.generate(model, self.tokenizer, prompts, decoding, batch_size=self.eval_cfg.batch_size)

    def _kwargs(self, prompts: list, texts: list[str], columns: dict) -> dict:
        completions = [[{"role": "assistant", "content": text}] for text in texts]
        completion_ids = [self.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        # what TRL passes a reward besides the columns; outside training there is no trainer state to give
        return dict(
            prompts=prompts,
            completions=completions,
            completion_ids=completion_ids,
            trainer_state=None,
            log_extra=_ignore,
            log_metric=_ignore,
            **columns,
        )

    def lenient(self, texts: list[str], truths: list | None) -> list[float | None]:
        if truths is None:
            return [None] * len(texts)
        return [equivalent(extract_lenient(text), truth) for text, truth in zip(texts, truths)]

    def greedy(self, model, limit: int | None = None) -> Evaluation:
        """Greedy completions for the split's prompts (the first ``limit``), scored every way but sampling."""
        n = len(self.prompts) if limit is None else min(limit, len(self.prompts))
        prompts = self.prompts[:n]
        columns = {k: v[:n] for k, v in self.columns.items()}
        texts = self._generate(model, prompts, self.decoding)
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
        outcomes = [{"key": self.keys[i], "accuracy": accuracy[i], "accuracy_lenient": lenient[i]} for i in range(n)]
        means = Scores(_mean(accuracy), _mean(lenient), {name: _mean(values) for name, values in scores.items()}, n)
        return Evaluation(means, outcomes, samples)

    def sampled(self, model) -> tuple[Sampled, list] | None:
        """pass@k and maj@k from ``k`` samples per prompt at ``trainer.eval.temperature``, and each question's
        ``pass_at_k`` / ``maj_at_k`` outcome (None where the truth is unusable); None for ``k`` = 0."""
        k = int(self.eval_cfg.k or 0)
        if k <= 0:
            return None
        n = len(self.prompts)
        prompts = [p for p in self.prompts for _ in range(k)]
        columns = {name: [v for v in values for _ in range(k)] for name, values in self.columns.items()}
        texts = self._generate(model, prompts, self.decoding.at(self.eval_cfg.temperature))
        scores = self.accuracy(**self._kwargs(prompts, texts, columns))
        passed, majority, judged = 0, 0, 0
        outcomes = []
        for i in range(n):
            group = range(i * k, (i + 1) * k)
            values = [scores[j] for j in group]
            if all(v is None for v in values):
                outcomes.append({"key": self.keys[i], "pass_at_k": None, "maj_at_k": None})
                continue  # the truth is unusable: not counted, like the accuracy reward's None
            judged += 1
            hit = any(v == 1.0 for v in values)
            passed += hit
            keys = [_normal(self.answer_of(texts[j])) for j in group]
            votes = Counter(key for key in keys if key is not None)
            voted = False
            if votes:
                # most votes; a tie goes to the answer sampled first (Counter keeps first-seen order)
                winner = max(votes, key=votes.__getitem__)
                voted = values[keys.index(winner)] == 1.0
                majority += voted
            outcomes.append({"key": self.keys[i], "pass_at_k": float(hit), "maj_at_k": float(voted)})
        return Sampled(k, passed / judged if judged else None, majority / judged if judged else None), outcomes


class VLLMEngine:
    """The run's own vLLM (TRL's, ``trainer.use_vllm``; ``decoding.evaluation_engine`` says when) generating an
    evaluation on the weights the model has at that moment: the GPUs the run already holds, in place of HF
    ``generate`` on rank 0 alone."""

    def __init__(self, handle: Any):
        self.handle = handle

    def generate(self, tokenizer, prompts: list, decoding: Decoding) -> list[str]:
        from ..adapters.trl import vllm_completion_ids
        from ..backends.trl_backend import chat_prompt_ids

        ids = vllm_completion_ids(
            self.handle,
            chat_prompt_ids(tokenizer, prompts),
            decoding.sampling_params(),
            decoding.client_params(),
            None if decoding.greedy else decoding.seed,
        )
        return tokenizer.batch_decode(ids, skip_special_tokens=True)


def run_engine(cfg: Any, trainer: Any) -> VLLMEngine | None:
    """The engine the plan names for this run's evaluations, from its trainer: None where the backend generates."""
    from ..adapters.trl import trainer_vllm

    plan = evaluation_engine(cfg)
    if plan.name != "vllm" or cfg.backend.name != "trl":
        return None  # HF generate, or Unsloth's fast_generate inside its backend
    handle = trainer_vllm(trainer)
    if handle is None:
        raise RuntimeError(f"the plan evaluates with vLLM ({plan.why}) and the trainer has no vLLM engine")
    log.info("evaluations generate through the run's vLLM: %s", plan.why)
    return VLLMEngine(handle)


def evaluate(
    backend, model, tokenizer, validation, reward_funcs: list, cfg: Any, engine: VLLMEngine | None = None
) -> Scores:
    """One greedy evaluation of (part of) the validation split (the Optuna pruning probe's quick look)."""
    return Evaluator(backend, tokenizer, validation, reward_funcs, cfg, engine=engine).greedy(model).scores


def trainable_state(model) -> dict:
    """CPU copies of the weights training changes (the LoRA's, or every weight of a full fine-tune): enough to put
    the model back to an earlier step. A LoRA's are a few MB; a full fine-tune keeps two whole copies in host memory
    (step 0 and the best step), which is the price of testing the weights it reports and those it started from."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters() if p.requires_grad}


def load_trainable(model, state: dict) -> None:
    """Put ``state`` (``trainable_state``) back into ``model``'s weights, in place."""
    import torch

    params = dict(model.named_parameters())
    missing = [name for name in state if name not in params]
    if missing:
        raise KeyError(f"the model has no weight {missing[0]!r} to restore ({len(missing)} missing)")
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value.to(params[name].device))


def saved_trainable(model, saved: Path) -> dict | None:
    """The trainable weights of the LoRA adapter saved in ``saved`` (``backend.save``), as ``trainable_state`` gives
    them; ``model`` keeps its own. None for a full fine-tune (its saved model is not read back here)."""
    if not hasattr(model, "peft_config"):
        return None
    from peft import load_peft_weights, set_peft_model_state_dict

    now = trainable_state(model)
    try:
        set_peft_model_state_dict(model, load_peft_weights(str(saved), device="cpu"))
        return trainable_state(model)
    finally:
        load_trainable(model, now)


class PeriodicEval(TrainerCallback):
    """Greedy validation at step 0 and every ``every`` steps; keeps the best step's adapter (on disk, and its
    weights in memory so the run can report it) and the weights before training (for the test split's "before").

    ``write`` gets each metrics row (metrics.jsonl and the tracker). A periodic evaluation that raises is recorded
    (a ``val/error`` row, ``error``) and turns the periodic evaluations off; training goes on. What the run reports
    of validation is ``report(step)``.
    """

    def __init__(
        self,
        evaluator: Evaluator,
        run_dir: Path,
        every: int,
        metric: str,
        write: Callable[[dict], None],
        save: Callable[[Any, Path], None],
        history: list[dict] | None = None,
        also_at: int | None = None,
    ):
        self.evaluator, self.run_dir, self.every, self.metric = evaluator, run_dir, max(0, int(every)), metric
        self.also_at = also_at  # trainer.pause_at_step: evaluated there, the last step too
        self.write, self.save = write, save
        self.results: dict[int, Scores] = {}
        self.error: str | None = None
        self.seconds = 0.0
        self.best_step: int | None = None
        self.best_value: float | None = None
        self.best_adapter: str | None = None
        self._best_state: dict | None = None  # the best step's trainable weights (None: the final step, or resumed)
        self._initial_state: dict | None = None  # the trainable weights before the first step
        self._outcomes: dict[int, list] = {}  # step -> per-question outcomes of that evaluation
        for row in history or []:  # a resumed run: evaluations before its checkpoint
            scores = row_scores(row)
            if scores is not None:
                self.results[int(row["step"])] = scores
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

    def offer(self, step: int, scores: Scores, model, saved: Path | None = None) -> None:
        """Keep ``model``'s adapter when ``scores`` are the best so far (ties go to the later step, which trained
        more for the same score). ``saved``: the adapter is already on disk there (the final one), copy nothing."""
        value = lookup(val_figures(scores), self.metric)
        if value is None or not math.isfinite(value):
            return
        if self.best_value is not None and value < self.best_value:
            return
        target = self.run_dir / BEST_DIR
        shutil.rmtree(target, ignore_errors=True)
        self._best_state = None
        if saved is None:
            # the weights to report if this stays the best (a test's stand-in model has none)
            self._best_state = trainable_state(model) if hasattr(model, "named_parameters") else None
            saved = self.save(model, target)
            (target / BEST_RECORD).write_text(
                json.dumps(
                    {
                        "step": step,
                        "metric": self.metric,
                        "value": value,
                        "adapter": str(Path(saved).relative_to(self.run_dir)),
                    }
                )
            )
        self.best_step, self.best_value = step, value
        self.best_adapter = str(Path(saved).relative_to(self.run_dir))

    # -- evaluations -----------------------------------------------------------------------------------------
    def _keep(self, step: int, evaluation: Evaluation, seconds: float, model, saved: Path | None = None) -> Scores:
        self.seconds += seconds
        self._outcomes[step] = evaluation.outcomes
        self.results[step] = evaluation.scores
        self.write(val_row(step, evaluation.scores, seconds))
        self.offer(step, evaluation.scores, model, saved=saved)
        return evaluation.scores

    def run(self, step: int, model) -> Scores | None:
        if self.error is not None:
            return None
        started = time.perf_counter()
        try:
            evaluation = self.evaluator.greedy(model)
        except Exception as exc:  # noqa: BLE001  (an evaluation must not cost the training run)
            self.error = f"{type(exc).__name__}: {exc}"
            log.error("validation at step %d failed, periodic evaluation off: %s", step, self.error)
            self.write({"step": step, VAL_ROW["error"]: self.error[:500]})
            return None
        return self._keep(step, evaluation, time.perf_counter() - started, model)

    def final(self, step: int, model, saved: Path) -> Scores | None:
        """Validation after training (unless an evaluation at this step exists): one more row, and a candidate
        for best (its adapter is ``saved``). Returns that evaluation."""
        if step in self.results:
            return self.results[step]
        if self.error is not None:
            return None
        started = time.perf_counter()
        evaluation = self.evaluator.greedy(model)  # a failure here is the run's evaluation failure: raised
        return self._keep(step, evaluation, time.perf_counter() - started, model, saved=saved)

    def latest(self) -> Scores | None:
        """The most recent validation (the progress bar shows it)."""
        return self.results[max(self.results)] if self.results else None

    def reported_step(self, final_step: int, report: str, model=None) -> int:
        """The step whose weights the run reports: the best validation step (``report=best``), or the last. A best
        step of an earlier attempt (a resume after it, each phase of trainer.phases) is read back from its adapter
        on disk into ``model``'s form; one that cannot be (a full fine-tune's) cannot be reported: the last is."""
        if report != "best" or self.best_step is None or self.best_step == final_step:
            return final_step
        if self._best_state is None and model is not None and self.best_adapter:
            try:
                self._best_state = saved_trainable(model, self.run_dir / self.best_adapter)
            except Exception as exc:  # noqa: BLE001 - an unreadable adapter: the last step is reported, and said so
                log.warning("the best step's adapter %s cannot be read back: %s", self.best_adapter, exc)
        if self._best_state is None:
            log.warning(
                "the best validation step %d's weights are not in memory after a resume: reporting step %d",
                self.best_step,
                final_step,
            )
            return final_step
        return self.best_step

    def weights(self, step: int) -> dict | None:
        """The trainable weights of ``step`` (``trainable_state``) when they are in memory: before training (0),
        the best step's; else None."""
        if step == 0:
            return self._initial_state
        return self._best_state if step == self.best_step else None

    def report(self, reported_step: int) -> ValReport:
        """What the run reports of validation, reporting ``reported_step``'s weights."""
        return ValReport(
            reported=self.results.get(reported_step),
            before=self.results.get(0),
            steps=sorted(self.results),
            reported_step=reported_step,
            metric=self.metric,
            best_step=self.best_step,
            best_value=self.best_value,
            best_adapter=self.best_adapter,
            best=self.results.get(self.best_step) if self.best_step is not None else None,
            error=self.error,
            outcomes=self._outcomes.get(reported_step),
            outcomes_before=self._outcomes.get(0),
        )

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if state.global_step == 0:
            self._initial_state = trainable_state(model)
            if 0 not in self.results:
                self.run(0, model)
        return control

    def on_step_end(self, args, state, control, model=None, **kwargs):
        step = state.global_step
        due = (self.every and step % self.every == 0 and step < state.max_steps) or step == self.also_at
        if due and step not in self.results:
            self.run(step, model)
        return control


def write_val_outcomes(run_dir: Path, val: ValReport) -> None:
    """outcomes/val.jsonl (the reported step's per-question outcomes) and val_before.jsonl, where in memory."""
    if val.outcomes is not None:
        write_outcomes(run_dir, "val", val.outcomes)
    if val.outcomes_before is not None:
        write_outcomes(run_dir, "val_before", val.outcomes_before)


def final_evaluations(
    cfg: Any, run_dir: Path, model, periodic: PeriodicEval, tester: Evaluator, step: int, adapter: Path
) -> tuple[ValReport, TestReport, Path]:
    """After training: validation at the last step, then the weights the run reports (``trainer.eval.report``:
    the best validation step's, or the last), then the test split, once, on those weights and on the weights
    before training. Nothing here feeds back into a choice. Writes samples.jsonl, outcomes/ and a ``test/`` row
    in metrics.jsonl; returns the validation and test reports and the reported adapter's directory."""
    periodic.final(step, model, saved=adapter)
    reported = periodic.reported_step(step, cfg.trainer.eval.report, model)
    reported_adapter = adapter
    if reported != step:
        load_trainable(model, periodic.weights(reported))
        reported_adapter = run_dir / periodic.best_adapter
    val = periodic.report(reported)
    write_json_atomic(run_dir / OUTCOMES / DECODING, tester.decodings())
    write_val_outcomes(run_dir, val)
    mark = time.perf_counter()
    scores, sampled = evaluate_test(run_dir, model, tester)
    seconds = time.perf_counter() - mark
    test = TestReport(scores, sampled, evaluate_test_before(run_dir, model, tester, periodic.weights(0)))
    periodic.write(metrics_test_row(step, test, seconds))
    return val, test, reported_adapter


def evaluate_test(run_dir: Path, model, tester: Evaluator) -> tuple[Scores, Sampled | None]:
    """The test split on ``model``: greedy, and sampled for pass@k / maj@k; writes samples.jsonl and its outcomes."""
    greedy = tester.greedy(model)
    outcomes = {row["key"]: row for row in greedy.outcomes}
    sampled = tester.sampled(model)
    if sampled is not None:
        for row in sampled[1]:
            outcomes[row["key"]].update(row)
    write_jsonl_atomic(run_dir / SAMPLES, greedy.samples)
    write_outcomes(run_dir, "test", outcomes.values())
    return greedy.scores, sampled[0] if sampled is not None else None


def evaluate_test_before(run_dir: Path, model, tester: Evaluator, initial: dict | None) -> Scores | None:
    """The test split, greedy, on the weights before training (``initial``, or a LoRA's zero start); None where
    they are not known. ``model`` keeps its own weights."""
    before_state = initial if initial is not None else lora_zero_state(model)
    if before_state is None:
        log.warning(
            "no weights from before training to test (a resumed full fine-tune): test_accuracy_before is not measured"
        )
        return None
    now = trainable_state(model)
    load_trainable(model, before_state)
    try:
        evaluation = tester.greedy(model)
    finally:
        load_trainable(model, now)
    write_outcomes(run_dir, "test_before", evaluation.outcomes)
    return evaluation.scores


def metrics_test_row(step: int, test: TestReport, seconds: float) -> dict:
    """The ``test/`` row of metrics.jsonl."""
    sampled = test.sampled
    return {
        "step": step,
        "test/accuracy": test.reported.accuracy,
        "test/accuracy_lenient": test.reported.accuracy_lenient,
        "test/accuracy_before": test.before.accuracy if test.before else None,
        "test/pass_at_k": sampled.pass_at_k if sampled else None,
        "test/maj_at_k": sampled.maj_at_k if sampled else None,
        "test/runtime": round(seconds, 3),
    }


def lora_zero_state(model) -> dict | None:
    """A LoRA's trainable weights with every ``lora_B`` zero: the model as it was before training (PEFT starts B at
    zero), for a resumed run whose start is no longer in memory. None for a full fine-tune."""
    if not hasattr(model, "peft_config"):
        return None
    state = trainable_state(model)
    return {name: (value.zero_() if "lora_B" in name else value) for name, value in state.items()}
