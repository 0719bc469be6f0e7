"""The report's plots (grpo_sweep/reading/plots.py): the numbers behind each band and bar, and what each figure draws
(the figure is caught before it is saved and closed), over hand-made rows and run directories."""

from __future__ import annotations

import json
import math

import matplotlib.image
import pytest

from grpo_sweep.reading import plots
from grpo_sweep.reading.plots import ConfigRuns, ForestRow, RunPoint
from grpo_sweep.reading.stats import mean_interval


@pytest.fixture
def figures(monkeypatch):
    """Every figure a plot function saves, kept open for inspection (and still written to its file)."""
    caught = []

    def keep(fig, path):
        caught.append(fig)
        fig.savefig(path, dpi=60)

    monkeypatch.setattr(plots, "save_figure", keep)
    yield caught
    import matplotlib.pyplot as plt

    for fig in caught:
        plt.close(fig)


def test_smooth_interval_and_seed_band():
    assert plots.smooth([1.0, 2.0, 3.0, 10.0], 1) == [1.0, 2.0, 3.0, 10.0]
    assert plots.smooth([1.0, 2.0, 3.0, 10.0], 3) == [1.5, 2.0, 5.0, 6.5]  # the ends average what exists
    with pytest.raises(ValueError, match="window=0"):
        plots.smooth([1.0], 0)
    assert plots.smoothing_window(plots.SMOOTH_ABOVE) == 1 and plots.smoothing_window(120) == 11
    assert mean_interval([0.4]) == (0.4, 0.4, 0.4)
    assert mean_interval([0.4, 0.6]) == (0.5, 0.4, 0.6)  # two seeds: their range
    mean, low, high = mean_interval([0.5, 0.6, 0.7])  # t_{0.975,2} = 4.303, sd 0.1
    assert mean == pytest.approx(0.6) and high - mean == pytest.approx(4.3027 * 0.1 / math.sqrt(3), abs=1e-4)
    assert low == pytest.approx(2 * mean - high)
    steps, mean, low, high = plots.seed_band([{0: 0.2, 10: 0.4}, {0: 0.4, 10: 0.6, 20: 0.9}])
    assert steps == [0, 10, 20] and mean == pytest.approx([0.3, 0.5, 0.9])
    assert low == pytest.approx([0.2, 0.4, 0.9]) and high == pytest.approx([0.4, 0.6, 0.9])
    noisy = plots.curve([{s: float(s % 2) for s in range(40)}])  # 40 alternating steps: smoothed
    assert noisy.window == 3 and max(noisy.mean[1:-1]) < 0.7 and min(noisy.mean[1:-1]) > 0.3


def _forest_rows():
    return [
        ForestRow("reward_mix=correct", 0.0, None, None, "reference (best)"),
        ("reward_mix=format_correct", -0.01, -0.06, 0.04, "indistinguishable"),  # a plain tuple works too
        ForestRow("reward_mix=format", -0.29, -0.34, -0.25, "worse"),
        ForestRow("reward_mix=long", 0.08, 0.02, 0.14, "better"),
        ForestRow("reward_mix=half", None, None, None, "incomplete (missing seeds 4, 5)"),
        ForestRow("reward_mix=one", -0.02, None, None, "no verdict"),
    ]


def test_forest_plot_draws_each_difference_with_its_interval(tmp_path, figures):
    path = tmp_path / "forest.png"
    title = plots.forest_plot(_forest_rows(), path, interval_text="95% family-wise interval")
    assert title.startswith("Difference from the reference per configuration, 95% family-wise interval")
    [fig] = figures
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    ys = list(ax.get_yticks())
    assert [label for _, label in sorted(zip(ys, labels), reverse=True)] == [r[0] for r in _forest_rows()]  # top down
    bars = {}
    for container in ax.containers:  # one errorbar per row with an interval: (point, caps, bar)
        (x,), (y,) = container.lines[0].get_data()
        segment = container.lines[2][0].get_segments()[0]
        bars[labels[ys.index(round(y))]] = (x, segment[0][0], segment[1][0])
    assert bars == {
        "reward_mix=format_correct": pytest.approx((-0.01, -0.06, 0.04)),
        "reward_mix=format": pytest.approx((-0.29, -0.34, -0.25)),
        "reward_mix=long": pytest.approx((0.08, 0.02, 0.14)),
    }
    notes = {t.get_text(): t.get_color() for t in ax.texts}
    assert notes["reference"] == "black"
    assert notes["-0.290 [-0.340, -0.250]  worse"] == "tab:red"
    assert notes["+0.080 [+0.020, +0.140]  better"] == "tab:green"
    assert "incomplete (missing seeds 4, 5)" in notes and "-0.020 (no interval)  no verdict" in notes
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"] == [0.0]  # the zero line
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 100 and image.std() > 0


