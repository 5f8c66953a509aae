"""The paired statistics: the bootstrap interval, Wilcoxon, the sign test and Benjamini-Hochberg."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from jurist.analysis.paired import (MIN_PAIRS, NOT_ENOUGH, adjust, differences, mean_difference, sign_test,
                                    wilcoxon_signed_rank)


def test_differences_are_b_minus_a_with_float_noise_set_to_zero():
    d = differences([0.1 + 0.2, 4.0, 3.0], [0.3, 3.0, 5.0])
    assert d.tolist() == [0.0, -1.0, 2.0]
    with pytest.raises(ValueError):
        differences([1.0], [1.0, 2.0])


def test_wilcoxon_is_scipys_two_sided_test():
    d = np.array([-2.0, -1.0, -1.5, -3.0, 0.5, -1.0, -2.5, -0.25, -1.75, -0.75])
    got = wilcoxon_signed_rank(d)
    assert got.p_value == pytest.approx(float(stats.wilcoxon(d).pvalue))
    assert got.p_value < 0.05 and got.pairs == 10 and got.note is None


def test_unchanged_pairs_are_named_and_no_change_is_p_one():
    d = np.array([0.0, -1.0, -1.0, -2.0, 0.0, -1.0, -3.0])
    got = wilcoxon_signed_rank(d)
    assert got.p_value == pytest.approx(float(stats.wilcoxon(d, zero_method="wilcox").pvalue))
    assert "2 pair(s) did not change" in (got.note or "")
    same = wilcoxon_signed_rank(np.zeros(12))
    assert same.p_value == 1.0 and same.note == "no pair differs"


def test_too_few_pairs_have_no_p_value():
    for n in range(MIN_PAIRS):
        got = wilcoxon_signed_rank(np.full(n, -2.0))
        assert got.p_value is None and got.note is not None and got.note.startswith(NOT_ENOUGH)
    # five pairs all lower: even then no two-sided test reaches 0.05, which is why there is none
    assert float(stats.wilcoxon(np.full(5, -2.0) - np.arange(5)).pvalue) > 0.05
    assert sign_test(5, 0, 5).p_value is None
    assert wilcoxon_signed_rank(np.arange(1.0, MIN_PAIRS + 1)).p_value is not None


def test_sign_test_is_the_exact_binomial_of_the_flips():
    got = sign_test(8, 0, 20)
    assert got.p_value == pytest.approx(2 * 0.5**8)
    assert "8 pass -> fail, 0 fail -> pass" in (got.note or "")
    assert sign_test(3, 3, 20).p_value == pytest.approx(1.0)
    none = sign_test(0, 0, 20)
    assert none.p_value == 1.0 and none.note == "no item flipped"


def test_bootstrap_interval_is_seeded_and_brackets_the_mean():
    rng = np.random.default_rng(3)
    d = rng.normal(-0.5, 1.0, 40)
    one, again, other = (mean_difference(d, resamples=1000, seed=s) for s in (7, 7, 8))
    assert one == again and one != other
    assert one.value == pytest.approx(round(float(d.mean()), 4))
    assert one.low is not None and one.high is not None and one.low < one.value < one.high
    # the percentile interval of the resampled means, as numpy computes it from the same draws
    idx = np.random.default_rng(7).integers(0, len(d), (1000, len(d)))
    means = d[idx].mean(axis=1)
    assert one.low == pytest.approx(np.percentile(means, 2.5), abs=1e-4)
    assert one.high == pytest.approx(np.percentile(means, 97.5), abs=1e-4)


def test_no_interval_below_the_minimum_and_no_value_without_pairs():
    assert mean_difference(np.array([-1.0, -2.0])).low is None
    assert mean_difference(np.array([-1.0, -2.0])).value == -1.5
    assert mean_difference(np.array([])).value is None


def test_benjamini_hochberg_skips_missing_p_values():
    raw = [0.01, None, 0.04, 0.03, None]
    got = adjust(raw)
    assert got[1] is None and got[4] is None
    expected = stats.false_discovery_control([0.01, 0.04, 0.03], method="bh")
    assert [got[0], got[2], got[3]] == pytest.approx(list(expected))
    assert adjust([None, None]) == [None, None] and adjust([]) == []


def test_the_resamples_are_those_of_agreement_and_need_no_dense_matrix():
    """The same draws as resample_counts (one seed, one stream), a block at a time: 2,000 resamples of
    100,000 items hold 1,000,000 draws at once, not 200,000,000."""
    from jurist.analysis.agreement import resample_counts

    d = np.random.default_rng(5).normal(0.2, 1.0, 300)
    counts = resample_counts(len(d), 500, seed=9)
    means = (counts @ d) / counts.sum(axis=1)
    got = mean_difference(d, resamples=500, seed=9, block=1000)  # three resamples at a time
    assert got == mean_difference(d, resamples=500, seed=9)  # one block: the same draws
    assert got.low == pytest.approx(np.percentile(means, 2.5), abs=1e-4)
    assert got.high == pytest.approx(np.percentile(means, 97.5), abs=1e-4)
    big = np.random.default_rng(1).normal(-0.01, 1.0, 100_000)
    est = mean_difference(big, resamples=200)
    assert est.low is not None and est.high is not None and est.low < est.value < est.high
