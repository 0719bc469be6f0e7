"""The sweep report's pictures, each about what the verdict is about (matplotlib Agg, PNG files, nothing shown).

- ``val_accuracy.png``: validation accuracy over training steps, one line per configuration (mean over its seeds,
  a band over seeds), the x-axis the step at which each periodic evaluation ran.
- ``reward_terms.png``: one panel per reward term, each on its own y-axis (every term has its own scale), the
  configurations that use the term as lines (smoothed, mean over seeds with the same band).
- ``forest.png``: per configuration, its difference from the reference with its interval (``forest_plot``; the
  rows come from the verdict engine).
- ``accuracy_vs_<param>.png``: the sweep's objective on validation (``val_accuracy`` unless it optimized another
  metric, e.g. a study's ``val_rewards.<term>``) and its test counterpart per value of one swept parameter: each run
  a point, each value its mean with an interval as an error bar. Values of a categorical parameter are not joined
  by a line: they have no order. A parameter a study samples (a weight, a learning rate) is drawn on a continuous
  axis, log where the space is log.

The band over seeds: a 95 % Student t interval of the mean with 3 or more seeds, the range (min to max) with 2,
none with 1. Colours follow the configurations' rank (best first) in every figure; at most ``TOP_CONFIGS`` are
coloured and named, the rest are drawn in grey under one legend entry, so a figure stays legible at any sweep size.
Reads only ``metrics.jsonl`` files (streamed); no torch.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

import numpy as np

from ..run.files import iter_jsonl
from ..run.record import VAL_ACCURACY, VAL_ACCURACY_LOGGED, WEIGHT_PREFIX
from ..run.results import METRICS
from .stats import mean_interval

TOP_CONFIGS = 6
# a parameter with more distinct values than this is drawn against its values (a scatter), not one slot per value
MAX_SLOTS = 12
# the forest plot's rows at most: the reference and every better/worse row first, then the rest in the given order
MAX_FOREST_ROWS = 40
# a curve with more points than this is smoothed: a centred moving average over about 1/SMOOTH_FRACTION of them
SMOOTH_ABOVE = 15
SMOOTH_FRACTION = 12
VAL_KEY = VAL_ACCURACY_LOGGED
GREY = "0.65"
BAND = "band: 95% t-interval over seeds (min-max with 2 seeds)"


@dataclass
class RunPoint:
    """One run as the plots need it: its directory (for metrics.jsonl), swept parameters and reported figures."""

    dir: Path
    params: dict = field(default_factory=dict)
    val: float | None = None
    test: float | None = None


@dataclass
class ConfigRuns:
    """One configuration: its label (the non-seed overrides) and its runs (its seeds)."""

    label: str
    runs: list[RunPoint]


class ForestRow(NamedTuple):
    """One configuration against the reference: ``delta`` (this - reference) and its interval ``[low, high]``;
    None where there is none (the reference itself, an incomplete comparison)."""

    config: str
    delta: float | None
    low: float | None
    high: float | None
    verdict: str


# ---------------------------------------------------------------------------------------------------- numbers


def smooth(values: Sequence[float], window: int) -> list[float]:
    """Centred moving average over ``window`` points (odd; shrinks at the ends, so the first and last points are
    averages of what exists around them, not of padding)."""
    if window < 1:
        raise ValueError(f"smooth: window={window!r} must be >= 1")
    if not values:
        return []
    half = window // 2
    kernel = np.ones(2 * half + 1)
    # the full convolution, cut to the points' own positions: at the ends the sum and the count both cover only
    # the points that exist
    sums = np.convolve(np.asarray(values, dtype=float), kernel)[half : half + len(values)]
    counts = np.convolve(np.ones(len(values)), kernel)[half : half + len(values)]
    return (sums / counts).tolist()


def smoothing_window(points: int) -> int:
    """1 (no smoothing) up to SMOOTH_ABOVE points, else an odd window of about points / SMOOTH_FRACTION."""
    if points <= SMOOTH_ABOVE:
        return 1
    return max(3, (points // SMOOTH_FRACTION) // 2 * 2 + 1)


def seed_band(series: Iterable[dict]) -> tuple[list, list, list, list]:
    """Steps, mean, low and high over several runs' ``{step: value}``: at each step, over the runs that logged it."""
    by_step: dict[Any, list[float]] = {}
    for one in series:
        for step, value in one.items():
            by_step.setdefault(step, []).append(value)
    steps = sorted(by_step)
    rows = [mean_interval(by_step[s]) for s in steps]
    return steps, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def read_series(run_dir: Path, keys: Sequence[str]) -> tuple[dict[str, dict], Any]:
    """``{key: {step: value}}`` from one run's metrics.jsonl (streamed; the end-of-training row left out), and the
    last step any row logged (the runs table's steps of a run that did not finish)."""
    out: dict[str, dict] = {key: {} for key in keys}
    last = None
    for row in iter_jsonl(Path(run_dir) / METRICS):
        step = row.get("step")
        last = step if step is not None else last
        if not isinstance(step, (int, float)) or "train_runtime" in row:
            continue
        for key in keys:  # looked up, not searched for: a training row has ~30 keys
            value = row.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[key][step] = float(value)
    return out, last


