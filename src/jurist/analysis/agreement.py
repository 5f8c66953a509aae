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
more than a tenth of them undefined the figure has no interval.
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
    # Some resamples left the figure undefined (a resample where one side is constant has no rank
    # correlation): the interval is over the others, if they are at least MIN_DEFINED of all.
    defined = res.bootstrap_distribution[np.isfinite(res.bootstrap_distribution)]
    if len(defined) < MIN_DEFINED * resamples:
        return Estimate(value)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(defined, [tail, 100 - tail])
    return Estimate(value, _num(low), _num(high))


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

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n}
        for name in ("exact", "within_one", "kappa", "weighted_kappa", "spearman", "kendall", "mean_bias"):
            out[name] = getattr(self, name).to_json()
        out["confusion"] = self.confusion
        return out


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def pair_stats(pairs: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], n_items: int, categories: list[int],
               *, resamples: int, seed: int, weights: Weights = "quadratic") -> PairStats:
    """Every pairwise figure for ``pairs(items)`` with item-bootstrap intervals."""
    figures: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
        "exact": lambda a, b: _mean(a == b),
        "within_one": lambda a, b: _mean(np.abs(a - b) <= 1),
        "kappa": lambda a, b: cohen_kappa(a, b, categories, "none"),
        "weighted_kappa": lambda a, b: cohen_kappa(a, b, categories, weights),
        "spearman": spearman,
        "kendall": kendall,
        "mean_bias": lambda a, b: _mean(a.astype(float) - b),
    }
    a, b = pairs(np.arange(n_items))

    def on(fn: Callable[[np.ndarray, np.ndarray], float]) -> Callable[[np.ndarray], float]:
        return lambda idx: fn(*pairs(idx))

    estimates = {name: bootstrap_items(on(fn), n_items, resamples=resamples, seed=seed)
                 for name, fn in figures.items()}
    return PairStats(n=len(a), confusion=confusion_matrix(a, b, categories).tolist(), **estimates)


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

    def to_json(self) -> dict[str, Any]:
        return {"rubric": self.rubric, "items": self.items, "annotators": self.annotators,
                "categories": self.categories, "judge_vs_humans": self.judge_vs_humans.to_json(),
                "humans": self.humans.to_json(), "alpha": self.alpha.to_json(),
                "alpha_humans": self.alpha_humans.to_json()}


def agreement(rubric: str, ratings: Ratings, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> RubricAgreement:
    """Judge against humans, humans among themselves, and α, for one rubric's ratings."""
    n = len(ratings.items)
    cats = ratings.categories

    def alpha_of(with_judge: bool) -> Callable[[np.ndarray], float]:
        return lambda idx: krippendorff_alpha(ratings.reliability(idx, with_judge=with_judge), cats)

    return RubricAgreement(
        rubric=rubric, items=n, annotators=ratings.annotators, categories=cats,
        judge_vs_humans=pair_stats(ratings.judge_pairs, n, cats, resamples=resamples, seed=seed),
        humans=pair_stats(ratings.human_pairs, n, cats, resamples=resamples, seed=seed),
        alpha=bootstrap_items(alpha_of(True), n, resamples=resamples, seed=seed),
        alpha_humans=bootstrap_items(alpha_of(False), n, resamples=resamples, seed=seed),
    )
