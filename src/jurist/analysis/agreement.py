"""Agreement between a judge and human raters on an ordinal scale.

Every figure is computed by a library (scipy, numpy, the ``krippendorff``
package) or, for Cohen's κ, from the confusion matrix by the published formula:

Cohen's weighted κ (Cohen 1968) over k ordered categories, observed proportions
``p_o[i, j]`` (the confusion matrix over its total) and the proportions expected
by chance ``p_e[i, j] = row_i * col_j`` (the product of the margins)::

    κ_w = 1 - Σ w[i, j] p_o[i, j] / Σ w[i, j] p_e[i, j]

with disagreement weights ``w[i, j] = 0`` on the diagonal and 1 elsewhere
(unweighted: Cohen 1960, ``κ = (p_o - p_e) / (1 - p_e)``), ``|i - j| / (k - 1)``
(linear) or ``((i - j) / (k - 1))²`` (quadratic, the usual choice for ordinal
scores; Fleiss & Cohen 1973 show it equals the intraclass correlation).

Intervals are percentile bootstrap intervals (:func:`scipy.stats.bootstrap`)
over the *items*: a resample draws items with replacement and keeps every
rating of a drawn item together, so items rated by several people are not
counted as independent. Resamples where a figure is undefined (all of one
side's ratings alike: no rank correlation) are left out of its interval; with
more than a tenth of them undefined the figure has no interval. :func:`agreement`
computes each figure on every resample at once, from the resample's confusion (or
coincidence) matrix, the sum of its items' matrices, on the resamples
:func:`scipy.stats.bootstrap` draws with the same seed: the values and intervals are
those of calling the one-list functions once per resample, in milliseconds.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any, Callable, Literal, Sequence

import krippendorff
import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

Weights = Literal["none", "linear", "quadratic"]

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
MIN_DEFINED = 0.9  # share of resamples where a figure must be defined for it to have an interval


def confusion_matrix(a: ArrayLike, b: ArrayLike, categories: Sequence[int]) -> np.ndarray:
    """Counts of (a, b) pairs: rows are ``a``'s categories, columns ``b``'s, in ``categories`` order."""
    index = {c: i for i, c in enumerate(categories)}
    m = np.zeros((len(categories), len(categories)), dtype=np.int64)
    for x, y in zip(np.asarray(a).tolist(), np.asarray(b).tolist(), strict=True):
        m[index[x], index[y]] += 1
    return m


def kappa_from_matrix(matrix: np.ndarray, weights: Weights = "none") -> float:
    """Cohen's κ (weighted: Cohen 1968) from a square confusion matrix; NaN when the chance
    disagreement is zero (every rating in one category)."""
    m = np.asarray(matrix, dtype=float)
    k = m.shape[0]
    total = m.sum()
    if total == 0 or k < 2:
        return float("nan")
    observed = m / total
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((k, k))
    if weights == "none":
        w = (i != j).astype(float)
    elif weights == "linear":
        w = np.abs(i - j) / (k - 1)
    elif weights == "quadratic":
        w = ((i - j) / (k - 1)) ** 2
    else:
        raise ValueError(f"weights must be none, linear or quadratic, not {weights!r}")
    chance = float((w * expected).sum())
    if chance == 0.0:
        return float("nan")
    return 1.0 - float((w * observed).sum()) / chance


def cohen_kappa(a: ArrayLike, b: ArrayLike, categories: Sequence[int], weights: Weights = "none") -> float:
    return kappa_from_matrix(confusion_matrix(a, b, categories), weights)


def _quiet(fn: Callable[[], Any]) -> Any:
    """Call a scipy statistic; constant input gives NaN (and a warning we do not print)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


def spearman(a: ArrayLike, b: ArrayLike) -> float:
    if np.size(a) < 2:
        return float("nan")
    return float(_quiet(lambda: stats.spearmanr(a, b).statistic))


def kendall(a: ArrayLike, b: ArrayLike) -> float:
    """Kendall's τ-b (ties in either ranking accounted for)."""
    if np.size(a) < 2:
        return float("nan")
    return float(_quiet(lambda: stats.kendalltau(a, b).statistic))


