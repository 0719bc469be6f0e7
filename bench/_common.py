"""What the benchmarks share: the checkout they measure, its config composed, `python launch.py` run as a user runs
it, a fresh process timed from outside, and the numbers kept in bench/results/."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# A seconds-long real run (the random tiny model, short completions, few steps): the settings the tests used when
# the SLURM and Unsloth numbers were measured, pinned here so that those numbers keep their meaning.
SHORT_RUN = [
    "model.tiny.warm_start.steps=0",
    "trainer.max_steps=6",
    "trainer.save_steps=6",
    "trainer.num_generations=4",
    "trainer.per_device_train_batch_size=8",
    "trainer.max_completion_length=16",
    "trainer.eval.max_new_tokens=16",
    "data.arithmetic.n_train=64",
    "data.arithmetic.n_val=8",
    "data.arithmetic.n_test=8",
]


def tests_environment() -> None:
    """The environment the SLURM and Unsloth numbers were measured in (the test session's): OpenMP threads that do
    not spin on shared cores, and SLURM's clients pointed at the cluster scripts/slurm_local.sh starts."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    conf = Path(os.environ.get("SLURM_BASE", tmp / "grpo-sweep-slurm")) / "etc" / "slurm.conf"
    if conf.exists():
        os.environ.setdefault("SLURM_CONF", str(conf))


def parser(doc: str) -> argparse.ArgumentParser:
    """A benchmark's command line: ``--help`` prints its docstring and measures nothing."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def command(module: str, argv: list[str] | None = None) -> str:
    """The command line that re-measures: what a result file records next to its numbers."""
    return " ".join(["python -m", module, *(sys.argv[1:] if argv is None else argv)])


def child_env(extra: dict | None = None) -> dict:
    """The environment of a process a benchmark starts: this one's, read now, with this checkout first on the
    import path (launch.py's children and `python -m grpo_sweep...` measure it, whatever is installed)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **(extra or {})}


def machine(load_at: str | None = None) -> str:
    """The machine a result was measured on; with ``load_at`` ("at the end"), its load average then, since the
    machines are shared and the load moves the times."""
    text = f"{platform.machine()}, {os.cpu_count()} CPUs"
    return f"{text}, load avg {os.getloadavg()[0]:.1f} {load_at}" if load_at else text


def write(name: str, data: object) -> Path:
    """bench/results/<name> (a file name with its extension): JSON for anything but text."""
    out = RESULTS / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(data if isinstance(data, str) else json.dumps(data, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return out


def record(name: str, result: dict) -> Path:
    """Print a benchmark's numbers and keep them in bench/results/<name>.json."""
    width = max(map(len, result)) + 2
    for key, value in result.items():
        print(f"{key:<{width}} {value}")
    return write(f"{name}.json", result)


def record_labelled(name: str, label: str, entry: dict) -> Path:
    """Keep ``entry`` under ``label`` in bench/results/<name>.json beside the other labels (before / after, ...).
    The file is read now, not at the start: another label's run may have finished meanwhile."""
    path = RESULTS / f"{name}.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    results[label] = entry
    return write(path.name, results)


def compose(overrides: list[str] | tuple[str, ...] = ()):
    """The main job's config from conf/ with ``overrides``, as launch.py composes it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from grpo_sweep.configstore import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def launch(
    args: list[str],
    out: Path | str,
    *,
    env: dict | None = None,
    cwd: Path | str = ROOT,
    timeout: float | None = None,
    check: bool = True,
) -> tuple[float, subprocess.CompletedProcess]:
    """`python launch.py ARGS output_root=OUT` in a fresh process: its wall seconds and the finished process. With
    ``check``, a failed launch ends the benchmark with the tail of its stderr."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(ROOT / "launch.py"), *args, f"output_root={out}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(env),
    )
    wall = time.perf_counter() - started
    if check and proc.returncode:
        raise SystemExit(f"launch.py {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return wall, proc


def last_error(proc: subprocess.CompletedProcess) -> str:
    return (proc.stderr.strip().splitlines() or ["?"])[-1]


def run_dirs(out: Path | str) -> list[Path]:
    """The finished single runs under a launch's output_root."""
    return [p.parent for p in sorted(Path(out).glob("grpo/runs/*/summary.json"))]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def timed_process(cmd: list[str], cwd: Path | str = ROOT, env: dict | None = None) -> dict:
    """Wall and CPU seconds, peak RSS (MB) and exit code of one fresh process (os.wait4 on it), and its output."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env or child_env())
    out = proc.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    return {
        "wall_s": round(time.perf_counter() - started, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "rc": os.waitstatus_to_exitcode(status),
        "output": out,
    }


def seconds_each(fn: Callable[[], object], repeats: int) -> list[float]:
    """The wall seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    return round(1000 * statistics.median(seconds_each(fn, repeats)), 1)
