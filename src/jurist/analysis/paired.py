"""Paired statistics: two runs over the same items, compared item by item.

Each item scored in both runs is one pair, and its difference (B minus A) one
observation; items are the unit, so the tests never pool unlike things.

* :func:`mean_difference`: the mean of the differences with a percentile
  bootstrap 95% interval over the items (seeded; the resamples of
  :func:`jurist.analysis.agreement.resample_counts`, drawn a block at a time).
* :func:`wilcoxon_signed_rank`: the two-sided Wilcoxon signed-rank test of the
  differences (``scipy.stats.wilcoxon``; pairs that did not change are set
  aside, as Wilcoxon's own method does).
* :func:`sign_test`: the exact two-sided sign test of the pass/fail flips
  (``scipy.stats.binomtest``): under no change, an item that flipped is as
  likely to have gone pass -> fail as fail -> pass (McNemar's exact test).
* :func:`adjust`: Benjamini-Hochberg over the tests that have a p-value
  (:func:`jurist.analysis.stats.benjamini_hochberg`), the others left without one.

With fewer than :data:`MIN_PAIRS` pairs there is no test and no interval: the
result says "not enough pairs" and its p-value is None. Below six pairs no
two-sided signed-rank or sign test can reach p < 0.05 (the smallest exact p of
five pairs is 2/32 = 0.0625), so a p-value there could only say "nothing found"
when nothing could have been found. Pure functions, CPU only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES, CONFIDENCE, Estimate
from jurist.analysis.stats import benjamini_hochberg

MIN_PAIRS = 6
NOT_ENOUGH = "not enough pairs"
WILCOXON = "Wilcoxon signed-rank, two-sided"
SIGN = "exact sign test on pass/fail flips, two-sided"
BLOCK = 1_000_000  # resampled draws held at once (8 MB of differences)
# Below this share of the scores' size a difference is floating-point noise (0.1 + 0.2 - 0.3): it is zero.
_NOISE = 1e-9


@dataclass(frozen=True)
class PairedTest:
    """One test's result: its p-value, or None with the reason there is none."""

    test: str
    pairs: int  # the pairs it was run on (items with a value in both runs)
    p_value: float | None
    note: str | None = None  # why there is no p-value, or what a p of 1 means

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """B minus A, item by item, with floating-point noise set to zero."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired values differ in length: {len(xa)} and {len(xb)}")
    d: np.ndarray = xb - xa
    if len(d):
        scale = max(1.0, float(np.abs(xa).max()), float(np.abs(xb).max()))
        d[np.abs(d) <= _NOISE * scale] = 0.0
    return d


def not_enough(pairs: int) -> str:
    return f"{NOT_ENOUGH}: {pairs} (a test needs at least {MIN_PAIRS})"


def mean_difference(d: np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                    block: int = BLOCK) -> Estimate:
    """The mean difference with its percentile bootstrap 95% interval; no interval with fewer than
    :data:`MIN_PAIRS` pairs or no resamples, no value with no pairs. The resamples are those of
    :func:`jurist.analysis.agreement.resample_counts` with the same seed, drawn a block at a time
    (at most ``block`` draws held at once, whatever the number of items)."""
    n = len(d)
    if n == 0:
        return Estimate(None)
    value = round(float(d.mean()), 4)
    if n < MIN_PAIRS or resamples <= 0:
        return Estimate(value)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = max(1, block // n)
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        means[start:start + rows] = d[rng.integers(0, n, (rows, n))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Estimate(value, round(float(low), 4), round(float(high), 4))


def wilcoxon_signed_rank(d: np.ndarray) -> PairedTest:
    """The two-sided Wilcoxon signed-rank test of the differences ``d`` (B minus A)."""
    n = len(d)
    if n < MIN_PAIRS:
        return PairedTest(WILCOXON, n, None, not_enough(n))
    if not np.any(d):
        return PairedTest(WILCOXON, n, 1.0, "no pair differs")
    res = stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided")
    changed = int(np.count_nonzero(d))
    note = None if changed == n else f"{n - changed} pair(s) did not change and are set aside (Wilcoxon's method)"
    return PairedTest(WILCOXON, n, float(res.pvalue), note)


def sign_test(worse: int, better: int, pairs: int) -> PairedTest:
    """The exact two-sided sign test of ``worse`` pass -> fail against ``better`` fail -> pass
    flips among ``pairs`` items with a pass/fail in both runs."""
    if pairs < MIN_PAIRS:
        return PairedTest(SIGN, pairs, None, not_enough(pairs))
    flips = worse + better
    if flips == 0:
        return PairedTest(SIGN, pairs, 1.0, "no item flipped")
    return PairedTest(SIGN, pairs, float(stats.binomtest(better, flips, 0.5, alternative="two-sided").pvalue),
                      f"{flips} of {pairs} items flipped: {worse} pass -> fail, {better} fail -> pass")


def adjust(p_values: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values over those given, in the input order (None stays None)."""
    given = [(i, p) for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    for (i, _), adjusted in zip(given, benjamini_hochberg([p for _, p in given])):
        out[i] = min(1.0, adjusted)
    return out


__all__ = ["MIN_PAIRS", "NOT_ENOUGH", "PairedTest", "adjust", "differences", "mean_difference", "sign_test",
           "wilcoxon_signed_rank"]
