"""LLM-as-a-judge reward terms (rewards/judge.py) against real OpenAI-compatible servers on loopback: transformers'
server with the tiny model, aiohttp endpoints that score, hang, return garbage, rate-limit, reply with megabytes or
trickle a byte at a time, and a port nothing listens on."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import socket
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("openai", reason="the judge's client: pip install -e '.[dev]'")

from grpo_sweep.rewards import RewardError  # noqa: E402
from grpo_sweep.rewards import judge as judge_module  # noqa: E402
from grpo_sweep.rewards.guard import guarded  # noqa: E402
from grpo_sweep.rewards.judge import llm_judge  # noqa: E402
from grpo_sweep.rewards.mix import build_mix, check_mix, data_columns  # noqa: E402
from grpo_sweep.run.files import read_jsonl as read_json_lines  # noqa: E402

from .conftest import FAST, ROOT, launch_here, run_launch  # noqa: E402
from .support.judge_servers import (  # noqa: E402
    TINY_MODEL,
    JudgeServer,
    chat_reply,
    free_port,
    hang,
    huge,
    rate_limited,
    scored,
    tiny_model_server,
    trickle,
)

FACTORY = "grpo_sweep.rewards.judge.llm_judge"
KEY_ENV = "GRPO_SWEEP_TEST_JUDGE_KEY"


def chat(question: str) -> list[dict]:
    return [{"role": "system", "content": "Answer in <answer> tags."}, {"role": "user", "content": question}]


def ask(judge, texts: list[str], questions: list[str] | None = None, metrics: dict | None = None, **columns):
    """Call the reward as TRL does: conversational prompts and completions, log_metric collecting into metrics."""
    questions = questions or [f"What is {i} + 1?" for i in range(len(texts))]
    log = (lambda name, value: metrics.setdefault(name, []).append(value)) if metrics is not None else None
    judge = judge if hasattr(judge, "failures") else guarded(judge, "j")  # as the mix builds it: FAILED -> None
    return judge(
        prompts=[chat(q) for q in questions],
        completions=[[{"role": "assistant", "content": t}] for t in texts],
        completion_ids=[[1]] * len(texts),
        trainer_state=None,
        log_metric=log,
        **columns,
    )


def make(server, **args):
    return llm_judge(base_url=server.base_url, model="judge-model", term_name="j", **args)


def completion_of(prompt: str) -> str:
    return prompt.split("Answer:\n", 1)[1].split("\n\nHow good", 1)[0]


# ---- scoring, the cache, concurrency, the key ------------------------------------------------------------------


def test_the_score_is_the_last_number_of_the_reply_mapped_from_the_score_range_to_0_1():
    replies = {
        "good": "Clear and right: 8/10",
        "bad": "Score: 2",
        "top": "7 steps... final score 10",
        "zero": "0",
        "none": "I cannot tell.",
    }
    with JudgeServer(scored(lambda prompt: replies[completion_of(prompt)])) as server:
        scores = ask(make(server), list(replies))
    assert scores == [0.8, 0.2, 1.0, 0.0, None]  # a reply with no number: None


def test_a_score_outside_the_score_range_is_a_failure_not_full_reward(caplog):
    replies = {"huge": "Score: 1000000", "over": "10.5", "neg": "-3", "ok": "Score: 5"}
    with JudgeServer(scored(lambda prompt: replies[completion_of(prompt)])) as server:
        fn, metrics = guarded(make(server), "j"), {}
        assert ask(fn, list(replies), metrics=metrics) == [None, None, None, 0.5]
    assert fn.failures == 3 and fn.samples == 4  # counted in reward_failures, reward_errors=raise as it is
    assert metrics["reward_failures/j"] == [3.0] and metrics["judge/j/failures"] == [3.0]
    assert "could not score 3 of 4 samples (3 out of score_range)" in caplog.text


def test_a_score_regex_picks_the_score_and_a_score_range_scales_it():
    with JudgeServer(scored(lambda prompt: "Rating: 4 (of 5). Reviewed 3 times.")) as server:
        assert ask(make(server, score_regex=r"Rating: (\d+)", score_range=[1, 5]), ["x"]) == [0.75]


def test_metrics_each_call_latency_tokens_cache_hits_failures():
    async def slow(server, number, prompt):
        await asyncio.sleep(0.05)
        return chat_reply("no score" if "bad" in prompt else "Score: 6", prompt)

    with JudgeServer(slow) as server:
        judge, metrics = make(server), {}
        ask(judge, ["a", "a", "b", "bad"], ["q"] * 4, metrics)
        ask(judge, ["a", "c"], ["q"] * 2, metrics)
    assert metrics["judge/j/requests"] == [3.0, 1.0]  # "a" asked once within the batch, then cached
    assert metrics["judge/j/cache_hit_rate"] == [0.25, 0.5]
    assert metrics["judge/j/failures"] == [1.0, 0.0]  # the unparseable reply
    assert all(0.05 <= v < 2 for v in metrics["judge/j/latency_s"] + metrics["judge/j/latency_max_s"])
    assert metrics["judge/j/prompt_tokens"][0] > 0 and metrics["judge/j/completion_tokens"] == [
        6.0,
        2.0,
    ]  # words of the replies
    assert judge.totals.requests == server.requests == 4 and judge.totals.cache_hits == 2


def test_a_second_identical_call_makes_no_request():
    with JudgeServer(scored(lambda prompt: "5")) as server:
        judge = make(server)
        first = ask(judge, ["x", "y"])
        assert server.requests == 2
        assert ask(judge, ["x", "y"]) == first == [0.5, 0.5] and server.requests == 2
        assert ask(make(server), ["x", "y"]) == first and server.requests == 4  # the cache is the reward's own


def test_no_more_requests_in_flight_than_max_concurrency():
    async def slow(server, number, prompt):
        await asyncio.sleep(0.2)
        return chat_reply("7", prompt)

    with JudgeServer(slow) as server:
        assert ask(make(server, max_concurrency=3), [f"t{i}" for i in range(12)]) == [0.7] * 12
    assert server.requests == 12 and server.max_in_flight == 3


def test_the_key_from_the_named_environment_variable_is_the_bearer_token(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-judge-key-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent-elsewhere")
    with JudgeServer(scored(lambda prompt: "5")) as server:
        ask(make(server, key_env=KEY_ENV), ["x"])
        ask(make(server), ["x"])  # no key_env: OPENAI_API_KEY stays home
    assert server.authorizations == ["Bearer sk-test-judge-key-123", "Bearer EMPTY"]


def test_group_mode_scores_a_prompts_completions_together_in_one_request():
    def rank(prompt):
        return "1: 3\n2: 9\n3: 5" if "Answer 3:" in prompt else "Answer 1: 4"  # the 2nd group's reply misses one

    with JudgeServer(scored(rank)) as server:
        scores = ask(make(server, group=True), ["a", "b", "c", "d", "e"], ["q1"] * 3 + ["q2"] * 2)
    assert scores == [0.3, 0.9, 0.5, None, None]
    assert server.requests == 2 and "You are comparing 3 answers" in server.prompts[0]
    assert "Answer 1:\na\n\nAnswer 2:\nb\n\nAnswer 3:\nc" in server.prompts[0]


def test_a_loop_already_running_in_the_caller_is_no_problem():
    with JudgeServer(scored(lambda prompt: "9")) as server:
        judge = make(server)

        async def inside():
            return ask(judge, ["x"])

        assert asyncio.run(inside()) == [0.9]


# ---- servers that fail ---------------------------------------------------------------------------------------


def returns(fn, before_s: float):
    """fn()'s value, which must come before ``before_s`` (far beyond any bound under test): a hang detector, not a
    timing. Each use sets the judge so that, were its bound not applied, the call would take longer than that."""
    done = []
    worker = threading.Thread(target=lambda: done.append(fn()), daemon=True)
    worker.start()
    worker.join(before_s)
    assert done, f"no answer within {before_s} s: the bound was not applied"
    return done[0]


def test_a_hanging_server_scores_none_within_the_deadline_and_the_next_call_works_too():
    with JudgeServer(hang) as server:
        # an attempt would wait 120 s; the deadline ends the call at 0.5 s
        judge, metrics = make(server, timeout=120, max_retries=0, deadline=0.5), {}
        for _ in range(2):  # training goes on: the next step's call is bounded the same way
            assert returns(lambda: ask(judge, ["a", "b", "c"], metrics=metrics), 60) == [None, None, None]
    assert metrics["judge/j/failures"] == [3.0, 3.0] and server.requests == 6  # failures are not cached


def test_a_hanging_server_times_out_each_attempt_and_retries_within_the_bound():
    with JudgeServer(hang) as server:
        assert ask(make(server, timeout=0.2, max_retries=1, deadline=30), ["a"]) == [None]
    assert server.requests == 2  # each attempt timed out and was retried once; the deadline would have left one


@pytest.mark.parametrize(
    "body,content_type",
    [
        ("<html>502 Bad Gateway</html>", "text/html"),
        ("{not json", "application/json"),
        (
            json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "excellent answer!"}}]}),
            "application/json",
        ),
        (json.dumps({"result": "ok"}), "application/json"),
    ],
    ids=["html", "broken-json", "no-number", "not-a-completion"],
)
def test_a_server_returning_garbage_scores_none_counted_as_failures(body, content_type):
    from aiohttp import web

    async def garbage(server, number, prompt):
        return web.Response(text=body, content_type=content_type)

    with JudgeServer(garbage) as server:
        metrics = {}
        assert ask(make(server, max_retries=0), ["a", "b"], metrics=metrics) == [None, None]
    assert metrics["judge/j/failures"] == metrics["reward_failures/j"] == [2.0]


@pytest.mark.parametrize(
    "body",
    [
        {"detail": "Server is pinned to 'tiny'; requested 'judge-model'."},
        {"error": {"message": "Server is pinned to 'tiny'; requested 'judge-model'."}},
    ],
    ids=["fastapi", "openai"],
)
def test_a_refused_request_logs_what_the_server_said(body, caplog):
    """An HTTP error's text is only its status code: the log line shows the server's reason too."""
    from aiohttp import web

    async def refuse(server, number, prompt):
        return web.json_response(body, status=400)

    with JudgeServer(refuse) as server, caplog.at_level("WARNING", logger="grpo_sweep.rewards.judge"):
        assert ask(make(server, max_retries=0), ["a"]) == [None]
    assert (
        "Error code: 400" in caplog.text
        and caplog.text.count("Server is pinned to 'tiny'; requested 'judge-model'.") == 1
    )


def test_429s_are_retried_after_retry_after_then_scored():
    with JudgeServer(rate_limited(2, retry_after="0.2")) as server:
        assert ask(make(server, max_retries=3), ["a"]) == [0.7]
    assert server.requests == 3
    assert all(later - earlier >= 0.19 for earlier, later in zip(server.times, server.times[1:]))


def test_a_server_that_429s_forever_scores_none_within_the_bound():
    with JudgeServer(rate_limited(10**9, retry_after="0.1")) as server:
        assert ask(make(server, max_retries=2), ["a"]) == [None]
    assert server.requests == 3  # one try and two retries, then None
    with JudgeServer(rate_limited(10**9, retry_after="120")) as server:  # asked to wait past the deadline
        assert returns(lambda: ask(make(server, max_retries=2, timeout=1, deadline=1), ["a"]), 60) == [None]
    assert server.requests == 1


def test_a_reply_past_max_reply_bytes_fails_unread_and_is_not_cached(caplog):
    with JudgeServer(huge(2)) as server:  # 2 MB of text, 32 times the cap: a runaway judge
        fn, metrics = guarded(make(server, max_reply_bytes=64 * 1024, max_retries=0), "j"), {}
        for _ in range(2):
            assert returns(lambda: ask(fn, ["a", "b"], metrics=metrics), 60) == [None, None]
    assert server.requests == 4 and fn.failures == fn.samples == 4  # not cached: the next call asks again
    assert metrics["judge/j/failures"] == [2.0, 2.0]
    assert "(2 too large)" in caplog.text and "longer than max_reply_bytes=65536" in caplog.text
    with JudgeServer(huge(0.05)) as server:  # 50 kB: under the cap, scored
        assert ask(make(server, max_reply_bytes=64 * 1024), ["a"]) == [0.7]


def test_a_reply_that_trickles_in_is_cut_at_timeout_however_often_a_byte_arrives():
    """Each byte comes well within the HTTP library's timeout per read; the attempt as a whole is what is bounded."""
    with JudgeServer(trickle(0.05)) as server:  # the reply's ~250 bytes would take ~12 s
        fn = guarded(make(server, timeout=0.3, max_retries=1, deadline=60), "j")
        started = time.monotonic()
        assert returns(lambda: ask(fn, ["a"]), 30) == [None]
        took = time.monotonic() - started
    assert server.requests == 2 and took < 6, took  # two attempts of 0.3 s, the client's backoff between
    assert fn.failures == 1


