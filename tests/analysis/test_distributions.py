"""jurist.analysis.distributions against the scipy.stats calls it stands in for."""

from __future__ import annotations

import math
import os
import random

import numpy as np
import pytest

from jurist.analysis import distributions as d

if os.environ.get("CI"):  # in CI the test extra is installed: a missing scipy fails here
    from scipy import stats
else:
    stats = pytest.importorskip("scipy.stats")  # in the test extra, not a dependency of jurist


def test_t_tail_and_quantile_match_scipy() -> None:
    for df in (1, 1.5, 2, 3.7, 5, 9, 19, 30.25, 100, 1000):
        for t in (-40.0, -3.0, -0.7, 0.0, 0.3, 1.0, 2.2, 6.0, 25.0):
            assert d.t_sf(t, df) == pytest.approx(float(stats.t.sf(t, df)), rel=1e-10, abs=1e-300)
        for q in (0.5, 0.6, 0.9, 0.95, 0.975, 0.995, 0.9999, 0.025):
            assert d.t_ppf(q, df) == pytest.approx(float(stats.t.ppf(q, df)), rel=1e-9, abs=1e-12)
    assert d.t_sf(math.inf, 3) == 0.0 and d.t_sf(-math.inf, 3) == 1.0
    with pytest.raises(ValueError):
        d.t_ppf(1.0, 3)


def test_t_tests_match_ttest_rel_and_welch() -> None:
    rng = random.Random(7)
    for n in (2, 3, 8, 40):
        a = np.array([rng.gauss(3, 1) for _ in range(n)])
        b = a + np.array([rng.gauss(0.4, 0.8) for _ in range(n)])
        diff = b - a
        t = diff.mean() / (diff.std(ddof=1) / math.sqrt(n))
        assert d.two_sided_t_p(t, n - 1) == pytest.approx(float(stats.ttest_rel(b, a).pvalue), rel=1e-9)
        c = np.array([rng.gauss(3.5, 2) for _ in range(n + 3)])
        va, vc = a.var(ddof=1) / n, c.var(ddof=1) / len(c)
        df = (va + vc) ** 2 / (va**2 / (n - 1) + vc**2 / (len(c) - 1))
        t = (c.mean() - a.mean()) / math.sqrt(va + vc)
        welch = stats.ttest_ind(c, a, equal_var=False).pvalue
        assert d.two_sided_t_p(t, df) == pytest.approx(float(welch), rel=1e-9)


@pytest.mark.parametrize("sizes", [(3, 5), (8, 40), (1, 9), (9, 9), (12, 30), (40, 200), (5, 600)])
@pytest.mark.parametrize("ties", [False, True])
def test_mann_whitney_matches_scipy(sizes: tuple[int, int], ties: bool) -> None:
    rng = random.Random(sum(sizes) + ties)
    draw = (lambda mu: round(rng.gauss(mu, 1), 0)) if ties else (lambda mu: rng.gauss(mu, 1))
    x = [draw(0.0) for _ in range(sizes[0])]
    y = [draw(0.6) for _ in range(sizes[1])]
    u, p = d.mann_whitney_less(x, y)
    ref = stats.mannwhitneyu(x, y, alternative="less")
    assert u == float(ref.statistic)
    assert p == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-15)


def test_mann_whitney_all_tied_and_exact_extremes() -> None:
    assert d.mann_whitney_less([1.0, 1.0], [1.0, 1.0, 1.0]) == (3.0, 1.0)
    u, p = d.mann_whitney_less([0.1, 0.2], [0.5, 0.6, 0.7])  # x entirely lower: 1 ordering in C(5, 2)
    assert (u, p) == (0.0, pytest.approx(1 / 10))
    assert d._u_counts(2, 3) == [1, 1, 2, 2, 2, 1, 1]  # U of 2 against 3: 10 orderings


def test_benjamini_hochberg_matches_scipy() -> None:
    rng = random.Random(3)
    ps = [rng.random() ** 3 for _ in range(50)] + [0.5, 0.5, 1.0]
    assert d.benjamini_hochberg(ps) == pytest.approx(list(stats.false_discovery_control(ps, method="bh")), rel=1e-12)
    assert d.benjamini_hochberg([]) == []
