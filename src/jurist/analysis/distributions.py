"""The few tests and distributions the analysis uses, in plain Python and numpy.

Each one computes what the named ``scipy.stats`` call computes (the tests
compare them with scipy where it is installed), without making scipy, and its
140 MB, a dependency of jurist:

* :func:`mann_whitney_less`: ``mannwhitneyu(x, y, alternative="less")`` with its
  ``method="auto"``: the exact null distribution when a sample has at most 8
  values and there are no ties, else the normal approximation with tie and
  continuity corrections;
* :func:`benjamini_hochberg`: ``false_discovery_control(p, method="bh")``;
* :func:`t_sf` and :func:`t_ppf`: Student's t upper tail and quantile, for
  ``ttest_rel``, ``ttest_ind(equal_var=False)`` and ``t.ppf``; ``df`` may be
  fractional (Welch).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Sequence

import numpy as np

EXACT_MAX = 8  # mannwhitneyu's "auto": exact when a sample is this small and nothing is tied


def normal_sf(z: float) -> float:
    """P(Z >= z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T >= t) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * regularized_beta(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_ppf(q: float, df: float) -> float:
    """The t with P(T <= t) = q (0 < q < 1): bisection on :func:`t_sf` to double precision."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie strictly between 0 and 1, not {q}")
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    low, high = 0.0, 1.0
    while 1.0 - t_sf(high, df) < q:
        low, high = high, high * 2
    for _ in range(200):
        mid = (low + high) / 2
        if mid in (low, high):
            break
        if 1.0 - t_sf(mid, df) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def two_sided_t_p(t: float, df: float) -> float:
    """Two-sided p-value of a t statistic (as ``ttest_rel`` and ``ttest_ind`` report it)."""
    return min(1.0, 2.0 * t_sf(abs(t), df))


def _rank_with_ties(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks (1-based) and the size of each group of tied values."""
    unique, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    upper = np.cumsum(counts)
    average = upper - (counts - 1) / 2.0
    return average[inverse], counts


@functools.lru_cache(maxsize=64)
def _u_upper_tails(m: int, n: int) -> tuple[int, ...]:
    """For each u, how many orderings give U >= u (the pattern detector asks
    for a few sample sizes over and over)."""
    return tuple(itertools.accumulate(reversed(_u_counts(m, n))))[::-1]


def _u_counts(m: int, n: int) -> list[int]:
    """How many of the C(m+n, m) orderings give U = 0, 1, ..., m*n: the coefficients
    of the Gaussian binomial [m+n choose m]_q, built exactly in integers as
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i)."""
    poly = [1]
    for i in range(1, m + 1):
        grown = poly + [0] * (n + i)  # times (1 - q^(n+i)), then divided by (1 - q^i)
        for k in range(n + i, len(grown)):
            grown[k] -= poly[k - n - i]
        for k in range(i, len(grown)):
            grown[k] += grown[k - i]
        poly = grown[: i * n + 1]
    return poly


def mann_whitney_less(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(U of x, one-sided p that x tends to be lower than y)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n1, n2 = len(xs), len(ys)
    ranks, ties = _rank_with_ties(np.concatenate([xs, ys]))
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    u2 = n1 * n2 - u1  # "less": the upper tail of y's U
    if (n1 <= EXACT_MAX or n2 <= EXACT_MAX) and not (ties > 1).any():
        p = _u_upper_tails(min(n1, n2), max(n1, n2))[int(round(u2))] / math.comb(n1 + n2, n1)
    else:
        n = n1 + n2
        tie_term = float((ties.astype(float) ** 3 - ties).sum())
        s = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        numerator = u2 - n1 * n2 / 2 - 0.5  # continuity correction
        p = normal_sf(numerator / s) if s > 0 else 1.0
    return u1, min(max(p, 0.0), 1.0)


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values, in the input order."""
    ps = np.asarray(p_values, dtype=float)
    m = len(ps)
    if m == 0:
        return []
    order = np.argsort(ps)
    adjusted = ps[order] * (m / np.arange(1, m + 1))
    adjusted = np.minimum.accumulate(adjusted[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.clip(adjusted, 0.0, 1.0)
    return [float(p) for p in out]