def test_a_judge_that_is_down_costs_one_connection_a_call_and_is_asked_again_once_it_is_up(caplog):
    port = free_port()  # nothing listens there: every connection refused
    fn = guarded(llm_judge(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2, term_name="j"), "j")
    metrics = {}
    with caplog.at_level("INFO"):
        for _ in range(3):
            assert returns(lambda: ask(fn, ["a", "b", "c"], metrics=metrics), 60) == [None] * 3
        assert metrics["judge/j/requests"] == [3.0, 1.0, 1.0]  # then one try a call, without retries
        assert metrics["judge/j/retries"] == [6.0, 0.0, 0.0]
        assert fn.failures == fn.samples == 9 and metrics["reward_failures/j"] == [3.0] * 3
        with JudgeServer(scored(lambda prompt: "Score: 7"), port=port) as server:
            assert ask(fn, ["a", "b", "c"], metrics=metrics) == [0.7] * 3
    assert server.requests == 3 and fn.failures == 9
    lines = caplog.text.splitlines()
    assert not [line for line in lines if "Retrying request" in line or "HTTP Request" in line]  # counted instead
    assert sum("could not score 3 of 3 samples (3 unreachable)" in line for line in lines) == 3
    assert sum("took no connection" in line for line in lines) == 1
    assert sum("answers again" in line for line in lines) == 1