def smoothed(series: dict) -> tuple[dict, int]:
    """A run's ``{step: value}`` smoothed along its own logged steps, and the window used."""
    steps = sorted(series)
    window = smoothing_window(len(steps))
    if window == 1:
        return series, 1
    return dict(zip(steps, smooth([series[s] for s in steps], window))), window


class Curve(NamedTuple):
    """One configuration's curve: at each step the mean over its runs and the band (``interval``); ``window``: the
    moving average applied to each run first (1: none)."""

    steps: list
    mean: list
    low: list
    high: list
    window: int = 1


def curve(series: Iterable[dict]) -> Curve | None:
    """The curve of one configuration from its runs' ``{step: value}`` (each smoothed along its own steps first);
    None when no run logged a value."""
    runs, windows = [], [1]
    for one in series:
        if one:
            values, window = smoothed(one)
            runs.append(values)
            windows.append(window)
    if not runs:
        return None
    return Curve(*seed_band(runs), max(windows))


# ---------------------------------------------------------------------------------------------------- drawing


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def palette(plt) -> list[str]:
    return plt.rcParams["axes.prop_cycle"].by_key()["color"]


def _short(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def abbreviate(labels: Iterable[str]):
    """A function that shortens a configuration label for a legend or an axis: each ``a.b.key=value`` to
    ``key=value`` where no other swept key ends in the same ``key`` (a label's distinguishing part is often its
    last override, which cutting the text would lose)."""
    keys = {token.partition("=")[0] for label in labels for token in label.split() if "=" in token}
    by_last: dict[str, set] = {}
    for key in keys:
        by_last.setdefault(key.lstrip("+~").rsplit(".", 1)[-1], set()).add(key)

    def short(label: str) -> str:
        out = []
        for token in label.split():
            key, eq, value = token.partition("=")
            last = key.lstrip("+~").rsplit(".", 1)[-1]
            out.append(f"{last}={value}" if eq and len(by_last.get(last, ())) == 1 else token)
        return " ".join(out)

    return short


def config_label(rank: int, config: ConfigRuns, short=lambda label: label) -> str:
    n = len(config.runs)
    return f"#{rank} {_short(short(config.label), 64)}" + (f" ({n} seeds)" if n > 1 else "")


def _draw_band(ax, steps, mean, low, high, color, label, linewidth=1.6) -> None:
    ax.plot(
        steps,
        mean,
        color=color,
        linewidth=linewidth,
        label=label,
        marker="o" if len(steps) <= 12 else None,
        markersize=3,
    )
    if any(hi > lo for lo, hi in zip(low, high)):
        ax.fill_between(steps, low, high, color=color, alpha=0.18, linewidth=0)


def plot_val_accuracy(
    configs: Sequence[ConfigRuns], curves: dict[str, Curve | None], out_path: Path, top: int = TOP_CONFIGS
) -> str | None:
    """Validation accuracy over training steps per configuration (mean over seeds with the band); returns the title,
    or None (nothing written) when no run logged ``val/accuracy``.

    ``configs``: best first (the colours follow this order); ``curves[label]``: ``curve`` of its runs'
    ``val/accuracy`` (``read_series``)."""
    drawn = [(i, c, curves[c.label]) for i, c in enumerate(configs) if curves.get(c.label)]
    if not drawn:
        return None
    plt = pyplot()
    colors = palette(plt)
    short = abbreviate(c.label for c in configs)
    fig, ax = plt.subplots(figsize=(10, 4.8))
    rest = 0
    for i, config, one in reversed(drawn):  # the best last: on top
        if i < top:
            _draw_band(ax, *one[:4], colors[i % len(colors)], config_label(i + 1, config, short))
        else:
            rest += 1
            ax.plot(one.steps, one.mean, color=GREY, linewidth=0.7, alpha=0.5)
    window = max(one.window for _, _, one in drawn)
    smoothing = f"; moving average over {window} evaluations" if window > 1 else ""
    title = f"Validation accuracy during training (mean over seeds; {BAND}{smoothing})"
    ax.set_title("Validation accuracy during training", fontsize=11)
    _finish_legend(ax, rest)
    ax.set(xlabel="training step (evaluations on the validation split)", ylabel="validation accuracy")
    ax.grid(alpha=0.3)
    fig.text(0.01, -0.02, f"Line: mean over seeds; {BAND}{smoothing}.", fontsize=8, ha="left", va="top")
    save_figure(fig, out_path)
    return title


def _finish_legend(ax, rest: int) -> None:
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda k: int(labels[k].split(" ", 1)[0][1:]))  # "#1 ..." first
    handles, labels = [handles[k] for k in order], [labels[k] for k in order]
    if rest:
        from matplotlib.lines import Line2D

        handles.append(Line2D([], [], color=GREY, linewidth=0.8))
        labels.append(f"the other {rest} configurations")
    if handles:
        ax.legend(
            handles,
            labels,
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            frameon=False,
            title="configuration (best validation first)",
            title_fontsize=7,
        )


