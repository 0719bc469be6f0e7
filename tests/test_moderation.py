"""The moderated verdicts (reading/moderation.py through stats.judge and stats.compare): seed pairing, the prior
borrowed across configurations, the simulated critical value, the spread warning, and the mode recorded where
verdicts are printed. The battery's cells for the mode are in tests/test_verdict_battery.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import polygamma
from scipy.stats import t

from grpo_sweep.reading import moderation, stats
from grpo_sweep.reading.stats import RunRecord, compare, judge


def test_the_prior_is_smyths_method_of_moments():
    """Equal chi-square variances give an infinite (capped) prior; widely scattered ones a small d0; and the
    trigamma inverse is exact to 1e-5 on and off its grid."""
    rng = np.random.default_rng(0)
    same = rng.chisquare(2, (2000, 50)) / 2
    s0, d0 = moderation.fit_prior(same, 2.0)
    assert np.median(d0) > 20 and np.median(s0) == pytest.approx(1.0, rel=0.1)
    scattered = same * np.exp(rng.normal(0, 1.5, (2000, 50)))
    assert np.median(moderation.fit_prior(scattered, 2.0)[1]) < 2
    y = np.array([1e-3, 0.3, 2.5, 40.0, 5e4])
    assert moderation._trigamma_inverse(polygamma(1, y)) == pytest.approx(y, rel=1e-5)
    # fewer than two units borrow nothing
    assert moderation.fit_prior(np.array([[np.nan, 0.5]]), 2.0)[1][0] == 0


def test_a_moderated_variance_is_never_below_its_own():
    s2 = np.array([[0.01, 1.0, 1.1, 0.9, 25.0]])
    moderated, df = moderation.moderate(s2, 2.0)
    assert (moderated >= s2).all() and moderated[0, -1] == 25.0 and moderated[0, 0] > 0.01 and df[0] > 2


def test_two_configurations_paired_is_the_paired_t():
    """k = 2, paired: one pair borrows nothing, and its critical value is Student's t at S - 1 exactly."""
    y = np.array([[[0.5], [0.6], [0.7]], [[0.4], [0.55], [0.6]]])
    j = judge(y, reference=0, mode="moderated", paired=True)
    diff = y[1, :, 0] - y[0, :, 0]
    assert j.se[1] == pytest.approx(diff.std(ddof=1) / np.sqrt(3))
    assert j.crit[1] == pytest.approx(t.ppf(0.975, 2), rel=1e-3)
    assert moderation.calibration(2, 3, 0.05, True) == 1.0


def test_pairing_removes_what_the_seeds_share():
    """Configurations that move together by seed: the paired standard error is far below the strict one, which
    treats the seeds as independent."""
    rng = np.random.default_rng(1)
    seed_luck = rng.normal(0, 0.1, 5)
    y = 0.6 + seed_luck[None, :, None] + rng.normal(0, 0.01, (4, 5, 1))
    y[0] += 0.03
    strict = judge(y, reference=0, mode="strict")
    moderated = judge(y, reference=0, mode="moderated", paired=True)
    assert (moderated.se[1:] < strict.se[1:] / 3).all()
    assert (moderated.call[1:] == -1).all() and (strict.call[1:] == 0).all()