def test_a_judge_whose_connections_time_out_is_asked_once_a_call_too():
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        held = socket.create_connection(full.getsockname())  # the backlog is full: every later SYN is dropped
        port = full.getsockname()[1]
        fn = guarded(
            llm_judge(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout=0.3, max_retries=1, term_name="j"), "j"
        )
        metrics = {}
        for _ in range(2):
            assert returns(lambda: ask(fn, ["a", "b"], metrics=metrics), 30) == [None, None]
        held.close()
    assert metrics["judge/j/requests"] == [2.0, 1.0] and metrics["judge/j/retries"] == [2.0, 0.0]


# ---- settings, checked before anything trains ----------------------------------------------------------------

BAD = [
    (
        {"template": "Rate {answer}: {completion}"},
        "factory_args.template has unknown placeholder {answer}; it may use {question}, {completion}, {ground_truth}",
    ),
    (
        {"template": "Rate {completions}", "group": True, "score_regex": r"(\d+)"},
        "factory_args.score_regex='(\\\\d+)': with group=true it needs two groups",
    ),
    (
        {"template": "Rate {completion}", "group": True},
        "factory_args.template has unknown placeholder {completion}; "
        "it may use {question}, {completions}, {n}, {ground_truth} (group=true)",
    ),
    ({"template": "Rate this"}, "factory_args.template has no {completion}"),
    ({"template": "Rate {completion} {"}, "factory_args.template: Single '{' encountered in format string"),
    ({"base_url": "localhost:8000"}, "factory_args.base_url='localhost:8000': give the endpoint's URL"),
    ({"base_url": "ftp://judge:21/v1"}, "factory_args.base_url='ftp://judge:21/v1': give the endpoint's URL"),
    (
        {"base_url": "http://127.0.0.1:99999/v1"},
        "factory_args.base_url='http://127.0.0.1:99999/v1': the port must be a number from 1 to 65535",
    ),
    ({"base_url": "http://u:hunter2@judge:0/v1"}, "factory_args.base_url='http://u:***@judge:0/v1': the port must"),
    ({"max_reply_bytes": 100}, "factory_args.max_reply_bytes=100: give a whole number >= 1024"),
    (
        {"key_env": "NO_SUCH_JUDGE_KEY_VAR"},
        "factory_args.key_env=NO_SUCH_JUDGE_KEY_VAR: environment variable NO_SUCH_JUDGE_KEY_VAR is not set",
    ),
    ({"score_range": [10, 0]}, "factory_args.score_range=[10, 0]: the lowest score must be below the highest"),
    ({"score_regex": "Score: (\\d+"}, "factory_args.score_regex='Score: (\\\\d+' is not a regular expression"),
    ({"max_concurrency": 0}, "factory_args.max_concurrency=0: give a whole number >= 1"),
    ({"deadline": 0}, "factory_args.deadline=0: give seconds, a number > 0"),
]