def test_forest_plot_keeps_every_verdict_when_it_must_leave_rows_out(tmp_path, figures):
    rows = [ForestRow("ref", 0.0, None, None, "reference")]
    rows += [ForestRow(f"c{i:02d}", -0.01, -0.05, 0.03, "indistinguishable") for i in range(60)]
    rows += [ForestRow("bad", -0.3, -0.4, -0.2, "worse")]  # last in the given order
    title = plots.forest_plot(rows, tmp_path / "f.png", max_rows=10)
    assert "(10 of 62 configurations" in title
    labels = [t.get_text() for t in figures[0].axes[0].get_yticklabels()]
    assert len(labels) == 10 and "ref" in labels and "bad" in labels and "c00" in labels and "c09" not in labels


def test_forest_plot_rejects_an_upside_down_interval_and_draws_nothing_for_no_rows(tmp_path):
    with pytest.raises(ValueError, match="'x' has low=0.2 > high=0.1"):
        plots.forest_plot([("x", 0.15, 0.2, 0.1, "better")], tmp_path / "f.png")
    assert plots.forest_plot([], tmp_path / "f.png") is None and not (tmp_path / "f.png").exists()


def _run(tmp_path, name, rows, params=None, val=None, test=None):
    run = tmp_path / name
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return RunPoint(run, params or {}, val, test)


def test_validation_curves_are_the_mean_over_seeds_with_a_band(tmp_path, figures):
    a = [
        _run(
            tmp_path,
            f"a{s}",
            [
                {"step": 0, "val/accuracy": 0.3},
                {"step": 5, "val/accuracy": 0.4 + 0.1 * s},
                {"step": 5, "train_runtime": 1.0, "val/accuracy": 9.0},
            ],
        )
        for s in range(3)
    ]
    b = [_run(tmp_path, "b0", [{"step": 0, "val/accuracy": 0.3}, {"step": 5, "val/accuracy": 0.35}])]
    configs = [ConfigRuns("reward_mix=a", a), ConfigRuns("reward_mix=b", b)]
    series = {c.label: [plots.read_series(r.dir, [plots.VAL_KEY])[0][plots.VAL_KEY] for r in c.runs] for c in configs}
    assert series["reward_mix=a"][2] == pytest.approx({0: 0.3, 5: 0.6})  # the end-of-training row is not an evaluation
    curves = {label: plots.curve(runs) for label, runs in series.items()}
    assert curves["reward_mix=a"].window == 1  # 2 evaluations: nothing to smooth
    title = plots.plot_val_accuracy(configs, curves, tmp_path / "v.png")
    assert title.startswith("Validation accuracy during training (mean over seeds; band: 95% t-interval")
    ax = figures[0].axes[0]
    lines = {line.get_label(): line for line in ax.lines}
    assert list(lines["#1 reward_mix=a (3 seeds)"].get_ydata()) == pytest.approx([0.3, 0.5])
    assert list(lines["#2 reward_mix=b"].get_ydata()) == pytest.approx([0.3, 0.35])
    [band] = ax.collections  # config a's band only: b has one seed, a's step 0 has no spread
    ys = band.get_paths()[0].vertices[:, 1]
    half = 4.3027 * 0.1 / math.sqrt(3)
    assert max(ys) == pytest.approx(0.5 + half, abs=1e-4) and min(ys) == pytest.approx(0.5 - half, abs=1e-4)
    assert min(abs(y - 0.3) for y in ys) < 1e-9  # at step 0 the band closes on the mean
    assert plots.plot_val_accuracy(configs, {}, tmp_path / "none.png") is None
    assert plots.curve([{}, {}]) is None
    assert plots.plot_val_accuracy(configs, {"reward_mix=a": None}, tmp_path / "none.png") is None


