"""The statistics of the pattern detector: which features go with lower scores.

The unit is the subject (a session, a research query, a gated request, a
tutoring session), not the evaluation: a session scored five times is one
subject, with the mean of its scores, so repeated evaluations do not pass for
independent ones. For every candidate feature (a term in the subject's text, a
long text, a judge model, a prompt version) the scores of the subjects that
have it (affected) are compared with the rest: a one-sided Mann-Whitney U test
(affected lower; ``scipy.stats.mannwhitneyu``), Cliff's delta as the effect
size, and Benjamini-Hochberg over every candidate tested, so the share of
false discoveries stays under ``alpha``. A feature found on several scores
(overall and some rubrics) is one finding: the strongest, naming the others.
Pure functions, CPU only: callers run them in a worker thread.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

# Cliff's delta thresholds (Romano, Kromrey, Coraggio & Skowronek, 2006):
# |d| < 0.147 negligible, < 0.33 small, < 0.474 medium, otherwise large.
HIGH_IMPACT = 0.474
MEDIUM_IMPACT = 0.33
MAX_TERMS = 200  # the most frequent terms tested per dimension
TEST_NAME = "Mann-Whitney U, one-sided (Benjamini-Hochberg adjusted)"

_WORD = re.compile(r"[a-z][a-z'-]{2,}")
STOP_WORDS = frozenset("""
about above after again against all also and any are aren't because been before being below between both but
can can't cannot could couldn't did didn't does doesn't doing don't down during each few for from further had
hadn't has hasn't have haven't having he'd he'll he's her here here's hers herself him himself his how how's
i'd i'll i'm i've into isn't it's its itself let's me more most mustn't my myself nor not now off once only
other ought our ours ourselves out over own please same shan't she she'd she'll she's should shouldn't some
such than that that's the their theirs them themselves then there there's these they they'd they'll they're
they've this those through too under until very was wasn't we'd we'll we're we've were weren't what what's
when when's where where's which while who who's whom why why's will with won't would wouldn't you you'd
you'll you're you've your yours yourself yourselves just like get got one two also yes thanks thank hello
""".split())


@dataclass
class Subject:
    """One subject as the statistics see it: all its evaluations taken together."""

    key: str  # unique among the subjects analysed ("<kind>/<subject id>")
    score: float  # 0-1: the mean over its evaluations
    text: str | None
    judge_models: frozenset[str]  # of any of its evaluations
    template_hashes: frozenset[str]
    dimensions: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)  # key -> (mean 0-1, hashes)
    evaluation_ids: tuple[str, ...] = ()


@dataclass
class Finding:
    feature_type: str  # term | length | judge_model | prompt_version
    feature: str
    dimension: str
    affected: list[str]  # the keys of the affected subjects
    mean_affected: float
    mean_rest: float
    effect_size: float  # Cliff's delta, affected vs rest (negative: affected lower)
    p_raw: float
    p_value: float = 1.0  # adjusted
    impact: str = "low"
    examples: list[str] = field(default_factory=list)
    evaluation_ids: list[str] = field(default_factory=list)  # every evaluation of the affected subjects
    rest_count: int = 0  # the subjects compared against
    also_lower_on: list[str] = field(default_factory=list)  # other scores on which the feature is lower

    @property
    def affected_count(self) -> int:
        """Affected subjects, each counted once however often it was evaluated."""
        return len(self.affected)


def terms_of(text: str) -> set[str]:
    """Lowercased words of three letters or more, without stop words."""
    return {w.strip("'-") for w in _WORD.findall(text.lower())} - STOP_WORDS - {""}


def impact_of(delta: float) -> str:
    d = abs(delta)
    return "high" if d >= HIGH_IMPACT else "medium" if d >= MEDIUM_IMPACT else "low"


def compare(affected: np.ndarray, rest: np.ndarray) -> tuple[float, float]:
    """(one-sided p that affected scores lower, Cliff's delta affected vs rest)."""
    res = stats.mannwhitneyu(affected, rest, alternative="less")
    delta = 2.0 * float(res.statistic) / (len(affected) * len(rest)) - 1.0
    return float(res.pvalue), delta


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values, in the input order."""
    if not p_values:
        return []
    return [float(p) for p in stats.false_discovery_control(np.asarray(p_values, dtype=float), method="bh")]


def _groups(subjects: list[Subject], dimension: str) -> tuple[np.ndarray, list[Subject]]:
    """The scores and subjects compared on ``dimension`` ("overall" or a score key)."""
    if dimension == "overall":
        chosen = subjects
        values = [s.score for s in subjects]
    else:
        chosen = [s for s in subjects if dimension in s.dimensions]
        values = [s.dimensions[dimension][0] for s in chosen]
    return np.asarray(values, dtype=float), chosen


def _candidates(chosen: list[Subject], dimension: str, min_count: int, hash_label: dict[str, str],
                term_sets: dict[str, set[str]]) -> list[tuple[str, str, np.ndarray]]:
    """(feature_type, feature, boolean mask) for every feature with enough on both sides."""
    n = len(chosen)
    out: list[tuple[str, str, np.ndarray]] = []

    def add(kind: str, feature: str, mask: np.ndarray) -> None:
        k = int(mask.sum())
        if k >= min_count and n - k >= min_count:
            out.append((kind, feature, mask))

    with_text = np.array([s.text is not None for s in chosen], dtype=bool)
    counts = Counter(t for s in chosen for t in term_sets.get(s.key, ()))
    frequent = {t for t, c in counts.most_common() if c >= min_count and n - c >= min_count}
    frequent = set(sorted(frequent, key=lambda t: (-counts[t], t))[:MAX_TERMS])
    postings: dict[str, list[int]] = {t: [] for t in frequent}
    for i, s in enumerate(chosen):
        for t in term_sets.get(s.key, ()):
            if t in postings:
                postings[t].append(i)
    for term in sorted(frequent, key=lambda t: (-counts[t], t)):
        mask = np.zeros(n, dtype=bool)
        mask[postings[term]] = True
        add("term", term, mask)
    if with_text.sum() >= 2 * min_count:
        lengths = np.array([len(s.text) if s.text else 0 for s in chosen])
        cut = float(np.percentile(lengths[with_text], 75))
        mask = with_text & (lengths > cut)
        add("length", f"longer than {int(cut)} characters", mask)
    for model in sorted({m for s in chosen for m in s.judge_models}):
        add("judge_model", model, np.array([model in s.judge_models for s in chosen], dtype=bool))
    used = [s.template_hashes if dimension == "overall" else s.dimensions[dimension][1] for s in chosen]
    for h in sorted({h for hashes in used for h in hashes}):
        add("prompt_version", hash_label.get(h, h), np.array([h in hashes for hashes in used], dtype=bool))
    return out


def find_patterns(subjects: list[Subject], *, min_count: int = 5, alpha: float = 0.05,
                  hash_label: dict[str, str] | None = None, per_dimension: bool = True) -> list[Finding]:
    """Every feature whose subjects score significantly lower than the rest, strongest first: one
    finding per feature (on the score where it is strongest; ``also_lower_on`` names the others)."""
    hash_label = hash_label or {}
    dimensions = ["overall"]
    if per_dimension:
        keys = Counter(k for s in subjects for k in s.dimensions)
        dimensions += sorted(k for k, c in keys.items() if c >= 2 * min_count)
    if len({s.key for s in subjects}) != len(subjects):
        raise ValueError("each subject must come once (merge its evaluations into one Subject)")
    term_sets = {s.key: terms_of(s.text) for s in subjects if s.text}
    tested: list[Finding] = []
    for dimension in dimensions:
        values, chosen = _groups(subjects, dimension)
        if len(values) < 2 * min_count or np.ptp(values) == 0:
            continue
        for kind, feature, mask in _candidates(chosen, dimension, min_count, hash_label, term_sets):
            p, delta = compare(values[mask], values[~mask])
            where = np.flatnonzero(mask)
            examples = [t for t in (chosen[i].text for i in where[:50]) if t][:3]
            evaluations = [e for i in where for e in chosen[i].evaluation_ids]
            tested.append(Finding(kind, feature, dimension, [chosen[i].key for i in where],
                                  float(values[mask].mean()), float(values[~mask].mean()), delta, p,
                                  examples=examples, evaluation_ids=evaluations, rest_count=len(values) - len(where)))
    for f, adjusted in zip(tested, benjamini_hochberg([f.p_raw for f in tested])):
        f.p_value = adjusted
        f.impact = impact_of(f.effect_size)
    found = [f for f in tested if f.p_value < alpha and f.mean_affected < f.mean_rest and f.effect_size < 0]
    found.sort(key=lambda f: (f.effect_size, f.p_value))
    return one_per_feature(found)


def one_per_feature(found: list[Finding]) -> list[Finding]:
    """The first (strongest) finding of each feature, naming the other scores it was found on."""
    by_feature: dict[tuple[str, str], Finding] = {}
    for f in found:
        first = by_feature.setdefault((f.feature_type, f.feature), f)
        if first is not f:
            first.also_lower_on.append(f.dimension)
    return list(by_feature.values())