@pytest.mark.parametrize(
    "args,message", BAD, ids=[m.split(":")[0].split("=")[0][13:] + str(i) for i, (_, m) in enumerate(BAD)]
)
def test_bad_judge_settings_are_refused_in_one_line_naming_the_term(args, message):
    term = {"factory": FACTORY, "factory_args": {"base_url": "http://127.0.0.1:9/v1", "model": "m", **args}}
    with pytest.raises(RewardError) as info:
        check_mix({"quality": term})
    assert str(info.value).startswith(f"reward_mix.quality.factory={FACTORY}: {message}"), str(info.value)
    assert "\n" not in str(info.value)


def test_an_api_key_put_in_config_is_refused_without_echoing_it():
    key = "sk-proj-abcdef0123456789"
    term = {"factory": FACTORY, "factory_args": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "key_env": key}}
    with pytest.raises(RewardError, match="must be the NAME of an environment variable that holds the API key") as info:
        check_mix({"j": term})
    assert key not in str(info.value)


def test_without_openai_the_gate_says_to_install_it(monkeypatch):
    find_spec = judge_module.importlib.util.find_spec
    monkeypatch.setattr(
        judge_module.importlib.util, "find_spec", lambda name, *a: None if name == "openai" else find_spec(name, *a)
    )
    with pytest.raises(
        RewardError,
        match=r"^reward_mix.j.factory=grpo_sweep.rewards.judge.llm_judge: the LLM judge "
        r'needs the openai package: pip install -e "\.\[judge\]"',
    ):
        check_mix({"j": {"factory": FACTORY, "factory_args": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}})