def plot_reward_terms(
    configs: Sequence[ConfigRuns],
    names: Sequence[str],
    curves: dict[str, dict[str, Curve | None]],
    out_path: Path,
    top: int = TOP_CONFIGS,
    weights: dict[str, dict[str, tuple]] | None = None,
) -> str | None:
    """One panel per reward term (``rewards/<name>/mean``, unweighted), each with its own y-axis; in each, the
    configurations whose runs logged that term, smoothed, mean over seeds with the band. Returns the title, or None
    when no term was logged. ``curves[label][name]``: ``curve`` of the configuration's runs for that term.
    ``weights[label][name]``: (steps, weights) of a term whose weight was scheduled (``reward_weights/<name>``),
    drawn dashed on a second y-axis of its panel, unsmoothed."""
    present = [n for n in names if any(curves.get(c.label, {}).get(n) for c in configs)]
    if not present:
        return None
    plt = pyplot()
    colors = palette(plt)
    cols = min(3, len(present))
    rows = math.ceil(len(present) / cols)
    short = abbreviate(c.label for c in configs)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols + 2.6, 3.2 * rows), squeeze=False)
    windows = {1}
    handles: dict[str, Any] = {}
    rest = set()
    for ax, name in zip(axes.flat, present):
        for i, config in reversed(list(enumerate(configs))):
            one = curves.get(config.label, {}).get(name)
            if not one:
                continue
            windows.add(one.window)
            if i < top:
                label = config_label(i + 1, config, short)
                _draw_band(ax, *one[:4], colors[i % len(colors)], label, 1.3)
                handles.setdefault(label, ax.lines[-1])
            else:
                rest.add(config.label)
                ax.plot(one.steps, one.mean, color=GREY, linewidth=0.6, alpha=0.5)
        scheduled = [(i, (weights or {}).get(c.label, {}).get(name)) for i, c in enumerate(configs[:top])]
        scheduled = [(i, w) for i, w in scheduled if w]
        if scheduled:
            twin = ax.twinx()
            for i, (steps, values) in scheduled:
                twin.plot(steps, values, color=colors[i % len(colors)], linestyle="--", linewidth=1.0)
            twin.set_ylabel("weight (dashed)", fontsize=8)
            twin.tick_params(labelsize=7)
        ax.set_title(f"rewards/{name}/mean", fontsize=9)
        ax.set_xlabel("training step", fontsize=8)
        ax.set_ylabel("reward term (unweighted mean)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(present) :]:
        ax.axis("off")
    labels = sorted(handles, key=lambda label: int(label.split(" ", 1)[0][1:]))
    lines = [handles[label] for label in labels]
    if rest:
        from matplotlib.lines import Line2D

        lines.append(Line2D([], [], color=GREY, linewidth=0.8))
        labels.append(f"the other {len(rest)} configurations")
    smoothing = f"; moving average over {max(windows)} logged steps" if max(windows) > 1 else ""
    fig.tight_layout(rect=(0, 0, (4.6 * cols) / (4.6 * cols + 2.6), 1))
    fig.legend(
        lines,
        labels,
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=((4.6 * cols) / (4.6 * cols + 2.6), 0.98),
        frameon=False,
        title="configuration (best validation first)",
        title_fontsize=7,
    )
    dashed = any(w for per in (weights or {}).values() for w in per.values())
    weighted = " Dashed: the term's scheduled weight, right axis." if dashed else ""
    fig.text(
        0.01,
        -0.01,
        f"Each panel one reward term on its own y-axis. Line: mean over seeds; {BAND}{smoothing}.{weighted}",
        fontsize=8,
        ha="left",
        va="top",
    )
    save_figure(fig, out_path)
    return f"Reward terms during training, one panel per term on its own scale (mean over seeds; {BAND}{smoothing})" + (
        "; dashed, a scheduled term's weight" if dashed else ""
    )


_VERDICT_COLORS = {"better": "tab:green", "worse": "tab:red", "indistinguishable": "0.35", "reference": "black"}


def _verdict_word(verdict: str) -> str:
    return (verdict or "").strip().split(" ", 1)[0].strip("()").lower()


def _as_row(row: Any) -> ForestRow:
    if isinstance(row, ForestRow):
        return row
    if isinstance(row, (tuple, list)):
        return ForestRow(*row)
    return ForestRow(row.config, row.delta, row.low, row.high, row.verdict)


def forest_plot(
    rows: Iterable[Any],
    out_path: Path,
    reference: str | None = None,
    xlabel: str = "difference from the reference (test accuracy)",
    interval_text: str = "95% family-wise interval",
    max_rows: int = MAX_FOREST_ROWS,
) -> str | None:
    """Per configuration its difference from the reference as a point and its interval as a horizontal bar, a line
    at 0; coloured by verdict (better green, worse red, indistinguishable grey); the verdict and the numbers written
    on the right. Returns the title, or None (nothing written) for no rows.

    ``rows``: ``ForestRow``s, ``(config, delta, low, high, verdict)`` tuples, or objects with those attributes, in
    the order to show them (top to bottom). The reference is the row named ``reference``, else the row whose
    verdict starts with ``reference``; it is drawn at 0 without a bar. A row without a delta or without an interval
    (incomplete, no verdict) gets its verdict written, and no point or bar it does not have.
    """
    rows = [_as_row(r) for r in rows]
    if not rows:
        return None
    bad = [r for r in rows if r.low is not None and r.high is not None and r.low > r.high]
    if bad:
        raise ValueError(f"forest_plot: {bad[0].config!r} has low={bad[0].low} > high={bad[0].high}")
    is_ref = [
        (r.config == reference) if reference is not None else _verdict_word(r.verdict) == "reference" for r in rows
    ]
    total = len(rows)
    if total > max_rows:
        first = [i for i, r in enumerate(rows) if is_ref[i] or _verdict_word(r.verdict) in ("better", "worse")]
        chosen = sorted((first + [i for i in range(total) if i not in set(first)])[:max_rows])
        rows, is_ref = [rows[i] for i in chosen], [is_ref[i] for i in chosen]
    plt = pyplot()
    height = 1.3 + 0.32 * len(rows)
    fig, ax = plt.subplots(figsize=(10, height))
    ys = list(range(len(rows)))[::-1]  # first row at the top
    spans = [v for r in rows for v in (r.delta, r.low, r.high) if v is not None] + [0.0]
    lo, hi = min(spans), max(spans)
    pad = (hi - lo) * 0.08 or 0.05
    for y, row, ref in zip(ys, rows, is_ref):
        word = "reference" if ref else _verdict_word(row.verdict)
        color = _VERDICT_COLORS.get(word, "tab:orange")
        if ref:
            ax.plot([0.0], [y], marker="D", color=color, markersize=6, linestyle="none")
            note = "reference"
        elif row.delta is None:
            note = row.verdict or "no comparison"
        else:
            if row.low is not None and row.high is not None:
                ax.errorbar(
                    [row.delta],
                    [y],
                    xerr=[[row.delta - row.low], [row.high - row.delta]],
                    fmt="o",
                    color=color,
                    ecolor=color,
                    elinewidth=2,
                    capsize=4,
                    markersize=5,
                )
                note = f"{_signed(row.delta)} [{_signed(row.low)}, {_signed(row.high)}]  {row.verdict}"
            else:
                ax.plot([row.delta], [y], marker="o", color=color, markersize=5, linestyle="none", fillstyle="none")
                note = f"{_signed(row.delta)} (no interval)  {row.verdict}"
        ax.annotate(
            _short(note, 70), xy=(1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=7.5, color=color
        )
    ax.axvline(0.0, color="0.3", linewidth=0.9, linestyle="--")
    short = abbreviate(r.config for r in rows)
    ax.set_yticks(ys, [_short(short(r.config), 56) for r in rows], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_xlim(lo - pad, hi + pad)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    shown = (
        f" ({len(rows)} of {total} configurations: the reference, every better/worse, then in order)"
        if len(rows) < total
        else ""
    )
    ax.set_title(f"Difference from the reference, {interval_text}{shown}", fontsize=10)
    save_figure(fig, out_path)
    return f"Difference from the reference per configuration, {interval_text} (forest plot){shown}"


def _signed(value: float) -> str:
    return f"{value:+.3g}" if 0 < abs(value) < 1e-2 else f"{value:+.3f}"


def _param(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "param"


def plot_by_parameter(
    param: str,
    runs: Sequence[RunPoint],
    out_path: Path,
    highlight: Iterable[int] = (),
    metric: tuple[str, str | None] = (VAL_ACCURACY, "test_accuracy"),
    scale: str | None = None,
) -> str | None:
    """Validation and test accuracy (two panels, the test one when some run has it) against one swept parameter:
    each run a point (spread sideways, the same on every report), each value's mean and interval (95 % t, min-max
    for 2 runs) an error bar, never a line between values. ``highlight``: indexes into ``runs`` drawn as stars
    (the best runs by validation). Above MAX_SLOTS distinct numeric values the runs are drawn against the value
    itself, on a log axis when it spans >= 100x. ``metric``: the names of what ``RunPoint.val``/``.test`` hold.
    ``scale``: "linear" or "log" for a parameter sampled from a continuous range (study.json's ``scales``): drawn
    against the value itself on that axis, whatever the number of distinct values."""
    points = [(r.params[param], i, r) for i, r in enumerate(runs) if param in r.params]
    if not points:
        return None
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v, _, _ in points)
    values = sorted({v for v, _, _ in points}, key=lambda v: v if numeric else str(v))
    slots = not numeric or (scale is None and len(values) <= MAX_SLOTS)
    val_name, test_name = (
        ("validation accuracy", "test accuracy") if metric[0] == VAL_ACCURACY else (metric[0], metric[1] or "test")
    )
    panels = [("val", val_name)]
    if metric[1] and any(r.test is not None for _, _, r in points):
        panels.append(("test", test_name))
    highlight = set(highlight)
    plt = pyplot()
    width = min(14.0, max(4.5, 0.7 * len(values) + 2.2)) if slots else 6.0
    stacked = width * len(panels) > 12  # wide panels go one above the other, not side by side
    shape = (len(panels), 1) if stacked else (1, len(panels))
    fig, axes = plt.subplots(*shape, figsize=(width * shape[1], 3.9 * shape[0]), squeeze=False, sharey=True)
    for ax, (which, ylabel) in zip(axes.flat, panels):
        by_value: dict[Any, list[float]] = {}
        xs, ys, stars = [], [], []
        for value, i, run in points:
            y = getattr(run, which)
            if y is None or not math.isfinite(y):
                continue
            by_value.setdefault(value, []).append(y)
            x = values.index(value) + (zlib.crc32(run.dir.name.encode()) % 1000 / 1000 - 0.5) * 0.36 if slots else value
            xs.append(x)
            ys.append(y)
            if i in highlight:
                stars.append((x, y))
        per_slot = max(1.0, len(ys) / max(1, len(by_value)))
        ax.scatter(xs, ys, s=12, alpha=max(0.15, min(0.6, 30 / per_slot)), color="tab:blue", linewidths=0, label="runs")
        if slots:
            present = [k for k, v in enumerate(values) if by_value.get(v)]
            stats = [mean_interval(by_value[values[k]]) for k in present]
            if present:
                ax.errorbar(
                    [k + 0.32 for k in present],
                    [s[0] for s in stats],
                    yerr=[[s[0] - s[1] for s in stats], [s[2] - s[0] for s in stats]],
                    fmt="D",
                    color="black",
                    markersize=5,
                    capsize=4,
                    elinewidth=1.4,
                    linestyle="none",
                    label="mean, 95% t-interval (min-max with 2 runs)",
                )
            ax.set_xticks(
                range(len(values)),
                [_short(_param(v), 24) for v in values],
                rotation=30 if len(values) > 4 else 0,
                ha="right" if len(values) > 4 else "center",
                fontsize=8,
            )
            ax.set_xlim(-0.6, len(values) - 0.2)
        elif scale == "log" or (scale is None and xs and min(xs) > 0 and max(xs) / min(xs) >= 100):
            ax.set_xscale("log")
        if stars:
            ax.scatter(
                [p[0] for p in stars],
                [p[1] for p in stars],
                marker="*",
                s=80,
                color="tab:red",
                zorder=5,
                label="best runs by validation" if len(stars) > 1 else "best run by validation",
            )
        ax.set(xlabel=param, ylabel=ylabel, title=f"{ylabel} vs {param}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best", framealpha=0.8)
    fig.tight_layout()
    save_figure(fig, out_path)
    what = "Validation and test accuracy" if metric[0] == VAL_ACCURACY else " and ".join(n for _, n in panels)
    return f"{what} vs {param}" + (
        " (points: runs; error bars: mean and 95% t-interval)" if slots else " (points: runs)"
    )


def save_figure(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def write_plots(
    configs: Sequence[ConfigRuns],
    names: Sequence[str],
    out_dir: Path,
    forest_rows: Sequence[Any] | None = None,
    forest_options: dict | None = None,
    is_seed=lambda key: False,
    best_runs: Iterable[Path] = (),
    read=read_series,
    metric: tuple[str, str | None] = (VAL_ACCURACY, "test_accuracy"),
    scales: dict | None = None,
) -> list[tuple[str, str]]:
    """Every plot of the report, as (title, path relative to the report) in the order the report shows them.

    ``configs``: best first (by the sweep's objective on validation). ``names``: the reward terms. ``forest_rows``:
    the verdict engine's rows for ``forest_plot`` (no forest plot without them); ``forest_options``: its keyword
    arguments (``reference``, ``xlabel``, ``interval_text``). ``is_seed``: which parameters are seeds (no plot
    against a seed). ``best_runs``: run directories starred in the per-parameter plots. ``read``: how a run's
    metrics are read (``read_series``; the sweep's reader passes its own, which keeps the last step). ``metric``,
    ``scales``: what the per-parameter plots show and on which axes (``plot_by_parameter``). PNGs left in
    ``out_dir`` by an earlier report that this one did not draw are removed.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = [VAL_KEY] + [f"rewards/{n}/mean" for n in names] + [f"{WEIGHT_PREFIX}{n}" for n in names]
    val: dict[str, Curve | None] = {}
    terms: dict[str, dict[str, Curve | None]] = {}
    weights: dict[str, dict[str, tuple]] = {}
    for config in configs:  # each metrics file read once, for every curve; one configuration's runs in memory
        series = [read(run.dir, keys)[0] for run in config.runs]
        val[config.label] = curve(one[VAL_KEY] for one in series)
        terms[config.label] = {name: curve(one[f"rewards/{name}/mean"] for one in series) for name in names}
        # a schedule is the same for every seed of a configuration: its mean is its value
        # (a scheduled mix logs every term's weight: a constant one is not drawn)
        weights[config.label] = {
            name: seed_band(one[f"{WEIGHT_PREFIX}{name}"] for one in series)[:2]
            for name in names
            if len({v for one in series for v in one[f"{WEIGHT_PREFIX}{name}"].values()}) > 1
        }
    plots = []

    def add(title: str | None, path: Path) -> None:
        if title:
            plots.append((title, f"{out_dir.name}/{path.name}"))

    if forest_rows:
        path = out_dir / "forest.png"
        add(forest_plot(forest_rows, path, **(forest_options or {})), path)
    path = out_dir / "val_accuracy.png"
    add(plot_val_accuracy(configs, val, path), path)
    path = out_dir / "reward_terms.png"
    add(plot_reward_terms(configs, names, terms, path, weights=weights), path)
    runs = [run for config in configs for run in config.runs]
    best = {Path(p) for p in best_runs}
    for param in sorted({k for r in runs for k in r.params if not is_seed(k)}):
        path = out_dir / f"accuracy_vs_{safe_name(param)}.png"
        add(
            plot_by_parameter(
                param, runs, path, [i for i, r in enumerate(runs) if r.dir in best], metric, (scales or {}).get(param)
            ),
            path,
        )
    written = {Path(rel).name for _, rel in plots}
    for stale in out_dir.glob("*.png"):  # plots/ is the report's own: drop what an earlier report drew
        if stale.name not in written:
            stale.unlink()
    return plots