def test_the_calibration_is_deterministic_kept_on_disk_and_falls_with_seeds(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_SWEEP_CACHE", str(tmp_path))
    moderation.calibration.cache_clear()
    simulated = moderation._simulate(5, 3, 0.05, True, 5)
    assert moderation.calibration(5, 3, 0.05, True) == simulated
    [kept] = tmp_path.glob("verdict-calibration-*.json")
    assert json.loads(kept.read_text()) == {"5 3 0.05 1 5": simulated}
    kept.write_text(json.dumps({"5 3 0.05 1 5": 9.0}))  # read back from disk, not simulated again
    moderation.calibration.cache_clear()
    assert moderation.calibration(5, 3, 0.05, True) == 9.0
    moderation.calibration.cache_clear()
    assert moderation.calibration(5, 6, 0.05, True) < simulated
    moderation.calibration.cache_clear()


def runs(values: dict, n: int | None = None) -> list[RunRecord]:
    return [RunRecord(seed=s, rank_value=v, value=v, n_questions=n) for s, v in values.items()]


def test_compare_records_the_mode_and_warns_on_a_spread_outside_the_family():
    rng = np.random.default_rng(3)
    groups = {f"c{i}": runs({s: 0.5 + rng.normal(0, 0.01) for s in range(1, 6)}) for i in range(6)}
    groups["wild"] = runs({s: 0.5 + rng.normal(0, 0.3) for s in range(1, 6)})
    rows = compare(groups)
    assert {row.design.mode for row in rows} == {"moderated"} and all(row.design.paired for row in rows)
    wild = next(row for row in rows if row.config == "wild")
    assert wild.spread is not None and wild.spread > 16
    from grpo_sweep.reading.wording import describe

    describe(rows)
    assert "WARNING: its run-to-run variance" in wild.note and "--verdicts strict" in wild.note
    assert "up to 4x noisier" in wild.method
    strict = compare(groups, mode="strict")
    assert {row.design.mode for row in strict} == {"strict"} and all(row.spread is None for row in strict)


def test_a_bad_mode_is_one_line_naming_it():
    with pytest.raises(ValueError, match=r"verdicts='lenient': use moderated or strict"):
        compare({"a": runs({1: 0.5, 2: 0.6})}, mode="lenient")


def test_verdicts_json_and_the_report_cli_say_which_mode_ran(tmp_path):
    from grpo_sweep.reading.results import SweepResults
    from grpo_sweep.sweeps import report
    from grpo_sweep.sweeps.sweep_end import write_verdicts
    from tests.test_report import make_seed_sweep

    make_seed_sweep(tmp_path)
    (tmp_path / "multirun.yaml").write_text("hydra:\n  sweeper:\n    verdicts: strict\n")
    results = SweepResults.read(tmp_path)
    assert results.verdicts == "strict"
    write_verdicts(results)
    record = json.loads((tmp_path / "verdicts.json").read_text())
    assert record["verdicts"] == "strict" and {c["verdicts"] for c in record["comparisons"]} == {"strict"}
    assert report.main([str(tmp_path), "--no-plots", "--verdicts", "moderated"]) == 0
    assert "moderated:" in (tmp_path / "report.md").read_text()
    assert SweepResults.read(tmp_path, verdicts="moderated").comparisons[1].design.mode == "moderated"


def test_the_seeds_sweeper_refuses_a_bad_mode_in_one_line():
    from grpo_sweep.search.seeds.sequential import Settings, check_settings, recorded_settings

    with pytest.raises(ValueError, match=r"hydra.sweeper.verdicts='loose': use moderated or strict"):
        check_settings(Settings(verdicts="loose"), 3)
    # a seeds.json written before the setting ran strict verdicts: replayed as such
    assert recorded_settings({"min_seeds": 2, "max_seeds": 8, "max_runs": None, "alpha": 0.05}).verdicts == "strict"
    assert stats.DEFAULT_VERDICTS == Settings().verdicts == "moderated"


def test_two_configurations_say_they_are_a_paired_t():
    from grpo_sweep.reading.wording import describe

    rows = describe(compare({"a": runs({1: 0.5, 2: 0.6, 3: 0.55}), "b": runs({1: 0.4, 2: 0.52, 3: 0.5})}))
    assert "the paired t over their 3 shared seeds, 2 df" in rows[1].method


def test_a_seeds_sweep_keeps_its_designs_mode_and_the_report_says_so(tmp_path, capsys):
    from grpo_sweep.sweeps import report
    from tests.test_next_seeds import seeds_sweep

    sweep = seeds_sweep(tmp_path / "sweep", {0: 2, 1: 2, 2: 2})
    assert report.main([str(sweep), "--no-plots", "--verdicts", "strict"]) == 0
    assert "--verdicts strict does not apply" in capsys.readouterr().err
