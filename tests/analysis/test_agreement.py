"""Every agreement figure against a published worked example or an independent computation."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from jurist.analysis.agreement import (Estimate, Ratings, agreement, alpha_rows, bootstrap_items, cohen_kappa,
                                       confusion_matrix, kappa_rows, kendall, kendall_rows, kappa_from_matrix,
                                       krippendorff_alpha, spearman, spearman_rows)

CATS = [1, 2, 3, 4, 5]


def _random_pairs(seed: int, n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, n)
    b = np.clip(a + rng.integers(-2, 3, n), 1, 5)
    return a, b


def test_unweighted_kappa_worked_example():
    # The worked example of Wikipedia's "Cohen's kappa" article: 50 proposals read by two readers,
    # 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no: p_o = 0.7, p_e = 0.5, kappa = 0.4.
    m = np.array([[20, 5], [10, 15]])
    assert kappa_from_matrix(m) == pytest.approx(0.4)
    # the same ratings as lists give the same matrix
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert confusion_matrix(a, b, [1, 0]).tolist() == m.tolist()
    assert cohen_kappa(a, b, [1, 0]) == pytest.approx(0.4)


@pytest.mark.parametrize("seed", range(5))
def test_quadratic_kappa_equals_lins_concordance(seed):
    # Quadratically weighted kappa equals the concordance correlation computed with 1/n moments
    # (Fleiss & Cohen 1973; Schuster 2004, Educ. Psychol. Meas. 64(2)): 2 s_ab / (s_a^2 + s_b^2 + (mean a - mean b)^2).
    a, b = _random_pairs(seed)
    s_ab = np.mean((a - a.mean()) * (b - b.mean()))
    ccc = 2 * s_ab / (a.var() + b.var() + (a.mean() - b.mean()) ** 2)
    assert cohen_kappa(a, b, CATS, "quadratic") == pytest.approx(ccc)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weights,distance", [("none", lambda x, y: (x != y) * 1.0),
                                              ("linear", lambda x, y: np.abs(x - y) / 4),
                                              ("quadratic", lambda x, y: ((x - y) / 4) ** 2)])
def test_weighted_kappa_from_pairs(seed, weights, distance):
    # kappa_w = 1 - observed disagreement / disagreement by chance, the chance term taken over
    # every (a_i, b_j) cross pair: the definition, computed from the raw ratings, not a matrix.
    a, b = _random_pairs(seed)
    observed = np.mean(distance(a, b))
    chance = np.mean(distance(a[:, None], b[None, :]))
    assert cohen_kappa(a, b, CATS, weights) == pytest.approx(1 - observed / chance)


def test_kappa_is_undefined_without_chance_disagreement():
    assert np.isnan(cohen_kappa([3, 3, 3], [3, 3, 3], CATS))
    assert cohen_kappa([1, 2, 3], [1, 2, 3], CATS, "quadratic") == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(5))
def test_spearman_is_pearson_of_average_ranks(seed):
    a, b = _random_pairs(seed)
    expected = np.corrcoef(stats.rankdata(a), stats.rankdata(b))[0, 1]
    assert spearman(a, b) == pytest.approx(expected)


def _tau_b(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b from its definition (Kendall 1945): (C - D) / sqrt((P - T_a)(P - T_b))."""
    concordant = discordant = ties_a = ties_b = pairs = 0
    for i, j in combinations(range(len(a)), 2):
        pairs += 1
        da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
        ties_a += da == 0
        ties_b += db == 0
        if da * db > 0:
            concordant += 1
        elif da * db < 0:
            discordant += 1
    return (concordant - discordant) / np.sqrt((pairs - ties_a) * (pairs - ties_b))


@pytest.mark.parametrize("seed", range(5))
def test_kendall_tau_b_from_its_definition(seed):
    a, b = _random_pairs(seed, n=40)
    assert kendall(a, b) == pytest.approx(_tau_b(a, b))


def test_rank_correlations_of_constant_ratings_are_undefined():
    assert np.isnan(spearman([2, 2, 2], [1, 2, 3]))
    assert np.isnan(kendall([2, 2, 2], [1, 2, 3]))


