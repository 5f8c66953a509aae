"""A/B comparison of two versions of one prompt on the scores they produced.

Each judge call records its template hash on the score row, so version A's
scores are the rows with A's hash. Where both versions scored the same
subject on the same key, the pairs are compared with a paired t-test
(``scipy.stats.ttest_rel``) and the mean difference gets a confidence
interval from the t distribution; without pairs, Welch's t-test
(``ttest_ind(equal_var=False)``) with a Welch-Satterthwaite interval.
Scores stay on the rubric's scale ("points") when both versions used the same
scale, else they are normalised to a 0-1 "share".
"""

from __future__ import annotations

import asyncio
import math

import numpy as np
from scipy import stats

from jurist.analysis.comparison import CONFIDENCE, ABComparison
from jurist.analysis.prompts import prompt_version
from jurist.errors import InputError
from jurist.store import Store
from jurist.store import analysis as q

ALPHA = 0.05
MIN_N = 2


def _num(x: float) -> str:
    """0.4, 1.25, 12.3: short and plain."""
    return f"{round(x, 2):g}" if abs(x) >= 0.01 or x == 0 else f"{x:.2g}"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _latest_by_subject(rows: list[dict], value_of) -> dict[tuple[str, str], float]:
    """(subject, key) -> the newest score of that pair (rows come newest first)."""
    out: dict[tuple[str, str], float] = {}
    for r in rows:
        value = value_of(r)
        if value is not None:
            out.setdefault((r["subject_id"], r["key"]), value)
    return out


def compare_rows(rows: list[dict], hash_a: str, hash_b: str) -> dict:
    """The statistics for score rows (``template_hash``, ``key``, ``score``, ``max_score``, ``subject_id``)."""
    rows_a = [r for r in rows if r["template_hash"] == hash_a]
    rows_b = [r for r in rows if r["template_hash"] == hash_b]
    scales = {r["max_score"] for r in rows_a + rows_b}
    unit = "points" if len(scales) <= 1 else "share"

    def value_of(r: dict) -> float | None:
        if unit == "points":
            return float(r["score"])
        return float(r["score"]) / float(r["max_score"]) if r["max_score"] else None

    a, b = _latest_by_subject(rows_a, value_of), _latest_by_subject(rows_b, value_of)
    shared = sorted(set(a) & set(b))
    out: dict = {"unit": unit, "paired": len(shared) >= MIN_N, "test": None, "p_value": None,
                 "difference": None, "ci_low": None, "ci_high": None}
    tq = (1 + CONFIDENCE) / 2
    if out["paired"]:
        xa = np.array([a[k] for k in shared])
        xb = np.array([b[k] for k in shared])
        d = xb - xa
        n = len(d)
        mean_d, sd = float(d.mean()), float(d.std(ddof=1))
        half = float(stats.t.ppf(tq, n - 1)) * sd / math.sqrt(n)
        p = 1.0 if sd == 0 and mean_d == 0 else (0.0 if sd == 0 else float(stats.ttest_rel(xb, xa).pvalue))
        out.update(test="paired t-test", n_a=n, n_b=n, mean_a=float(xa.mean()), mean_b=float(xb.mean()),
                   difference=mean_d, ci_low=mean_d - half, ci_high=mean_d + half, p_value=p)
        return out
    xa, xb = np.array(list(a.values())), np.array(list(b.values()))
    out.update(n_a=len(xa), n_b=len(xb), mean_a=float(xa.mean()) if len(xa) else None,
               mean_b=float(xb.mean()) if len(xb) else None)
    if len(xa) < MIN_N or len(xb) < MIN_N:
        return out
    va, vb = float(xa.var(ddof=1)) / len(xa), float(xb.var(ddof=1)) / len(xb)
    diff = float(xb.mean() - xa.mean())
    se = math.sqrt(va + vb)
    if se == 0:
        p, half = (1.0 if diff == 0 else 0.0), 0.0
    else:
        df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))
        half = float(stats.t.ppf(tq, df)) * se
        p = float(stats.ttest_ind(xb, xa, equal_var=False).pvalue)
    out.update(test="Welch t-test", difference=diff, ci_low=diff - half, ci_high=diff + half, p_value=p)
    return out


def verdict(result: dict, alpha: float = ALPHA) -> tuple[str, bool]:
    """The plain-language verdict and whether the difference is significant."""
    n_a, n_b = result["n_a"], result["n_b"]
    if result["test"] is None:
        return (f"not enough data: version A has {n_a} and version B {n_b} scored evaluations; a comparison "
                f"needs at least {MIN_N} scored evaluations per version", False)
    n = f"n = {n_a} each" if n_a == n_b else f"n = {n_a} (A) and {n_b} (B)"
    if not result["paired"]:
        n += ", unpaired: no subject was scored by both"
    p, diff = result["p_value"], result["difference"]
    if p < alpha and diff != 0:
        better = "B" if diff > 0 else "A"
        return f"{better} is better by {_num(abs(diff))} {result['unit']}, {_p(p)}, {n}", True
    return f"no significant difference yet ({_p(p)}, {n})", False


async def compare_versions(store: Store, name: str, a: int, b: int, key: str | None = None,
                           *, limit: int = 20000) -> ABComparison:
    """Compare versions ``a`` and ``b`` of prompt ``name`` (NotFound for an unknown version)."""
    if a == b:
        raise InputError("compare two different versions (a and b are the same)")
    va, vb = await prompt_version(store, name, a), await prompt_version(store, name, b)
    if va["hash"] == vb["hash"]:
        raise InputError(f"versions {a} and {b} of {name!r} have the same text, so their scores cannot be told apart")
    rows = []
    for h in (va["hash"], vb["hash"]):  # each version's newest ``limit`` rows
        rows += await store.aread(q.scores_for_hashes, [h], key=key, limit=limit)
    result = await asyncio.to_thread(compare_rows, rows, va["hash"], vb["hash"])
    text, significant = verdict(result)
    return ABComparison(prompt=name, a=a, b=b, key=key, hash_a=va["hash"], hash_b=vb["hash"], unit=result["unit"],
                        mean_a=result["mean_a"], mean_b=result["mean_b"], n_a=result["n_a"], n_b=result["n_b"],
                        difference=result["difference"], ci_low=result["ci_low"], ci_high=result["ci_high"],
                        p_value=result["p_value"], test=result["test"], paired=result["paired"],
                        significant=significant, verdict=text)