def test_a_template_with_the_ground_truth_makes_the_term_read_that_column():
    base = {"factory": FACTORY, "factory_args": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    assert "ground_truth" not in data_columns({"j": base})
    truth = {**base, "factory_args": {**base["factory_args"], "template": "{question} {completion} vs {ground_truth}"}}
    assert data_columns({"j": truth})["ground_truth"].reward == f"reward_mix.j ({FACTORY})"
    [fn], _ = build_mix({"quality": truth})
    assert fn.__name__ == "quality" and inspect.unwrap(fn).settings.name == "quality"  # judge/quality/... metrics


def test_validating_a_judge_term_imports_no_torch_nor_the_client_and_opens_no_connection():
    with JudgeServer(scored(lambda prompt: "5")) as server:
        args = [
            f"+reward_mix.j.factory={FACTORY}",
            f"+reward_mix.j.factory_args.base_url={server.base_url}",
            "+reward_mix.j.factory_args.model=m",
            "+reward_mix.j.factory_args.score_range=[1,5]",
        ]
        code = (
            "import sys\n"
            "from tests.conftest import compose\n"
            "from grpo_sweep.run.validate import validate\n"
            "from grpo_sweep.rewards.mix import describe_mix\n"
            f"cfg = compose({args!r})\n"
            "validate(cfg)\n"
            "print(describe_mix(cfg.reward_mix))\n"
            "print('HEAVY', [m for m in ('torch', 'transformers', 'openai', 'httpx2') if m in sys.modules])\n"
        )
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert re.search(
        rf"j +weight 1  {FACTORY}\(base_url='http://127.0.0.1:\d+/v1', model='m', score_range=\[1, 5\]\)", out.stdout
    ), out.stdout
    assert server.requests == 0


# ---- training ------------------------------------------------------------------------------------------------


# what a judge that never scores is asked in a FAST run of 2 steps, which then ends failed (no final evaluations):
# the step-0 validation and 2 training batches, of 8 completions each
DOWN_SAMPLES = 3 * 8


def judge_term(name: str, base_url: str, *args: str) -> list[str]:
    return [
        f"+reward_mix.{name}.factory={FACTORY}",
        f"+reward_mix.{name}.factory_args.base_url={base_url}",
        *(f"+reward_mix.{name}.factory_args.{a}" for a in args),
    ]


@pytest.mark.slow
def test_a_judge_served_by_transformers_serve_with_the_tiny_model_trains(tmp_path):
    """The tiny model's replies are noise: the run shows the mechanics (scores parsed or None, metrics logged)."""
    with tiny_model_server() as base_url:
        out = run_launch(
            [
                "reward_mix=none",
                *judge_term("tiny", base_url, f"model={TINY_MODEL}", "max_tokens=8"),
                *FAST,
                "trainer.max_steps=2",
                "trainer.save_steps=2",
            ],
            tmp_path,
            timeout=300,
        )
    assert out.returncode == 0, out.stderr[-3000:]
    [run_dir] = [p.parent for p in tmp_path.glob("grpo/runs/*/summary.json")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and set(summary["test_rewards"]) == {"tiny"}
    assert summary["reward_cost"]["tiny"]["calls"] == 2
    rows = [r for r in read_json_lines(run_dir / "metrics.jsonl") if "judge/tiny/requests" in r]
    assert len(rows) == 2
    for row in rows:
        assert row["judge/tiny/requests"] + 8 * row["judge/tiny/cache_hit_rate"] == 8  # 8 completions a step
        assert row["judge/tiny/latency_s"] > 0 and row["judge/tiny/prompt_tokens"] > 0
        assert 0 <= row["judge/tiny/failures"] <= 8
    # the tiny model, trained on arithmetic facts, mostly replies with numbers: most samples get a score
    assert sum(r["judge/tiny/failures"] for r in rows) < 8 and all(0 <= r["rewards/tiny/mean"] <= 1 for r in rows)


def test_training_goes_on_when_the_judge_hangs(tmp_path):
    """Every sample None (TRL logs the step's reward as None), each call cut at the deadline: training goes on to its
    last step, and every sample is a failure of the term in reward_failures (a term that never scored ends the run
    failed: tests/test_hostile_input.py)."""
    with JudgeServer(hang) as server:
        out = launch_here(
            [
                "reward_mix=none",
                *judge_term("judge", server.base_url, "model=m", "timeout=5", "deadline=0.3"),
                *FAST,
                "trainer.max_steps=2",
                "trainer.save_steps=2",
            ],
            tmp_path,
        )
    [run_dir] = [p.parent for p in tmp_path.glob("grpo/runs/*/summary.json")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["status"] == "failed", out.stderr[-3000:]
    assert summary["reward_failures"]["judge"] == DOWN_SAMPLES
    assert 0.6 <= summary["reward_cost"]["judge"]["seconds"] < 2  # two calls of 0.3 s
    rows = [r for r in read_json_lines(run_dir / "metrics.jsonl") if "judge/judge/failures" in r]
    assert [r["judge/judge/failures"] for r in rows] == [8.0, 8.0] and all(r["reward"] is None for r in rows)


def truth_and_answer(prompt: str) -> str:
    """A judge that checks the answer block against the truth the template shows it: 10 if equal, else 0."""
    truth = prompt.split("Truth: ", 1)[1].split(" |||", 1)[0].strip()
    answer = re.findall(r"<answer>(.*?)</answer>", prompt.split("<<<", 1)[1], re.S)
    return "Score: 10" if len(answer) == 1 and answer[0].strip() == truth else "Score: 0"


@pytest.mark.slow
def test_a_judge_only_reward_rises_in_training_and_its_key_is_in_no_file(tmp_path):
    """The main job's settings with a judge (a server that checks the answer against the truth) as the only trained
    reward: its mean rises as `correct`'s would; the key is sent, and written nowhere in the run."""
    key = "sk-test-never-written-0123456789"
    template = "'Truth: {ground_truth} ||| Answer: <<<{completion}>>> ||| Question: {question}'"
    with JudgeServer(scored(truth_and_answer)) as server:
        out = run_launch(
            [
                "reward_mix=none",
                *judge_term("judge", server.base_url, "model=checker", f"key_env={KEY_ENV}", f"template={template}"),
                "+reward_mix.correct.weight=0",
                "trainer.max_steps=60",
                "data.max_val_samples=8",
                "data.max_test_samples=8",
            ],
            tmp_path,
            timeout=600,
            env={KEY_ENV: key},
        )
    assert out.returncode == 0, out.stderr[-3000:]
    [run_dir] = [p.parent for p in tmp_path.glob("grpo/runs/*/summary.json")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["reward"] > summary["reward_first"] + 0.1, summary
    rows = read_json_lines(run_dir / "metrics.jsonl")
    # the checker compares the one answer block's text; `correct` has more rules, and they seldom disagree
    gaps = [abs(r["rewards/judge/mean"] - r["rewards/correct/mean"]) for r in rows if "rewards/judge/mean" in r]
    assert len(gaps) == 60 and sum(gaps) / len(gaps) < 0.05, gaps
    assert set(server.authorizations) == {f"Bearer {key}"}
    assert any(r.get("judge/judge/cache_hit_rate", 0) > 0 for r in rows)
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert not leaked and key not in out.stdout + out.stderr, leaked