def test_each_reward_term_gets_its_own_panel_and_only_the_configurations_that_use_it(tmp_path, figures):
    def rows(terms):
        return [{"step": s, **{f"rewards/{t}/mean": v * s for t, v in terms.items()}} for s in range(1, 4)]

    configs = [
        ConfigRuns("mix=both", [_run(tmp_path, "0", rows({"format": 1.0, "correct": 0.1}))]),
        ConfigRuns("mix=format", [_run(tmp_path, "1", rows({"format": 0.5}))]),
    ]
    names = ["correct", "format", "unused"]
    keys = [f"rewards/{n}/mean" for n in names]
    curves = {}
    for config in configs:
        got = [plots.read_series(run.dir, keys)[0] for run in config.runs]
        curves[config.label] = {name: plots.curve(one[f"rewards/{name}/mean"] for one in got) for name in names}
    assert curves["mix=format"]["correct"] is None
    title = plots.plot_reward_terms(configs, names, curves, tmp_path / "r.png")
    assert "one panel per term on its own scale" in title
    panels = [ax for ax in figures[0].axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["rewards/correct/mean", "rewards/format/mean"]  # unused: no panel
    correct, fmt = panels
    assert [line.get_label() for line in correct.lines] == ["#1 mix=both"]
    assert sorted(line.get_label() for line in fmt.lines) == ["#1 mix=both", "#2 mix=format"]
    assert correct.get_ylim()[1] < 0.5 < fmt.get_ylim()[1]  # each term on its own y scale


def test_a_scheduled_weight_is_drawn_dashed_on_its_terms_panel_and_a_constant_one_is_not(tmp_path, figures):
    def rows(fmt_weights):
        return [
            {
                "step": s,
                "rewards/format/mean": 0.5,
                "rewards/correct/mean": 0.1 * s,
                "reward_weights/format": w,
                "reward_weights/correct": 2.0,
            }
            for s, w in enumerate(fmt_weights, 1)
        ]

    configs = [
        ConfigRuns("end=0", [_run(tmp_path, "0", rows([1.0, 0.5, 0.0]))]),
        ConfigRuns("plain", [_run(tmp_path, "1", [{"step": s, "rewards/format/mean": 0.4} for s in (1, 2, 3)])]),
    ]
    plotted = plots.write_plots(configs, ["format", "correct"], tmp_path / "plots")
    title = dict((path, title) for title, path in plotted)["plots/reward_terms.png"]
    assert title.endswith("; dashed, a scheduled term's weight")
    fmt, correct, *twins = figures[-1].axes
    assert (fmt.get_title(), correct.get_title()) == ("rewards/format/mean", "rewards/correct/mean")
    [twin] = twins  # correct's weight stayed 2.0: no second axis there
    assert twin.get_ylabel() == "weight (dashed)" and twin.get_position().bounds == fmt.get_position().bounds
    [dashed] = twin.lines  # the scheduled configuration's; the plain one logged no weight
    assert list(dashed.get_ydata()) == [1.0, 0.5, 0.0] and dashed.get_linestyle() == "--"


def test_a_categorical_parameter_gets_points_and_error_bars_never_a_line_between_values(tmp_path, figures):
    runs = [
        RunPoint(tmp_path / f"r{i}", {"reward_mix": mix, "trainer.seed": seed}, val, val - 0.05)
        for i, (mix, seed, val) in enumerate(
            [("format", 1, 0.3), ("format", 2, 0.34), ("correct", 1, 0.6), ("correct", 2, 0.62), ("correct", 3, 0.64)]
        )
    ]
    title = plots.plot_by_parameter("reward_mix", runs, tmp_path / "p.png", highlight=[4])
    assert title == "Validation and test accuracy vs reward_mix (points: runs; error bars: mean and 95% t-interval)"
    val_ax, test_ax = figures[0].axes
    assert [t.get_text() for t in val_ax.get_xticklabels()] == ["correct", "format"]
    for ax in (val_ax, test_ax):
        joined = [line for line in ax.lines if len(line.get_xdata()) > 1 and line.get_linestyle() not in ("None", "")]
        assert not joined  # nothing connects one category's mean to the next
    [bars] = val_ax.containers
    assert list(bars.lines[0].get_ydata()) == pytest.approx([0.62, 0.32])
    segments = bars.lines[2][0].get_segments()
    half = 4.3027 * 0.02 / math.sqrt(3)  # correct: 3 runs, sd 0.02; format: 2 runs, their range
    assert [s[0][1] for s in segments] == pytest.approx([0.62 - half, 0.30], abs=1e-4)
    assert [s[1][1] for s in segments] == pytest.approx([0.62 + half, 0.34], abs=1e-4)
    assert test_ax.get_ylabel() == "test accuracy"


def test_write_plots_skips_seeds_and_removes_plots_an_earlier_report_drew(tmp_path):
    out = tmp_path / "plots"
    out.mkdir()
    (out / "reward_curves.png").write_bytes(b"old")
    runs = [
        _run(
            tmp_path,
            f"r{i}",
            [{"step": 0, "val/accuracy": 0.3}, {"step": 1, "reward": 1.0, "rewards/format/mean": 1.0}],
            {"reward_mix": mix, "trainer.seed": i},
            0.3,
            0.3,
        )
        for i, mix in enumerate(["a", "b"])
    ]
    made = plots.write_plots(
        [ConfigRuns("reward_mix=a", runs[:1]), ConfigRuns("reward_mix=b", runs[1:])],
        ["format"],
        out,
        [("reward_mix=a", 0.0, None, None, "reference (best)"), ("reward_mix=b", 0.0, -0.1, 0.1, "indistinguishable")],
        is_seed=lambda key: key.endswith("seed"),
    )
    assert [rel for _, rel in made] == [
        "plots/forest.png",
        "plots/val_accuracy.png",
        "plots/reward_terms.png",
        "plots/accuracy_vs_reward_mix.png",
    ]
    assert sorted(p.name for p in out.iterdir()) == [
        "accuracy_vs_reward_mix.png",
        "forest.png",
        "reward_terms.png",
        "val_accuracy.png",
    ]


def test_labels_keep_the_part_that_tells_configurations_apart():
    short = plots.abbreviate(
        [
            "reward_mix=smoke lora.r=32 optimizer.learning_rate=0.0001",
            "reward_mix=smoke lora.r=32 optimizer.learning_rate=0.0003",
        ]
    )
    assert (
        short("reward_mix=smoke lora.r=32 optimizer.learning_rate=0.0003")
        == "reward_mix=smoke r=32 learning_rate=0.0003"
    )
    clash = plots.abbreviate(["model.lr=1 optimizer.lr=2"])  # two keys end in lr: both stay whole
    assert clash("model.lr=1 optimizer.lr=2") == "model.lr=1 optimizer.lr=2"


def test_a_studys_sampled_parameter_is_on_a_continuous_axis_against_the_studys_own_objective(tmp_path, figures):
    # four trials: few enough values that a grid's parameter would get a slot each; a sampled one has no slots
    runs = [
        RunPoint(tmp_path / f"t{i}", {"reward_mix.correct.weight": w, "trainer.learning_rate": lr}, val, val - 0.1)
        for i, (w, lr, val) in enumerate([(0.12, 1e-6, 0.4), (0.37, 3e-5, 0.5), (0.81, 2e-4, 0.7), (0.55, 9e-6, 0.6)])
    ]
    metric = ("val_rewards.xmlcount", "test_rewards.xmlcount")
    title = plots.plot_by_parameter(
        "reward_mix.correct.weight", runs, tmp_path / "w.png", metric=metric, scale="linear"
    )
    assert title == "val_rewards.xmlcount and test_rewards.xmlcount vs reward_mix.correct.weight (points: runs)"
    val_ax, test_ax = figures[0].axes
    assert (val_ax.get_ylabel(), test_ax.get_ylabel()) == metric
    assert val_ax.get_xscale() == "linear"
    assert sorted(val_ax.collections[0].get_offsets()[:, 0]) == pytest.approx([0.12, 0.37, 0.55, 0.81])  # the values
    plots.plot_by_parameter("trainer.learning_rate", runs, tmp_path / "lr.png", metric=metric, scale="log")
    assert figures[1].axes[0].get_xscale() == "log"
