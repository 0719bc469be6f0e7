"""LLM-as-a-judge rewards: a judge model behind an OpenAI-compatible chat endpoint (vLLM's server, a gateway, a
hosted API) scores each completion.

A term names the factory and its settings (docs/rewards.md "LLM judges"):

    +reward_mix.judge.factory=grpo_sweep.rewards.judge.llm_judge
    +reward_mix.judge.factory_args.base_url=http://localhost:8000/v1 +reward_mix.judge.factory_args.model=<model>

``llm_judge`` checks the settings and returns the reward; it neither imports the client nor opens a connection,
because the launching machine calls it to validate the mix. The reward starts its client on its first call, on
an event loop of its own in a daemon thread: TRL calls rewards synchronously, and one long-lived loop keeps the
client's connections open from step to step (a loop per call would have to rebuild the client each step, and
``asyncio.run`` cannot run where the caller already runs a loop).

Per call: every prompt is rendered, looked up in the cache (keyed by judge model and rendered prompt; identical
prompts within the batch make one request), and the rest are sent at most ``max_concurrency`` at a time; each
attempt ends ``timeout`` seconds after it was sent however slowly its bytes trickle in, and a reply past
``max_reply_bytes`` is abandoned unread; the client retries 429s, 5xx and timeouts ``max_retries`` times with
backoff (honouring Retry-After), and whatever is not answered ``deadline`` seconds after the call began is
cancelled. An endpoint that took no connection of a call (refused, or not answered within ``timeout``) is asked
once (no retries) at the next call before anything else is sent: a judge that is down costs one connection a call,
not every sample's retries. A sample the
judge could not score (timeout, error, a reply with no score or a score outside ``score_range``) gets the guard's
``FAILED``: ``None`` to TRL, and counted in the run's ``reward_failures``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import logging
import math
import os
import re
import string
import threading
import time
import urllib.parse
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..adapters.httpx import bound_reply
from . import RewardError
from ._text import completion_text
from .args import flag, non_negative, seconds, whole_number
from .guard import FAILED

log = logging.getLogger(__name__)

# The number a judge states last, not the denominator of "7/10" or "7 / 10".
NUMBER = r"(?<![/\d.])(?<!/ )[-+]?\d+(?:\.\d+)?"
# One line of a group reply: "3: 7", "Answer 3: 7", "**3** = 7.5"
GROUP_LINE = r"(?im)^\W*(?:answer\s*)?(\d+)\W*?[:=]\s*\**\s*([-+]?\d+(?:\.\d+)?)"

DEFAULT_TEMPLATE = (
    "You are grading an answer to a question.\n\nQuestion:\n{question}\n\nAnswer:\n{completion}\n\n"
    "How good is the answer, from 0 (wrong or useless) to 10 (correct and clear)? "
    "End your reply with the score, a number from 0 to 10."
)
DEFAULT_GROUP_TEMPLATE = (
    "You are comparing {n} answers to one question.\n\nQuestion:\n{question}\n\n{completions}\n\n"
    "Score each answer from 0 (wrong or useless) to 10 (correct and clear), judging them against each other. "
    "Reply with one line per answer, in order, as `<answer number>: <score>`."
)
PLACEHOLDERS = ("question", "completion", "ground_truth")
GROUP_PLACEHOLDERS = ("question", "completions", "n", "ground_truth")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a score reply is a few hundred bytes of JSON; a reasoning judge's, at a few thousand tokens, some ten KiB
MAX_REPLY_BYTES = 1 << 20


@dataclass(frozen=True)
class JudgeSettings:
    base_url: str
    model: str
    key_env: str | None
    template: str
    low: float
    high: float
    score_regex: str | None
    group: bool
    max_concurrency: int
    timeout: float
    max_retries: int
    deadline: float
    temperature: float
    max_tokens: int
    max_reply_bytes: int
    cache: bool
    name: str

    @property
    def uses_truth(self) -> bool:
        return "ground_truth" in _fields(self.template)


def llm_judge(
    base_url: str,
    model: str,
    key_env: str | None = None,
    template: str | None = None,
    score_range: Sequence[float] = (0, 10),
    score_regex: str | None = None,
    group: bool = False,
    max_concurrency: int = 16,
    timeout: float = 30.0,
    max_retries: int = 3,
    deadline: float = 120.0,
    temperature: float = 0.0,
    max_tokens: int = 256,
    max_reply_bytes: int = MAX_REPLY_BYTES,
    cache: bool = True,
    term_name: str = "judge",
) -> LLMJudge:
    """A reward scoring each completion with a judge model at ``base_url`` (an OpenAI-compatible API).

    ``key_env`` names the environment variable that holds the API key (the key itself never goes in config, and
    an option named ``api_key…`` would be refused there as a credential); name it ``…_KEY`` or ``…_TOKEN`` and the
    run's redactor masks its value wherever it turns up. Without it the key sent is ``EMPTY`` (vLLM's server without
    ``--api-key``) and ``OPENAI_API_KEY`` is never sent to a server it was not meant for. ``template`` uses
    ``{question}`` (the prompt's last user message),
    ``{completion}`` and ``{ground_truth}``; with ``group=True`` (RULER-style: the completions of one prompt scored
    together in one request) ``{completions}`` (numbered ``Answer 1:`` …) and ``{n}`` instead of ``{completion}``.
    The score is the last number of the reply (or the last match of ``score_regex``: its first group if it has
    one; in group mode two groups, answer number and score), mapped from ``score_range`` to [0, 1]; a score
    outside the range is no score.
    ``deadline`` bounds one reward call (seconds); ``timeout`` one HTTP attempt, retried ``max_retries`` times;
    ``max_reply_bytes`` one reply.
    ``term_name`` is bound by the mix to the term's name: the metrics are ``judge/<term>/...``."""
    if importlib.util.find_spec("openai") is None:
        raise RewardError('the LLM judge needs the openai package: pip install -e ".[judge]" (or pip install openai)')
    low, high = _range(score_range)
    settings = JudgeSettings(
        base_url=_url(base_url),
        model=_text_arg("model", model),
        key_env=_env_name(key_env),
        template=_template(template, group),
        low=low,
        high=high,
        score_regex=_regex(score_regex, group),
        group=flag("factory_args.group", group),
        max_concurrency=whole_number("factory_args.max_concurrency", max_concurrency, 1),
        timeout=seconds("factory_args.timeout", timeout),
        max_retries=whole_number("factory_args.max_retries", max_retries, 0),
        deadline=seconds("factory_args.deadline", deadline),
        temperature=non_negative("factory_args.temperature", temperature),
        max_tokens=whole_number("factory_args.max_tokens", max_tokens, 1),
        max_reply_bytes=whole_number("factory_args.max_reply_bytes", max_reply_bytes, 1024),
        cache=flag("factory_args.cache", cache),
        name=str(term_name),
    )
    return LLMJudge(settings)


# ---- settings, checked on the launching machine: one line naming the bad value --------------------------------


def _url(value: Any) -> str:
    example = "give the endpoint's URL, e.g. http://localhost:8000/v1"
    try:
        parts = urllib.parse.urlsplit(value) if isinstance(value, str) else None
    except ValueError:  # "http://[::1"
        parts = None
    # a password in the URL is not printed in the refusal
    shown = value.replace(f":{parts.password}@", ":***@", 1) if parts is not None and parts.password else value
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or re.search(r"\s", value):
        raise RewardError(f"factory_args.base_url={shown!r}: {example}")
    try:
        port = parts.port
    except ValueError:  # past 65535, or not a number
        port = 0
    if port == 0:
        raise RewardError(f"factory_args.base_url={shown!r}: the port must be a number from 1 to 65535")
    return value


def _text_arg(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RewardError(f"factory_args.{name}={value!r}: give the judge model's name as the server knows it")
    return value


def _env_name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not ENV_NAME.fullmatch(value):
        raise RewardError(
            "factory_args.key_env must be the NAME of an environment variable that holds the API key "
            "(letters, digits, _; the value given looks like a key itself; it is not shown)"
        )
    if not os.environ.get(value):
        raise RewardError(
            f"factory_args.key_env={value}: environment variable {value} is not set (export it "
            "where the run trains; the key never goes in config)"
        )
    return value


def _fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


def _template(value: Any, group: bool) -> str:
    if value is None:
        return DEFAULT_GROUP_TEMPLATE if group else DEFAULT_TEMPLATE
    if not isinstance(value, str) or not value.strip():
        raise RewardError(
            f"factory_args.template={value!r}: give the prompt's text with {{question}} and {{completion}} in it"
        )
    allowed = GROUP_PLACEHOLDERS if group else PLACEHOLDERS
    shown = ", ".join("{" + p + "}" for p in allowed)
    try:
        fields = _fields(value)
    except ValueError as exc:
        raise RewardError(f"factory_args.template: {exc} (write a literal brace as {{{{ or }}}})") from None
    for name in fields:
        if name not in allowed:
            raise RewardError(
                f"factory_args.template has unknown placeholder {{{name}}}; it may use {shown}"
                + (" (group=true)" if group else "")
                + " (a literal brace is written {{ or }})"
            )
    needed = "completions" if group else "completion"
    if needed not in fields:
        raise RewardError(f"factory_args.template has no {{{needed}}}: the judge would never see what it scores")
    return value


def _regex(value: Any, group: bool) -> str | None:
    if value is None:
        return None
    try:
        pattern = re.compile(value)
    except (re.error, TypeError) as exc:
        raise RewardError(f"factory_args.score_regex={value!r} is not a regular expression ({exc})") from None
    if group and pattern.groups < 2:
        raise RewardError(
            f"factory_args.score_regex={value!r}: with group=true it needs two groups, the answer's "
            r"number and its score, e.g. '(\d+): (\d+)'"
        )
    return value


def _range(value: Any) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise RewardError(
            f"factory_args.score_range={_as_list(value)!r}: give [lowest, highest], e.g. [0, 10]"
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise RewardError(f"factory_args.score_range={_as_list(value)!r}: the lowest score must be below the highest")
    return low, high


def _as_list(value: Any) -> Any:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value


# ---- the reward ---------------------------------------------------------------------------------------------


@dataclass
class _Reply:
    text: str
    latency: float
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class _Failure:
    kind: str  # "timeout", "http 429", "unreachable", "too large", "error"


class ReplyTooLarge(Exception):
    """A reply longer than ``max_reply_bytes``: abandoned where it passed the cap, never parsed nor cached."""


@dataclass
class CallStats:
    """What one call cost; ``totals`` on the reward sums them over the run."""

    lookups: int = 0
    cache_hits: int = 0
    requests: int = 0
    retries: int = 0  # attempts beyond each request's first
    failures: int = 0  # samples the judge could not score (FAILED: None to TRL, counted by the guard)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)  # kind -> samples
    first_error: str = ""  # the first failed request's error, for the log

    def add(self, other: CallStats) -> None:
        for name in ("lookups", "cache_hits", "requests", "retries", "failures", "prompt_tokens", "completion_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.latencies += other.latencies
        for kind, count in other.errors.items():
            self.failed(kind, count)

    def failed(self, kind: str, samples: int) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + samples


class LLMJudge:
    """The reward ``llm_judge`` returns: call it as TRL does; ``totals`` holds what it cost over the run."""

    def __init__(self, settings: JudgeSettings):
        self.settings = settings
        self.__name__ = self.__qualname__ = settings.name
        self.totals = CallStats()
        self._replies: dict[tuple[str, str], str] = {}  # (judge model, rendered prompt) -> reply
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client = None
        self._semaphore: asyncio.Semaphore | None = None
        self._sent: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # HTTP request -> loop time sent
        self._attempts = self._first_attempts = 0  # over the run, counted on the judge's loop
        self._down = ""  # why the endpoint took no connection of the last call; "" while it answers
        self._pattern = re.compile(settings.score_regex or (GROUP_LINE if settings.group else NUMBER))
        # the columns it reads are read off its signature (the mix checks the data has them)
        params = [
            inspect.Parameter("completions", inspect.Parameter.KEYWORD_ONLY),
            inspect.Parameter("prompts", inspect.Parameter.KEYWORD_ONLY, default=None),
        ]
        if settings.uses_truth:
            params.append(inspect.Parameter("ground_truth", inspect.Parameter.KEYWORD_ONLY))
        params += [
            inspect.Parameter("log_metric", inspect.Parameter.KEYWORD_ONLY, default=None),
            inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD),
        ]
        self.__signature__ = inspect.Signature(params)

    def __repr__(self) -> str:
        return f"<LLM judge {self.settings.model} at {self.settings.base_url}>"

    def __call__(self, completions, prompts=None, ground_truth=None, log_metric=None, **kwargs) -> list:
        """A score in [0, 1] per completion, or ``FAILED`` where the judge gave none."""
        n = len(completions)
        texts = [completion_text(c) for c in completions]
        questions = [_question(p) for p in prompts] if prompts is not None else [""] * n
        truths = [("" if t is None else str(t)) for t in ground_truth] if ground_truth is not None else [""] * n
        units = self._units(questions, texts, truths)
        replies, stats = self._run(self._ask([prompt for prompt, _ in units]))
        scores: list = [FAILED] * n
        for (_prompt, members), reply in zip(units, replies):
            values = None if isinstance(reply, _Failure) else self._parse(reply, len(members))
            if values is None:
                stats.failed(reply.kind if isinstance(reply, _Failure) else "unparseable", len(members))
                continue
            for i, value in zip(members, values):
                if value is None:
                    stats.failed("out of score_range", 1)
                else:
                    scores[i] = value
        stats.failures = sum(score is FAILED for score in scores)
        with self._lock:
            self.totals.add(stats)
        self._report(stats, n, log_metric)
        return scores

    # -- what is asked

    def _units(self, questions: list[str], texts: list[str], truths: list[str]) -> list[tuple[str, list[int]]]:
        """(rendered prompt, the samples it scores): one per sample, or one per run of samples that share a
        prompt and truth (TRL passes a prompt's completions one after another) in group mode."""
        fill = self.settings.template.format
        if not self.settings.group:
            return [
                (fill(question=q, completion=c, ground_truth=t), [i])
                for i, (q, c, t) in enumerate(zip(questions, texts, truths))
            ]
        runs: list[list[int]] = []
        for i in range(len(texts)):
            if runs and (questions[i], truths[i]) == (questions[runs[-1][0]], truths[runs[-1][0]]):
                runs[-1].append(i)
            else:
                runs.append([i])
        return [
            (
                fill(
                    question=questions[run[0]],
                    ground_truth=truths[run[0]],
                    n=len(run),
                    completions="\n\n".join(f"Answer {k}:\n{texts[i]}" for k, i in enumerate(run, 1)),
                ),
                run,
            )
            for run in runs
        ]

    def _parse(self, reply: str, size: int) -> list[float | None] | None:
        """Each member's score in [0, 1] (None: outside ``score_range``), or None for a reply without them all."""
        if not self.settings.group:
            matches = list(self._pattern.finditer(reply))
            if not matches:
                return None
            last = matches[-1]
            value = _float(last.group(1) if self._pattern.groups else last.group(0))
            return None if value is None else [self._normalise(value)]
        by_answer = {}
        for match in self._pattern.finditer(reply):
            index, value = _float(match.group(1)), _float(match.group(2))
            if index is not None and value is not None:
                by_answer[int(index)] = value
        if not all(k in by_answer for k in range(1, size + 1)):
            return None
        return [self._normalise(by_answer[k]) for k in range(1, size + 1)]

    def _normalise(self, value: float) -> float | None:
        """``value`` mapped from ``score_range`` to [0, 1]; outside the range it is no score (a judge that says
        1000000 on a 0-10 scale has not given the best one)."""
        low, high = self.settings.low, self.settings.high
        return (value - low) / (high - low) if low <= value <= high else None

    # -- asking: on the judge's own loop

    def _run(self, coroutine) -> Any:
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name=f"judge-{self.settings.name}", daemon=True).start()
        # the coroutine keeps the deadline itself; the margin only guards against a request that ignores cancelling
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=self.settings.deadline + 30)

    def _open(self):
        if self._client is None:
            from openai import AsyncOpenAI, DefaultAsyncHttpxClient

            s = self.settings
            key = os.environ.get(s.key_env, "") if s.key_env else "EMPTY"
            http = DefaultAsyncHttpxClient(
                # identity: the size cap then counts the reply's own bytes, not a compressed form of them
                headers={"Accept-Encoding": "identity"},
                event_hooks={"request": [self._on_attempt], "response": [self._bound_reply]},
            )
            # given explicitly: the client would otherwise send OPENAI_API_KEY to whatever base_url says
            self._client = AsyncOpenAI(
                base_url=s.base_url,
                api_key=key or "EMPTY",
                timeout=s.timeout,
                max_retries=s.max_retries,
                http_client=http,
            )
            self._semaphore = asyncio.Semaphore(s.max_concurrency)
            _quiet_client_logs(s.base_url)
        return self._client

    async def _on_attempt(self, request) -> None:
        self._attempts += 1
        self._sent[request] = asyncio.get_running_loop().time()

    async def _bound_reply(self, response) -> None:
        """The attempt's body is read against its wall clock (the HTTP library's timeout is per read: a byte now
        and then resets it) and the size cap."""
        now = asyncio.get_running_loop().time()
        ends = self._sent.get(response.request, now) + self.settings.timeout
        bound_reply(response, ends, self.settings.max_reply_bytes, ReplyTooLarge)

    async def _ask(self, prompts: list[str]) -> tuple[list[str | _Failure], CallStats]:
        """The reply to each prompt, or why there is none."""
        stats = CallStats(lookups=len(prompts))
        client = self._open()
        model = self.settings.model
        loop = asyncio.get_running_loop()
        ends = loop.time() + self.settings.deadline
        wanted: dict[str, None] = {}
        for prompt in prompts:
            if (model, prompt) in self._replies or prompt in wanted:
                stats.cache_hits += 1
            else:
                wanted[prompt] = None
        attempts, first_attempts = self._attempts, self._first_attempts
        tasks: dict[str, asyncio.Task] = {}
        if wanted and self._down:  # it took no connection last time: one try, without retries, first
            probe = next(iter(wanted))
            tasks[probe] = asyncio.ensure_future(self._request(client.with_options(max_retries=0), probe))
            await asyncio.wait(tasks.values(), timeout=ends - loop.time())
            if _failed_as(tasks[probe]) == "unreachable":
                wanted = {probe: None}
        for prompt in wanted:
            if prompt not in tasks:
                tasks[prompt] = asyncio.ensure_future(self._request(client, prompt))
        stats.requests = len(tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks.values(), timeout=max(0.0, ends - loop.time()))
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        stats.retries = max(0, (self._attempts - attempts) - (self._first_attempts - first_attempts))
        for prompt, task in tasks.items():
            if task.cancelled():
                continue
            outcome = task.exception() or task.result()
            if isinstance(outcome, _Reply):
                stats.latencies.append(outcome.latency)
                stats.prompt_tokens += outcome.prompt_tokens
                stats.completion_tokens += outcome.completion_tokens
                if self.settings.cache:
                    self._replies[(model, prompt)] = outcome.text
            elif not stats.first_error:
                stats.first_error = self._redacted(_described(outcome))
        self._note_reachability(tasks, stats.first_error)
        replies: list[str | _Failure] = []
        for prompt in prompts:
            if (model, prompt) in self._replies:
                replies.append(self._replies[(model, prompt)])
                continue
            task = tasks.get(prompt)
            if task is None:  # not sent: the endpoint took no connection at the call's first try
                replies.append(_Failure("unreachable"))
            elif task.cancelled():
                replies.append(_Failure("timeout"))
            elif task.exception() is not None:
                replies.append(_Failure(_kind(task.exception())))
            else:
                replies.append(task.result().text)
        return replies, stats

    def _note_reachability(self, tasks: dict[str, asyncio.Task], error: str) -> None:
        """Whether the endpoint took no connection this call (then the next call tries one request first)."""
        ended = [task for task in tasks.values() if not task.cancelled()]
        if not ended:
            return
        if all(_failed_as(task) == "unreachable" for task in ended):
            if not self._down:
                log.warning(
                    "judge %r: %s took no connection (%s); each later call tries one request, "
                    "without retries, before sending the rest",
                    self.settings.name,
                    self.settings.base_url,
                    error,
                )
            self._down = error
        elif self._down:
            log.warning("judge %r: %s answers again", self.settings.name, self.settings.base_url)
            self._down = ""

    async def _request(self, client, prompt: str) -> _Reply:
        async with self._semaphore:
            started = time.perf_counter()
            self._first_attempts += 1
            response = await client.chat.completions.create(
                model=self.settings.model,
                messages=[{"role": "user", "content": prompt}],
                temperature=self.settings.temperature,
                max_tokens=self.settings.max_tokens,
            )
            latency = time.perf_counter() - started
        choices = getattr(response, "choices", None)
        if not choices:
            raise ValueError("the reply has no choices")
        usage = getattr(response, "usage", None)
        return _Reply(
            choices[0].message.content or "",
            latency,
            getattr(usage, "prompt_tokens", 0) or 0,
            getattr(usage, "completion_tokens", 0) or 0,
        )

    def _redacted(self, text: str) -> str:
        key = os.environ.get(self.settings.key_env or "", "")
        return text.replace(key, "***") if len(key) >= 4 else text

    # -- what it cost

    def _report(self, stats: CallStats, n: int, log_metric: Callable | None) -> None:
        if stats.failures:
            kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(stats.errors.items()))
            log.warning(
                "judge %r could not score %d of %d samples (%s): scored None%s%s",
                self.settings.name,
                stats.failures,
                n,
                kinds,
                f", {stats.retries} retries" if stats.retries else "",
                f"; first error: {stats.first_error}" if stats.first_error else "",
            )
        if not callable(log_metric):
            return
        prefix = f"judge/{self.settings.name}/"
        metrics = {
            "requests": stats.requests,
            "retries": stats.retries,
            "failures": stats.failures,
            "cache_hit_rate": stats.cache_hits / stats.lookups if stats.lookups else 0.0,
            "prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.completion_tokens,
        }
        if stats.latencies:  # none when every prompt was a cache hit: no latency to average in
            metrics["latency_s"] = sum(stats.latencies) / len(stats.latencies)
            metrics["latency_max_s"] = max(stats.latencies)
        for name, value in metrics.items():
            log_metric(prefix + name, float(value))


