"""The numbers fitted on development pairs after training (numpy only): temperatures, decision
thresholds, bands of uncertainty, and the figures they are judged by."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

BAND_ABSTAIN = 0.05  # a band holds at most this share of the development decisions


def fit_temperature(logits: np.ndarray, labels: np.ndarray, binary: bool) -> float:
    """The temperature minimising the development pairs' negative log-likelihood."""
    best, best_t = math.inf, 1.0
    for t in np.exp(np.linspace(math.log(0.25), math.log(8.0), 400)):
        if binary:
            z = logits / t
            nll = float(np.mean(np.logaddexp(0, -z) * labels + np.logaddexp(0, z) * (1 - labels)))
        else:
            z = logits / t
            z = z - z.max(axis=1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
            nll = float(-np.mean(logp[np.arange(len(labels)), labels]))
        if nll < best:
            best, best_t = nll, float(t)
    return best_t


def macro_f1(y: np.ndarray, yes: np.ndarray) -> float:
    scores = []
    for cls in (True, False):
        tp = float(np.sum((yes == cls) & (y == cls)))
        fp = float(np.sum((yes == cls) & (y != cls)))
        fn = float(np.sum((yes != cls) & (y == cls)))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / 2


def macro_f1_by_source(y: np.ndarray, yes: np.ndarray, sources: np.ndarray) -> dict[str, float]:
    """Macro-F1 of the decisions of each source (the pairs' ``source``), rounded to 4 places."""
    return {str(s): round(macro_f1(y[sources == s], yes[sources == s]), 4) for s in sorted(set(sources))}


def fit_threshold(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    grid = np.round(np.arange(0.05, 0.951, 0.01), 2)
    f1s = [macro_f1(y, p >= t) for t in grid]
    i = int(np.argmax(f1s))
    return float(grid[i]), float(f1s[i])


def ece(p_yes: np.ndarray, y: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error of the decisions (confidence = probability of the side chosen)."""
    conf = np.where(p_yes >= 0.5, p_yes, 1 - p_yes)
    right = (p_yes >= 0.5) == y
    total = 0.0
    for b in range(bins):
        lo, hi = 0.5 + b * 0.05, 0.5 + (b + 1) * 0.05
        m = (conf >= lo) & ((conf < hi) if b < bins - 1 else (conf <= hi))
        if m.any():
            total += m.mean() * abs(float(right[m].mean()) - float(conf[m].mean()))
    return total


def band_for(p: np.ndarray, threshold: float) -> float:
    """Half-width of the band around the threshold that holds BAND_ABSTAIN of the decisions."""
    return round(float(np.quantile(np.abs(p - threshold), BAND_ABSTAIN)), 3)


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve: the chance that a positive outscores a negative (ties count
    half), by the rank-sum (Mann-Whitney) formula with average ranks."""
    pos = sum(1 for y in labels if y)
    neg = len(labels) - pos
    if not pos or not neg:
        raise ValueError("AUC needs positives and negatives")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, y in zip(ranks, labels) if y)
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)