def krippendorff_alpha(reliability: np.ndarray, categories: Sequence[int],
                       level: Literal["nominal", "ordinal", "interval", "ratio"] = "ordinal") -> float:
    """Krippendorff's α over a raters × items matrix (NaN: not rated), by the ``krippendorff`` package."""
    data = np.asarray(reliability, dtype=float)
    pairable = (np.sum(~np.isnan(data), axis=0) >= 2)
    values = np.unique(data[:, pairable][~np.isnan(data[:, pairable])])
    if not pairable.any() or len(values) < 2:
        return float("nan")  # no two ratings of one item, or a single value: α is undefined
    return float(_quiet(lambda: krippendorff.alpha(reliability_data=data, value_domain=list(categories),
                                                    level_of_measurement=level)))


@dataclass
class Estimate:
    """A figure and its bootstrap interval (None where it cannot be estimated)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    def to_json(self) -> dict[str, float | None]:
        return asdict(self)


def _num(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 4)


def bootstrap_items(statistic: Callable[[np.ndarray], float], n_items: int, *, resamples: int = BOOTSTRAP_RESAMPLES,
                    seed: int = 0) -> Estimate:
    """``statistic(item_indices)`` on every item, with a percentile bootstrap 95% interval
    (:func:`scipy.stats.bootstrap`) over resamples of the items."""
    value = _num(statistic(np.arange(n_items)))
    if value is None or n_items < 2 or resamples <= 0:
        return Estimate(value)
    res = _quiet(lambda: stats.bootstrap(
        (np.arange(n_items),), lambda idx: statistic(np.asarray(idx, dtype=int)), vectorized=False,
        n_resamples=resamples, confidence_level=CONFIDENCE, method="percentile", rng=np.random.default_rng(seed)))
    if not np.isnan(res.confidence_interval.low):
        return Estimate(value, _num(res.confidence_interval.low), _num(res.confidence_interval.high))
    return _interval(value, res.bootstrap_distribution, resamples)


def resample_counts(n_items: int, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> np.ndarray:
    """How many times each item is drawn in each resample, (resamples × items): the resamples
    :func:`scipy.stats.bootstrap` draws for :func:`bootstrap_items` with the same ``seed``, so
    that figures computed on them all at once (:func:`bootstrap_rows`) get the same intervals.
    No rows with fewer than two items or no resamples."""
    if n_items < 2 or resamples <= 0:
        return np.zeros((0, n_items))
    idx = np.random.default_rng(seed).integers(0, n_items, (resamples, n_items))
    counts = np.zeros((resamples, n_items))
    np.add.at(counts, (np.arange(resamples)[:, np.newaxis], idx), 1)
    return counts


def bootstrap_rows(statistic: Callable[[np.ndarray], np.ndarray], counts: np.ndarray) -> Estimate:
    """:func:`bootstrap_items` for a statistic computed on every resample at once: ``statistic``
    takes (resamples × items) counts of each item's draws (:func:`resample_counts`) and gives one
    value per row; the figure itself is its value on every item once. The same interval and rule
    for undefined figures as :func:`bootstrap_items`, without a Python call per resample."""
    n_items = counts.shape[1]
    value = _num(float(statistic(np.ones((1, n_items)))[0]))
    if value is None or len(counts) == 0:
        return Estimate(value)
    return _interval(value, statistic(counts), len(counts))


def _interval(value: float, distribution: np.ndarray, resamples: int) -> Estimate:
    """``value`` with the percentile interval of its bootstrap ``distribution``."""
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(distribution, [tail, 100 - tail])
    if not np.isnan(low):
        return Estimate(value, _num(low), _num(high))
    # Some resamples left the figure undefined (a resample where one side is constant has no rank
    # correlation): the interval is over the others, if they are at least MIN_DEFINED of all.
    defined = distribution[np.isfinite(distribution)]
    if len(defined) < MIN_DEFINED * resamples:
        return Estimate(value)
    low, high = np.percentile(defined, [tail, 100 - tail])
    return Estimate(value, _num(low), _num(high))


def _divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0."""
    out = np.full(np.shape(num), np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


def kappa_rows(matrices: np.ndarray, weights: Weights = "none") -> np.ndarray:
    """:func:`kappa_from_matrix` of each of a stack of (k × k) confusion matrices."""
    m = np.asarray(matrices, dtype=float)
    k = m.shape[-1]
    if k < 2:
        return np.full(m.shape[0], np.nan)
    total = m.sum(axis=(1, 2))
    observed = m / np.where(total == 0, 1, total)[:, np.newaxis, np.newaxis]
    expected = observed.sum(axis=2)[:, :, np.newaxis] * observed.sum(axis=1)[:, np.newaxis, :]
    i, j = np.indices((k, k))
    w = {"none": (i != j).astype(float), "linear": np.abs(i - j) / (k - 1),
         "quadratic": ((i - j) / (k - 1)) ** 2}[weights]
    chance = (w * expected).sum(axis=(1, 2))
    kappa = 1.0 - _divide((w * observed).sum(axis=(1, 2)), chance)
    return np.where(total == 0, np.nan, kappa)


def spearman_rows(matrices: np.ndarray) -> np.ndarray:
    """Spearman's ρ of the pairs each (k × k) count matrix holds (rows: the first rating's
    categories, columns: the second's, both in ascending order): the correlation of their
    average ranks, as :func:`scipy.stats.spearmanr` computes it from the pairs."""
    m = np.asarray(matrices, dtype=float)
    total = m.sum(axis=(1, 2))
    rows, cols = m.sum(axis=2), m.sum(axis=1)
    rank_a = np.cumsum(rows, axis=1) - rows + (rows + 1) / 2  # the average rank of each category
    rank_b = np.cumsum(cols, axis=1) - cols + (cols + 1) / 2
    mean = ((total + 1) / 2)[:, np.newaxis]
    da, db = rank_a - mean, rank_b - mean
    cov = np.einsum("rj,rjl,rl->r", da, m, db)
    var = (rows * da ** 2).sum(axis=1) * (cols * db ** 2).sum(axis=1)
    rho = _divide(cov, np.sqrt(var))
    return np.where(total < 2, np.nan, np.clip(rho, -1.0, 1.0))


def kendall_rows(matrices: np.ndarray) -> np.ndarray:
    """Kendall's τ-b of the pairs each (k × k) count matrix holds (categories ascending), as
    :func:`scipy.stats.kendalltau` computes it: concordant minus discordant pairs over the
    pairs not tied in each ranking."""
    m = np.asarray(matrices, dtype=float)
    total = m.sum(axis=(1, 2))
    k = m.shape[-1]
    # at_least[j, l]: the pairs in rows >= j and columns >= l; left[j, l + 1]: rows >= j, columns <= l
    at_least = np.zeros((m.shape[0], k + 1, k + 1))
    at_least[:, :k, :k] = m[:, ::-1, ::-1].cumsum(axis=1).cumsum(axis=2)[:, ::-1, ::-1]
    left = np.zeros((m.shape[0], k + 1, k + 1))
    left[:, :k, 1:] = m[:, ::-1, :].cumsum(axis=1)[:, ::-1, :].cumsum(axis=2)
    concordant = (m * at_least[:, 1:, 1:]).sum(axis=(1, 2))  # with a pair below and to the right
    discordant = (m * left[:, 1:, :k]).sum(axis=(1, 2))  # with a pair below and to the left
    pairs = total * (total - 1) / 2
    x_ties = (m.sum(axis=2) * (m.sum(axis=2) - 1) / 2).sum(axis=1)
    y_ties = (m.sum(axis=1) * (m.sum(axis=1) - 1) / 2).sum(axis=1)
    undefined = (total < 2) | (x_ties == pairs) | (y_ties == pairs)
    safe = np.where(undefined, 1.0, 0.0)
    tau = (concordant - discordant) / np.sqrt(pairs - x_ties + safe) / np.sqrt(pairs - y_ties + safe)
    return np.where(undefined, np.nan, np.clip(tau, -1.0, 1.0))


def alpha_rows(coincidences: np.ndarray) -> np.ndarray:
    """Krippendorff's ordinal α from each of a stack of (k × k) coincidence matrices (the
    categories in the value domain's order), as the ``krippendorff`` package computes it; NaN
    where fewer than two values are pairable."""
    o = np.asarray(coincidences, dtype=float)
    n_v = o.sum(axis=1)
    n = n_v.sum(axis=1)
    k = o.shape[-1]
    expected = (n_v[:, :, np.newaxis] * n_v[:, np.newaxis, :] - n_v[:, :, np.newaxis] * np.eye(k)) / \
        np.where(n > 1, n - 1, 1)[:, np.newaxis, np.newaxis]
    cum = np.concatenate([np.zeros((o.shape[0], 1)), np.cumsum(n_v, axis=1)], axis=1)
    i, j = np.indices((k, k))
    low, high = np.minimum(i, j), np.maximum(i, j)
    between = cum[:, high + 1] - cum[:, low]
    d = (between - (n_v[:, i] + n_v[:, j]) / 2) ** 2
    alpha = 1.0 - _divide((o * d).sum(axis=(1, 2)), (expected * d).sum(axis=(1, 2)))
    return np.where((n_v > 0).sum(axis=1) < 2, np.nan, alpha)


@dataclass
class Ratings:
    """One rubric's ratings: for each item, the judge's category and each annotator's."""

    items: list[str]
    judge: list[int | None]  # None: the judge gave no score for the item
    humans: list[dict[str, int]]  # annotator -> category, per item
    categories: list[int]

    @property
    def annotators(self) -> list[str]:
        return sorted({a for h in self.humans for a in h})

    def judge_pairs(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(judge, human) pairs of the given items: one pair per annotator of an item."""
        j: list[int] = []
        h: list[int] = []
        for i in idx:
            score = self.judge[i]
            if score is None:
                continue
            for value in self.humans[i].values():
                j.append(score)
                h.append(value)
        return np.array(j, dtype=int), np.array(h, dtype=int)

    def human_pairs(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(annotator, annotator) pairs: every pair of annotators who rated the same item."""
        a: list[int] = []
        b: list[int] = []
        for i in idx:
            for x, y in combinations(sorted(self.humans[i]), 2):
                a.append(self.humans[i][x])
                b.append(self.humans[i][y])
        return np.array(a, dtype=int), np.array(b, dtype=int)

    def _index(self) -> dict[int, int]:
        return {c: i for i, c in enumerate(self.categories)}

    def judge_matrices(self) -> np.ndarray:
        """(items × k × k): each item's (judge, annotator) pairs as counts, as :meth:`judge_pairs` pairs them."""
        index, k = self._index(), len(self.categories)
        out = np.zeros((len(self.items), k, k), dtype=np.int64)
        for i, score in enumerate(self.judge):
            if score is not None:
                for value in self.humans[i].values():
                    out[i, index[score], index[value]] += 1
        return out

    def human_matrices(self) -> np.ndarray:
        """(items × k × k): each item's (annotator, annotator) pairs as counts, as :meth:`human_pairs` pairs them."""
        index, k = self._index(), len(self.categories)
        out = np.zeros((len(self.items), k, k), dtype=np.int64)
        for i, rated in enumerate(self.humans):
            for x, y in combinations(sorted(rated), 2):
                out[i, index[rated[x]], index[rated[y]]] += 1
        return out

    def coincidences(self, *, with_judge: bool) -> np.ndarray:
        """(items × k × k): each item's share of Krippendorff's coincidence matrix (the raters of
        :meth:`reliability`), so that a resample's matrix is the sum over its items."""
        index, k = self._index(), len(self.categories)
        counts = np.zeros((len(self.items), k), dtype=float)
        for i, rated in enumerate(self.humans):
            for value in rated.values():
                counts[i, index[value]] += 1
            if with_judge and (score := self.judge[i]) is not None:
                counts[i, index[score]] += 1
        pairable = np.maximum(counts.sum(axis=1), 2)
        pairs = counts[:, :, np.newaxis] * counts[:, np.newaxis, :] - counts[:, :, np.newaxis] * np.eye(k)
        out: np.ndarray = pairs / (pairable - 1)[:, np.newaxis, np.newaxis]
        return out

    def reliability(self, idx: np.ndarray, *, with_judge: bool) -> np.ndarray:
        """Raters × items (NaN: not rated): the annotators, then the judge if asked."""
        raters = self.annotators
        rows = [[float(self.humans[i].get(r, np.nan)) for i in idx] for r in raters]
        if with_judge:
            rows.append([np.nan if (score := self.judge[i]) is None else float(score) for i in idx])
        return np.array(rows, dtype=float)


@dataclass
class PairStats:
    """Agreement of two rating sources over paired ratings."""

    n: int
    exact: Estimate
    within_one: Estimate
    kappa: Estimate
    weighted_kappa: Estimate
    spearman: Estimate
    kendall: Estimate
    mean_bias: Estimate  # mean of (first - second): the judge over the humans when first is the judge
    confusion: list[list[int]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"n": self.n}
        for name in ("exact", "within_one", "kappa", "weighted_kappa", "spearman", "kendall", "mean_bias"):
            out[name] = getattr(self, name).to_json()
        out["confusion"] = self.confusion
        return out


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def pair_stats(per_item: np.ndarray, categories: list[int], counts: np.ndarray,
               weights: Weights = "quadratic") -> PairStats:
    """Every pairwise figure of the pairs ``per_item`` holds ((items × k × k) counts: rows the
    first rating's category, columns the second's) with item-bootstrap intervals over the resamples
    ``counts`` (:func:`resample_counts`). Each figure is computed from the confusion matrix of a
    resample: its items' matrices, each as many times as it was drawn."""
    n_items, k = per_item.shape[0], len(categories)
    flat = per_item.reshape(n_items, k * k).astype(float)
    values = np.asarray(categories, dtype=float)
    order = np.argsort(values, kind="stable")  # ranks need the categories in ascending order
    gap = values[:, np.newaxis] - values[np.newaxis, :]  # first minus second, per cell

    def confusion(drawn: np.ndarray) -> np.ndarray:
        out: np.ndarray = (drawn @ flat).reshape(-1, k, k)
        return out

    def share(cells: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        """The share of a resample's pairs weighted by ``cells`` (1 on the diagonal: exact agreement)."""
        def of(drawn: np.ndarray) -> np.ndarray:
            m = confusion(drawn)
            return _divide((m * cells).sum(axis=(1, 2)), m.sum(axis=(1, 2)))
        return of

    figures: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "exact": share(np.eye(k)),
        "within_one": share((np.abs(gap) <= 1).astype(float)),
        "kappa": lambda drawn: kappa_rows(confusion(drawn), "none"),
        "weighted_kappa": lambda drawn: kappa_rows(confusion(drawn), weights),
        "spearman": lambda drawn: spearman_rows(confusion(drawn)[:, order][:, :, order]),
        "kendall": lambda drawn: kendall_rows(confusion(drawn)[:, order][:, :, order]),
        "mean_bias": share(gap),
    }
    estimates = {name: bootstrap_rows(fn, counts) for name, fn in figures.items()}
    whole = per_item.sum(axis=0)
    return PairStats(n=int(whole.sum()), confusion=whole.tolist(), **estimates)


@dataclass
class RubricAgreement:
    rubric: str
    items: int
    annotators: list[str]
    categories: list[int]
    judge_vs_humans: PairStats
    humans: PairStats  # the annotators among themselves: the ceiling the judge can be held to
    alpha: Estimate  # Krippendorff's α over annotators and judge
    alpha_humans: Estimate  # over the annotators only

    def to_json(self) -> dict[str, object]:
        return {"rubric": self.rubric, "items": self.items, "annotators": self.annotators,
                "categories": self.categories, "judge_vs_humans": self.judge_vs_humans.to_json(),
                "humans": self.humans.to_json(), "alpha": self.alpha.to_json(),
                "alpha_humans": self.alpha_humans.to_json()}


def agreement(rubric: str, ratings: Ratings, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> RubricAgreement:
    """Judge against humans, humans among themselves, and α, for one rubric's ratings."""
    n = len(ratings.items)
    cats = ratings.categories

    counts = resample_counts(n, resamples, seed)  # one set of resamples for every figure

    def alpha_of(with_judge: bool) -> Callable[[np.ndarray], np.ndarray]:
        flat = ratings.coincidences(with_judge=with_judge).reshape(n, len(cats) ** 2)
        return lambda drawn: alpha_rows((drawn @ flat).reshape(-1, len(cats), len(cats)))

    return RubricAgreement(
        rubric=rubric, items=n, annotators=ratings.annotators, categories=cats,
        judge_vs_humans=pair_stats(ratings.judge_matrices(), cats, counts),
        humans=pair_stats(ratings.human_matrices(), cats, counts),
        alpha=bootstrap_rows(alpha_of(True), counts),
        alpha_humans=bootstrap_rows(alpha_of(False), counts),
    )
