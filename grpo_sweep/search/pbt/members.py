"""A PBT's directory (pbt.jsonl, looks/, members/<m>/, head_to_head/, the best mix) and a member's state in it:
its score at a round's end, and a take-over, which makes one member's run another's at a step, keeping the
recipient's own record (superseded/). Carried out again after a kill, a take-over gives the same files. No torch
here."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from ...run.files import read_jsonl, write_json_atomic, write_jsonl_atomic
from ...run.record import SUMMARY_NAME, row_scores, val_figures
from ...run.results import BEST_DIR, METRICS, OUTCOMES, lookup
from ...run.resume import CHECKPOINTS, last_checkpoint, rows_up_to
from .settings import PBTError

# the population's lineage: its members are rounds of changing configs, not a grid's configurations
LINEAGE = "pbt.jsonl"
PLOT = "pbt.png"
MEMBERS_DIR = "members"
# the best member's mix, as an option of the reward_mix group under the sweep's own config directory
BEST_SCHEDULE = Path("conf") / "reward_mix" / "best_schedule.yaml"
# each round's ranking look, per member and question: looks/round-<r>.json
LOOKS = "looks"
# the schedule against the best fixed starting point: head_to_head/<arm>-<seed>/, a run each
HEAD_TO_HEAD = "head_to_head"
# where a take-over assembles the donor's state before it replaces the recipient's
TAKEOVER_STAGING = "checkpoints.taking-over"
# a recipient's own record before a take-over: superseded/step-<step>/ (metrics.jsonl, summary.json, outcomes/)
SUPERSEDED = "superseded"
SUPERSEDED_RECORD = "superseded.json"


def member_dir(sweep_dir: Path, member: int) -> Path:
    return Path(sweep_dir) / MEMBERS_DIR / str(member)


def round_score(run_dir: Path, step: int, metric: str) -> float | None:
    """The member's ``metric`` at ``step`` when its checkpoint of that step is complete (its validation there is
    written before its save); else None (it failed, or has not got there)."""
    found = last_checkpoint(run_dir)
    if found is None or found[1] < step:
        return None
    return logged_score(run_dir, step, metric)


def logged_score(run_dir: Path, step: int, metric: str) -> float | None:
    """The member's validation ``metric`` logged at ``step`` (metrics.jsonl), or None."""
    for row in read_jsonl(Path(run_dir) / METRICS):
        if row.get("step") == step:
            scores = row_scores(row)
            if scores is not None:
                value = lookup(val_figures(scores), metric)
                return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
    return None


def supersede(run_dir: Path, step: int, donor: int, name: str | None = None) -> Path:
    """Keep ``run_dir``'s own record (metrics.jsonl, summary.json, outcomes/) before a take-over at ``step``
    replaces it: in ``superseded/step-<step>/`` (or ``name``), with ``superseded.json`` saying by whom. Once: a
    take-over tried again after a kill keeps the first copy, made before anything was replaced."""
    archive = Path(run_dir) / SUPERSEDED / (name or f"step-{step}")
    if archive.exists():
        return archive
    partial = archive.with_name(archive.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for name in (METRICS, SUMMARY_NAME):
        if (Path(run_dir) / name).exists():
            shutil.copy2(Path(run_dir) / name, partial / name)
    if (Path(run_dir) / OUTCOMES).is_dir():
        shutil.copytree(Path(run_dir) / OUTCOMES, partial / OUTCOMES)
    write_json_atomic(partial / SUPERSEDED_RECORD, {"superseded_at_step": step, "by_member": donor})
    partial.rename(archive)
    return archive


def take_over(
    sweep_dir: Path, recipient: int, donor: int, step: int, donor_step: int | None = None, archive: str | None = None
) -> int:
    """Make ``recipient``'s run the donor's at ``donor_step`` (default ``step``, the recipient's own: a synchronous
    round): its checkpoint of that step (weights, optimizer, scheduler, RNG) and its metrics up to it; the
    recipient's own record at ``step`` is kept, marked superseded (``supersede``, in ``archive``). Staged next to
    the recipient and swapped in, so a kill part-way leaves either the old state or a staging directory the next
    attempt rebuilds. Returns the bytes copied."""
    src_dir, dst_dir = member_dir(sweep_dir, donor), member_dir(sweep_dir, recipient)
    step, own_step = step if donor_step is None else donor_step, step
    source = src_dir / CHECKPOINTS / f"checkpoint-{step}"
    if not (source / "trainer_state.json").exists():
        raise PBTError(
            f"member {donor} has no complete checkpoint of step {step} in {source.parent}: it cannot be "
            "taken over (was it deleted?)"
        )
    supersede(dst_dir, own_step, donor, archive)
    staging = dst_dir / TAKEOVER_STAGING
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging / source.name)
    copied = sum(f.stat().st_size for f in staging.rglob("*") if f.is_file())
    write_jsonl_atomic(staging / METRICS, rows_up_to(read_jsonl(src_dir / METRICS), step))
    shutil.rmtree(dst_dir / CHECKPOINTS, ignore_errors=True)
    (staging / METRICS).replace(dst_dir / METRICS)
    staging.rename(dst_dir / CHECKPOINTS)
    # what the recipient's own run had reported: gone with its weights (kept in superseded/)
    (dst_dir / SUMMARY_NAME).unlink(missing_ok=True)
    shutil.rmtree(dst_dir / OUTCOMES, ignore_errors=True)
    shutil.rmtree(dst_dir / BEST_DIR, ignore_errors=True)
    return copied
