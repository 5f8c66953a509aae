"""A pass threshold fitted on a judge's scores against people's pass/fail labels.

For pass/fail use (a gate, a panel's pass mark, a rubric read as pass/fail) the
judge's score matters only through a threshold: the judge passes an item when its
score is at least the threshold. :func:`fit_threshold` tries every score the judge
gave as the threshold and keeps the one that maximises

* ``agreement``: the share of (judge, person) pairs that agree, one pair per
  annotator of an item (as every other figure of a calibration), or
* ``f1``: F1 of the judge's pass against the people's pass (a pass is the
  positive class): ``2 TP / (2 TP + FP + FN)``.

A tie on the fitted figure is broken by the other one, then by the lower
threshold. The fitted threshold's agreement and Cohen's κ come with a percentile
bootstrap 95% interval over the items (:func:`~jurist.analysis.agreement.bootstrap_items`).
The threshold is chosen on the same items, so these figures lean optimistic: on
new items expect somewhat less, the more so the fewer the labels.

A fit can be degenerate: a threshold at the bottom of the scale (or at the lowest
score the judge gave) passes every item, one above every score passes none, and
at a Cohen's κ of 0 or less (or none: a constant judge or constant labels) the
judge's pass agrees with the people's no better than chance. Such a fit says the
judge's score does not separate what the people pass from what they fail; it is
no threshold to use, and ``degenerate`` says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

import numpy as np

from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES, Estimate, bootstrap_items, cohen_kappa

Fit = Literal["agreement", "f1"]
FITS: tuple[str, ...] = ("agreement", "f1")
_EPS = 1e-12


@dataclass
class ThresholdFit:
    """The fitted threshold (the judge passes at a score >= it) and its figures."""

    fit: str  # agreement | f1: what was maximised
    threshold: float | None  # None: no item had both a judge score and a label
    n: int  # (judge, person) pairs
    agreement: Estimate  # at the threshold, with its bootstrap interval
    f1: float | None
    kappa: Estimate  # Cohen's κ of the judge's pass against the people's, at the threshold
    degenerate: str | None = None  # why the threshold is no threshold to use (see the module doc)

    def to_json(self) -> dict[str, object]:
        return {"fit": self.fit, "threshold": self.threshold, "n": self.n, "agreement": self.agreement.to_json(),
                "f1": self.f1, "kappa": self.kappa.to_json(), "degenerate": self.degenerate}


def degenerate_reason(threshold: float, scores: np.ndarray, kappa: float | None,
                      scale: tuple[float, float] | None = None) -> str | None:
    """Why a threshold fitted on ``scores`` (the judge's, one per pair) is degenerate, or None."""
    reasons = []
    if scale is not None and threshold <= scale[0]:
        reasons.append(f"it is at the bottom of the scale ({scale[0]:g}-{scale[1]:g}), so every item passes")
    elif bool(np.all(scores >= threshold)):
        reasons.append("every item passes (it is the lowest score the judge gave)")
    elif not bool(np.any(scores >= threshold)) or (scale is not None and threshold > scale[1]):
        reasons.append("no item passes")
    if kappa is None or not np.isfinite(kappa):
        reasons.append("Cohen's κ is undefined at it (the judge's pass or the people's is the same for every item)")
    elif kappa <= 0:
        reasons.append(f"Cohen's κ at it is {kappa:.3f}, no better than chance")
    if not reasons:
        return None
    return f"threshold {threshold:g} is degenerate: {'; '.join(reasons)}"


def _pairs(scores: Sequence[float | None], humans: Sequence[Mapping[str, int | bool]],
           idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(judge score, person's pass) pairs of the given items: one per annotator of a scored item."""
    s: list[float] = []
    h: list[int] = []
    for i in idx:
        score = scores[i]
        if score is None:
            continue
        for value in humans[i].values():
            s.append(float(score))
            h.append(int(bool(value)))
    return np.array(s, dtype=float), np.array(h, dtype=int)


def _agreement(passed: np.ndarray, human: np.ndarray) -> float:
    return float(np.mean(passed == human)) if len(human) else float("nan")


def _f1(passed: np.ndarray, human: np.ndarray) -> float:
    tp = int(np.sum((passed == 1) & (human == 1)))
    wrong = int(np.sum(passed != human))
    return 2 * tp / (2 * tp + wrong) if (2 * tp + wrong) else float("nan")


def _round(x: float) -> float | None:
    return None if not np.isfinite(x) else round(float(x), 4)


def fit_threshold(scores: Sequence[float | None], humans: Sequence[Mapping[str, int | bool]], *,
                  fit: str = "agreement", resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0,
                  scale: tuple[float, float] | None = None) -> ThresholdFit:
    """The threshold on ``scores`` (the judge's score of each item, None: not scored) that best
    matches ``humans`` (each item's pass labels by annotator), by ``fit`` (see the module doc);
    ``degenerate`` says why it is no threshold to use (``scale``: the judge's, for its edges)."""
    if fit not in FITS:
        raise ValueError(f"fit must be one of {', '.join(FITS)}, not {fit!r}")
    n_items = len(scores)
    s, h = _pairs(scores, humans, np.arange(n_items))
    if not len(s):
        return ThresholdFit(fit, None, 0, Estimate(None), None, Estimate(None))
    best: tuple[float, float, float] | None = None  # (fitted figure, the other, -threshold)
    for t in np.unique(s):
        passed = (s >= t).astype(int)
        a, f = _agreement(passed, h), _f1(passed, h)
        a, f = (a if np.isfinite(a) else -1.0), (f if np.isfinite(f) else -1.0)
        rank = (a, f, -float(t)) if fit == "agreement" else (f, a, -float(t))
        if best is None or rank[0] > best[0] + _EPS or (
                abs(rank[0] - best[0]) <= _EPS and (rank[1] > best[1] + _EPS or (
                    abs(rank[1] - best[1]) <= _EPS and rank[2] > best[2]))):
            best = rank
    assert best is not None
    threshold = -best[2]

    def at(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        js, hs = _pairs(scores, humans, idx)
        return (js >= threshold).astype(int), hs

    passed, _ = at(np.arange(n_items))
    kappa = bootstrap_items(lambda idx: cohen_kappa(*at(idx), [0, 1]), n_items, resamples=resamples, seed=seed)
    return ThresholdFit(
        fit=fit, threshold=round(threshold, 6), n=len(s),
        agreement=bootstrap_items(lambda idx: _agreement(*at(idx)), n_items, resamples=resamples, seed=seed),
        f1=_round(_f1(passed, h)), kappa=kappa,
        degenerate=degenerate_reason(round(threshold, 6), s, kappa.value, scale),
    )