class _OwnRequests(logging.Filter):
    """Leaves out the HTTP library's line per request (``HTTP Request: POST <url> ...``) to one endpoint."""

    def __init__(self, base_url: str):
        super().__init__()
        self.base_url = base_url.rstrip("/")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not any(str(arg).startswith(self.base_url) for arg in args)


def _quiet_client_logs(base_url: str) -> None:
    """The judge counts its retries and logs one line a call on what failed; the client's own INFO lines, one per
    retry and one per request, would say the same thousands of times in the run's log."""
    logging.getLogger("openai").setLevel(logging.WARNING)
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).addFilter(_OwnRequests(base_url))


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    while exc is not None and exc not in chain:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _kind(exc: BaseException) -> str:
    chain = _causes(exc)
    names = [type(e).__name__ for e in chain]
    if any(isinstance(e, ReplyTooLarge) for e in chain):
        return "too large"
    if "ConnectError" in names or "ConnectTimeout" in names:  # refused, no route, or the SYN dropped
        return "unreachable"
    if any("Timeout" in name for name in names):
        return "timeout"
    status = getattr(exc, "status_code", None)
    return f"http {status}" if status else "error"


def _failed_as(task: asyncio.Task) -> str | None:
    """The kind of failure a finished request ended in; None while it runs, if it was cancelled or answered."""
    if not task.done() or task.cancelled() or task.exception() is None:
        return None
    return _kind(task.exception())


def _described(exc: BaseException) -> str:
    """``Type: first line``, and what caused it where the client's own error says only "Connection error."."""
    text = f"{type(exc).__name__}: {_first_line(exc)}"
    cause = exc.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f" ({type(cause).__name__}: {_first_line(cause)})"
    return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # an HTTP error's str is only its status ("Error code: 400"); what the server said is in its body
    body = getattr(exc, "body", None)
    if body:
        detail = body.get("detail") or body.get("error") or body.get("message") if isinstance(body, dict) else body
        if isinstance(detail, dict):  # OpenAI's own shape: {"error": {"message": ...}}
            detail = detail.get("message", detail)
        if str(detail) not in text:  # the client puts an OpenAI-shaped error's message in its text already
            text = f"{text}: {detail}"
    lines = text.splitlines()
    return lines[0][:300] if lines else ""


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _question(prompt: Any) -> str:
    """The question a prompt asks: its last user message (a chat prompt's system message is the task's
    instructions, not the question), or the prompt itself."""
    if isinstance(prompt, (list, tuple)):
        for message in reversed(prompt):
            if isinstance(message, dict) and message.get("role") == "user":
                return completion_text(message)
        return completion_text(prompt)
    return completion_text(prompt)