def test_krippendorff_alpha_worked_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers,
    # twelve units, missing values; the paper gives alpha 0.743 (nominal), 0.815 (ordinal), 0.849 (interval).
    nan = np.nan
    data = np.array([[1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
                     [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
                     [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
                     [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan]])
    assert krippendorff_alpha(data, CATS, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, CATS, "ordinal") == pytest.approx(0.815, abs=5e-4)
    assert krippendorff_alpha(data, CATS, "interval") == pytest.approx(0.849, abs=5e-4)


def test_krippendorff_alpha_undefined_without_pairable_values():
    assert np.isnan(krippendorff_alpha(np.array([[1.0, np.nan], [np.nan, 2.0]]), CATS))
    assert np.isnan(krippendorff_alpha(np.array([[3.0, 3.0], [3.0, 3.0]]), CATS))


def test_bootstrap_interval_of_a_mean_matches_a_plain_resampling():
    # One value per item: the item bootstrap of the mean is the textbook percentile bootstrap
    # (Efron & Tibshirani 1993, ch. 13), here done by hand with numpy.
    rng = np.random.default_rng(1)
    x = rng.normal(2.0, 1.0, 80)
    est = bootstrap_items(lambda idx: float(np.mean(x[idx])), len(x), resamples=4000, seed=3)
    draws = np.random.default_rng(7).integers(0, len(x), (4000, len(x)))
    low, high = np.percentile(x[draws].mean(axis=1), [2.5, 97.5])
    assert est.value == pytest.approx(np.mean(x), abs=1e-4)
    assert est.low == pytest.approx(low, abs=0.05) and est.high == pytest.approx(high, abs=0.05)
    assert est.low < est.value < est.high


def _ratings() -> Ratings:
    # twelve items, two annotators who differ by one now and then, a judge that is kinder
    ana = [5, 1, 3, 2, 1, 4, 1, 1, 1, 3, 1, 1]
    ben = [5, 1, 4, 2, 2, 4, 2, 1, 1, 3, 1, 1]
    judge = [5, 2, 4, 3, 1, 5, 2, 1, 2, 4, None, 1]
    return Ratings(items=[f"s{i}" for i in range(12)], judge=judge,
                   humans=[{"ana": a, "ben": b} for a, b in zip(ana, ben)], categories=CATS)


def test_agreement_pairs_each_annotator_with_the_judge():
    r = _ratings()
    report = agreement("mechanism", r, resamples=200)
    judged = [i for i, j in enumerate(r.judge) if j is not None]
    j = np.array([r.judge[i] for i in judged for _ in ("ana", "ben")])
    h = np.array([r.humans[i][a] for i in judged for a in ("ana", "ben")])
    jv = report.judge_vs_humans
    assert jv.n == 22 and np.sum(jv.confusion) == 22
    assert jv.exact.value == pytest.approx(np.mean(j == h), abs=1e-4)
    assert jv.within_one.value == pytest.approx(np.mean(np.abs(j - h) <= 1), abs=1e-4)
    assert jv.mean_bias.value == pytest.approx(np.mean(j - h), abs=1e-4)
    assert jv.spearman.value == pytest.approx(stats.spearmanr(j, h).statistic, abs=1e-4)
    assert jv.kendall.value == pytest.approx(stats.kendalltau(j, h).statistic, abs=1e-4)
    assert jv.weighted_kappa.value == pytest.approx(cohen_kappa(j, h, CATS, "quadratic"), abs=1e-4)
    for est in (jv.exact, jv.weighted_kappa, jv.spearman, jv.mean_bias, report.alpha):
        assert est.low is not None and est.high is not None and est.low <= est.value <= est.high


def test_agreement_among_annotators_is_the_ceiling():
    r = _ratings()
    report = agreement("mechanism", r, resamples=0)
    ana = np.array([h["ana"] for h in r.humans])
    ben = np.array([h["ben"] for h in r.humans])
    assert report.humans.n == 12
    assert report.humans.exact.value == pytest.approx(np.mean(ana == ben), abs=1e-4)
    assert report.humans.weighted_kappa.value == pytest.approx(cohen_kappa(ana, ben, CATS, "quadratic"), abs=1e-4)
    assert report.humans.exact.low is None  # no resamples, no interval
    import krippendorff

    judge = [np.nan if j is None else j for j in r.judge]
    assert report.alpha.value == pytest.approx(krippendorff.alpha(
        reliability_data=[ana, ben, judge], value_domain=CATS, level_of_measurement="ordinal"), abs=1e-4)
    assert report.alpha_humans.value == pytest.approx(krippendorff.alpha(
        reliability_data=[ana, ben], value_domain=CATS, level_of_measurement="ordinal"), abs=1e-4)
    assert report.to_json()["judge_vs_humans"]["exact"]["value"] == report.judge_vs_humans.exact.value


def test_bootstrap_leaves_out_resamples_where_a_figure_is_undefined():
    # a judge that gives one score to all but three items: about 4% of the resamples hold
    # only that score, where Spearman's rho is undefined; the interval is over the others
    judge = np.array([1] * 17 + [5, 4, 5])
    human = np.array([1, 2] * 8 + [2, 5, 4, 4])
    est = bootstrap_items(lambda idx: spearman(judge[idx], human[idx]), 20, resamples=500)
    assert est.value == pytest.approx(spearman(judge, human), abs=1e-4)
    assert est.low is not None and est.low <= est.value <= est.high
    never = bootstrap_items(lambda idx: spearman(judge[idx], human[idx]) if len(set(idx)) > 19 else np.nan, 20,
                            resamples=200)
    assert never.value is not None and never.low is None and never.high is None


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == pytest.approx(b, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_figures_of_many_confusion_matrices_at_once_match_the_pairs(seed):
    """kappa_rows, spearman_rows and kendall_rows on a stack of matrices give what the one-pair-list
    functions give on each matrix's pairs, the undefined ones (one category, no pairs) included."""
    rng = np.random.default_rng(seed)
    for size in (0, 1, 2, 3, 8, 40):
        a = rng.integers(1, 6, (30, size))
        b = np.clip(a + rng.integers(-1, 2, (30, size)), 1, 5)
        b[:5] = 3  # constant second ratings: no rank correlation
        matrices = np.array([confusion_matrix(x, y, CATS) for x, y in zip(a, b)])
        for weights in ("none", "linear", "quadratic"):
            for got, (x, y) in zip(kappa_rows(matrices, weights), zip(a, b)):
                assert _same(got, cohen_kappa(x, y, CATS, weights))
        for got, (x, y) in zip(spearman_rows(matrices), zip(a, b)):
            assert _same(got, spearman(x, y))
        for got, (x, y) in zip(kendall_rows(matrices), zip(a, b)):
            assert _same(got, kendall(x, y))


def _reference(r: Ratings, resamples: int, seed: int = 0) -> dict[str, dict[str, Estimate]]:
    """The figures one resample at a time (scipy's bootstrap calling the one-pair-list functions)."""
    n, cats = len(r.items), r.categories
    figures = {
        "exact": lambda a, b: float(np.mean(a == b)) if len(a) else float("nan"),
        "within_one": lambda a, b: float(np.mean(np.abs(a - b) <= 1)) if len(a) else float("nan"),
        "kappa": lambda a, b: cohen_kappa(a, b, cats, "none"),
        "weighted_kappa": lambda a, b: cohen_kappa(a, b, cats, "quadratic"),
        "spearman": spearman, "kendall": kendall,
        "mean_bias": lambda a, b: float(np.mean(a.astype(float) - b)) if len(a) else float("nan"),
    }
    out = {}
    for side, pairs in (("judge_vs_humans", r.judge_pairs), ("humans", r.human_pairs)):
        out[side] = {name: bootstrap_items(lambda idx, fn=fn: fn(*pairs(idx)), n, resamples=resamples, seed=seed)
                     for name, fn in figures.items()}
    out["alpha"] = {w: bootstrap_items(lambda idx, w=w: krippendorff_alpha(r.reliability(idx, with_judge=w == "judge"),
                                                                          cats), n, resamples=resamples, seed=seed)
                    for w in ("judge", "humans")}
    return out


@pytest.mark.parametrize("seed", range(4))
def test_agreement_intervals_match_one_resample_at_a_time(seed):
    """agreement() computes every figure on all resamples at once: the same values and intervals
    as scipy's bootstrap calling the figure once per resample, on the same resamples."""
    rng = np.random.default_rng(seed)
    n = 15
    judge = [None if rng.random() < 0.1 else int(v) for v in rng.integers(1, 6, n)]
    humans = []
    for _ in range(n):
        rated = {a: int(rng.integers(1, 6)) for a in ("ana", "ben", "cy") if rng.random() < 0.8}
        humans.append(rated or {"ana": 3})
    r = Ratings(items=[f"i{k}" for k in range(n)], judge=judge, humans=humans, categories=CATS)
    report = agreement("r", r, resamples=300, seed=seed)
    expected = _reference(r, 300, seed)
    for side in ("judge_vs_humans", "humans"):
        got = getattr(report, side)
        for name, est in expected[side].items():
            assert getattr(got, name) == est, (side, name)
    assert report.alpha == expected["alpha"]["judge"] and report.alpha_humans == expected["alpha"]["humans"]


def test_alpha_of_coincidence_matrices_matches_the_package():
    import krippendorff

    r = _ratings()
    for with_judge in (True, False):
        [got] = alpha_rows(r.coincidences(with_judge=with_judge).sum(axis=0)[np.newaxis])
        rows = r.reliability(np.arange(len(r.items)), with_judge=with_judge)
        assert got == pytest.approx(krippendorff.alpha(reliability_data=rows, value_domain=CATS,
                                                       level_of_measurement="ordinal"), abs=1e-12)
