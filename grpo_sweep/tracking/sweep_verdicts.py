"""The sweep's verdicts in W&B: at the end of a ``-m`` sweep with ``logger=wandb``, one more run in the sweep's
group (job_type ``verdicts``) holding the comparison table and, per configuration, its verdict and test difference
in the summary, so the dashboard that groups the training runs by ``choices.*`` shows the same verdicts as the
sweep table and report.md. It reads the sweep directory's verdicts.json (written by the sweep's end,
grpo_sweep/sweeps/sweep_end.py, which calls ``publish_verdicts``): the same comparisons, not a second computation.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..run.context import RunContext
from ..run.redact import redact
from .wandb_setup import choose_mode, default_group, where_saved

log = logging.getLogger(__name__)

VERDICTS_FILE = "verdicts.json"  # reading/results.py names it too: the two packages are siblings, the file is the seam
COLUMNS = ("config", "verdict", "rank_mean", "mean", "delta", "low", "high", "mde", "seeds_needed", "seeds", "note")


def verdict_summary(comparisons: list[dict]) -> dict:
    """Flat summary keys: ``verdict/<configuration>``, ``delta_test/<configuration>``, ``val/<configuration>``,
    ``test/<configuration>``."""
    out = {}
    for row in comparisons:
        config = row["config"]
        out[f"verdict/{config}"] = row.get("verdict")
        for key, name in (("delta", "delta_test"), ("rank_mean", "val"), ("mean", "test")):
            if row.get(key) is not None:
                out[f"{name}/{config}"] = row[key]
    return out


def publish_verdicts(config: Any, sweep_dir: Path) -> None:
    """At the end of a ``-m`` sweep with logger=wandb (sweeps/sweep_end.py, after it wrote verdicts.json): log them
    as a W&B run of the sweep's group. W&B must not fail the sweep: a problem is printed."""
    if config.logger.name != "wandb" or config.logger.mode == "disabled":
        return
    sweep_dir = Path(sweep_dir).resolve()
    try:
        record = json.loads((sweep_dir / VERDICTS_FILE).read_text())
    except (OSError, ValueError):
        return  # the end wrote none: nothing to show
    try:
        log_verdicts(config, sweep_dir, record)
    except Exception as exc:  # noqa: BLE001  (the runs are done and saved; W&B must not fail the sweep)
        print(f"W&B: verdicts not logged ({type(exc).__name__}: {exc}); they are in {sweep_dir / VERDICTS_FILE}")


def log_verdicts(cfg: Any, sweep_dir: Path, record: dict) -> None:
    import wandb

    comparisons = record.get("comparisons") or []
    # the training runs' group: default_group of a run in this sweep (its context's sweep_dir is this directory)
    group = cfg.logger.group or default_group(cfg, RunContext(sweep_dir, [], sweep_dir))
    run = wandb.init(
        project=cfg.logger.project,
        entity=cfg.logger.entity,
        group=group,
        job_type="verdicts",
        name="verdicts",
        dir=str(sweep_dir),
        mode=choose_mode(cfg.logger.mode),
        config={
            "direction": record.get("direction"),
            "verdicts": record.get("verdicts"),
            "sweep_dir": str(sweep_dir),
        },
        settings=wandb.Settings(quiet=True, save_code=False),
    )
    table = wandb.Table(
        columns=list(COLUMNS),
        data=[
            [json.dumps(row.get(c)) if isinstance(row.get(c), (list, dict)) else row.get(c) for c in COLUMNS]
            for row in comparisons
        ],
    )
    run.log({"verdicts": table})
    method = next((row.get("method") for row in comparisons if row.get("method")), None)
    run.summary.update(redact({**verdict_summary(comparisons), "method": method, "why_none": record.get("why_none")}))
    run.finish()
    print(f"W&B: verdicts of {len(comparisons)} configurations logged to group {group}")
    line = where_saved(run)
    if line:
        print(line)
