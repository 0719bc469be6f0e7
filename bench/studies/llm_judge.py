"""What an LLM-judge term costs in a short training run: per-step judge latency, cache hits, share of training time.

    python -m bench.studies.llm_judge            # prints a markdown table (bench/results/llm_judge.md)

The main job (`python launch.py`: the warm-started tiny model, `correct` trained, 120 steps, 16 completions a step)
with a judge term riding along at weight 0, so every run trains the same way and only the judge differs:
- `transformers serve` with the tiny model, one request per completion;
- the same, `group=true`: one request per prompt, its 8 completions scored together (RULER-style);
- an endpoint that answers at once (a standard-library server here; an aiohttp one when this was measured): the
  client's own cost.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import sys
import tempfile
import threading

from bench._common import ROOT, launch, parser, read_jsonl, run_dirs

FACTORY = "grpo_sweep.rewards.judge.llm_judge"
TINY_MODEL = ROOT / "grpo_sweep" / "models" / "prebuilt"


@contextlib.contextmanager
def tiny_model_server():
    """`transformers serve` with the tiny model on CPU, through the package's server lifecycle (the one a run's
    vLLM server goes through: ports claimed, /health awaited, the process group stopped); yields the base URL."""
    from grpo_sweep.backends.vllm_server import ServerSpec, serving

    def command(spec, port):
        flags = ["--device", "cpu", "--host", spec.host, "--port", str(port)]
        return [sys.executable, "-m", "transformers.cli.transformers", "serve", spec.model, *flags]

    with tempfile.TemporaryDirectory() as logs:
        with serving(ServerSpec(model=str(TINY_MODEL), startup_timeout_s=90), logs, command=command) as server:
            yield server.url + "/v1"


class _Instant(http.server.BaseHTTPRequestHandler):
    """A chat completion scoring every prompt 7, at once."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Score: 7"}}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # a line per request would swamp the benchmark's output
        pass


@contextlib.contextmanager
def instant_server():
    """The endpoint that answers at once, in a thread; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Instant)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def judge_args(base_url: str, model: str, *extra: str) -> list[str]:
    return [
        f"+reward_mix.judge.factory={FACTORY}",
        f"+reward_mix.judge.factory_args.base_url={base_url}",
        f"+reward_mix.judge.factory_args.model={model}",
        "+reward_mix.judge.weight=0",
        *(f"+reward_mix.judge.factory_args.{a}" for a in extra),
    ]


def run(label: str, overrides: list[str], steps: int) -> dict:
    with tempfile.TemporaryDirectory() as out:
        wall, _ = launch([*overrides, f"trainer.max_steps={steps}"], out, env={"OMP_NUM_THREADS": "1"})
        [run_dir] = run_dirs(out)
        summary = json.loads((run_dir / "summary.json").read_text())
        rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if "judge/judge/requests" in r]
        log = (run_dir / "launch.log").read_text()
    print(f"{label}: {wall:.1f} s", file=sys.stderr, flush=True)
    # why samples went unscored, from the judge's warnings ("could not score 3 of 16 samples (3 unparseable)")
    kinds: dict[str, int] = {}
    for found in re.findall(r"judge 'judge' could not score \d+ of \d+ samples \(([^)]*)\)", log):
        for part in found.split(", "):
            count, kind = part.split(" ", 1)
            kinds[kind] = kinds.get(kind, 0) + int(count)
    cost = summary["reward_cost"]["judge"]
    latency = [r["judge/judge/latency_s"] for r in rows if "judge/judge/latency_s" in r]
    latency_max = [r["judge/judge/latency_max_s"] for r in rows if "judge/judge/latency_max_s" in r]
    return {
        "judge": label,
        "steps": len(rows),
        "judge s/step": cost["seconds"] / cost["calls"],
        "request latency mean (s)": sum(latency) / len(latency),
        "request latency max (s)": max(latency_max),
        "requests/step": sum(r["judge/judge/requests"] for r in rows) / len(rows),
        "cache hit rate": sum(r["judge/judge/cache_hit_rate"] for r in rows) / len(rows),
        "failures/step": sum(r["judge/judge/failures"] for r in rows) / len(rows),
        "tokens/step (prompt + completion)": sum(
            r["judge/judge/prompt_tokens"] + r["judge/judge/completion_tokens"] for r in rows
        )
        / len(rows),
        "why unscored (samples, training and evaluations)": ", ".join(f"{v} {k}" for k, v in kinds.items()) or "-",
        "reward_cost share": cost["share"],
        "correct share": summary["reward_cost"]["correct"]["share"],
        "run wall (s)": wall,
    }


def main() -> None:
    cli = parser(__doc__)
    cli.add_argument("--steps", type=int, default=120)
    args = cli.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"  # the server's threads, as when this was measured (the runs' too)
    results = []
    with tiny_model_server() as base_url:
        model = str(TINY_MODEL)
        results.append(run("tiny model, transformers serve", judge_args(base_url, model, "max_tokens=16"), args.steps))
        results.append(
            run(
                "tiny model, transformers serve, group=true",
                judge_args(base_url, model, "max_tokens=32", "group=true"),
                args.steps,
            )
        )
    with instant_server() as base_url:
        results.append(run("instant endpoint", judge_args(base_url, "m"), args.steps))
    keys = list(results[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in results:
        print("| " + " | ".join(f"{row[k]:.3g}" if isinstance(row[k], float) else str(row[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
