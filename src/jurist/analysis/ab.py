"""A/B comparison of two versions of one prompt on the scores they produced.

Each judge call records its template hash and its judge model on the score row, so
version A's verdicts are the rows with A's hash. A verdict is the newest score of one
subject on one rubric (or dimension) key and scale, by one judge model. Only like is
compared with like:

* **one judge model.** Verdicts are grouped by the judge that gave them; the test runs
  on one judge's verdicts (the one given, or the only judge that scored both versions).
  Where several judges did and none was chosen, or none did, no test is run and the
  comparison says why (``refused``); every judge is listed with its verdicts per version.
  Verdicts whose judge was not recorded are never compared.
* **the same subjects** (``design="paired"``, the prompt lab): the versions are compared
  on the subjects both scored with that judge on the same rubric and scale. Each
  subject's difference (B minus A, averaged over its rubrics) is one observation of a
  paired t-test (``scipy.stats.ttest_rel``), with a t interval; subjects only one version
  scored are left out, and with fewer than :data:`MIN_N` shared subjects no test is run:
  scores of different subjects differ by their subjects as much as by the prompt.
* **randomized** (``design="randomized"``, an A/B test): the router sent each call to a
  version at random, so the subjects of the two versions differ only by chance and are
  compared unpaired: each subject's mean score per version, Welch's t-test
  (``ttest_ind(equal_var=False)``) with a Welch-Satterthwaite interval.

Scores stay on the rubric's scale ("points") when all the compared verdicts share a
scale, else they are normalised to a 0-1 "share" (score / top of the scale).
"""

from __future__ import annotations

import asyncio
import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from jurist.analysis.comparison import CONFIDENCE, ABComparison, ComparisonStats, Design, JudgePool
from jurist.analysis.prompts import prompt_version
from jurist.errors import InputError
from jurist.store import Store
from jurist.store import analysis as q

ALPHA = 0.05
MIN_N = 2

Cell = tuple[str, str, float | None]  # (subject, rubric key, top of the scale)
Verdicts = dict[str | None, dict[Cell, float]]  # judge model -> cell -> its newest score


def _num(x: float) -> str:
    """0.4, 1.25, 12.3: short and plain."""
    return f"{round(x, 2):g}" if abs(x) >= 0.01 or x == 0 else f"{x:.2g}"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _verdicts(rows: Iterable[Mapping[str, Any]], template_hash: str) -> Verdicts:
    """judge -> (subject, key, scale) -> the newest score (rows come newest first)."""
    out: Verdicts = defaultdict(dict)
    for r in rows:
        if r["template_hash"] != template_hash or r["score"] is None:
            continue
        scale = None if r["max_score"] is None else float(r["max_score"])
        out[r.get("judge_model")].setdefault((r["subject_id"], r["key"], scale), float(r["score"]))
    return dict(out)


def _by_subject(cells: Mapping[Cell, float], unit: str) -> dict[str, float]:
    """subject -> the mean of its verdicts (as shares of the scale's top for ``unit`` share)."""
    values: dict[str, list[float]] = defaultdict(list)
    for (subject, _, scale), score in cells.items():
        if unit == "points":
            values[subject].append(score)
        elif scale:
            values[subject].append(score / scale)
    return {s: float(np.mean(v)) for s, v in values.items()}


def _names(judges: Iterable[str | None]) -> str:
    return ", ".join(j or "a judge not recorded" for j in judges) or "none"


DIFFERENT_SUBJECTS = ("not compared: the versions were scored on different subjects (no subject scored by both with "
                      "the same judge, rubric and scale); the prompt lab compares versions only on the subjects both "
                      "scored: score the same sessions with both versions, or run an A/B test")


def _choose(a: Verdicts, b: Verdicts, judge: str | None, design: Design) -> tuple[str | None, str | None]:
    """(the judge whose verdicts are compared, or None with the reason no test is run)."""
    if judge is not None:
        if judge not in a and judge not in b:
            return None, f"not compared: judge {judge} scored neither version (judges: {_names({*a, *b})})"
        return judge, None
    both = sorted(j for j in set(a) & set(b) if j is not None)
    if design == "paired" and len(both) > 1:  # the judges that scored a subject with both versions
        both = [j for j in both if set(a[j]) & set(b[j])] or both
    if len(both) > 1:
        return None, (f"not compared: {len(both)} judge models scored both versions ({', '.join(both)}); "
                      "verdicts of different judges are not pooled: choose one judge")
    recorded = sorted({*a, *b} - {None}, key=str)
    if both or (len(recorded) == 1 and None not in {*a, *b}):  # the one judge (one version may have no verdict)
        return (both or recorded)[0], None
    n_a, n_b = sum(map(len, a.values())), sum(map(len, b.values()))
    if not n_a or not n_b:
        return None, (f"not enough data: version A has {n_a} and version B {n_b} verdicts; a comparison needs "
                      "verdicts of both versions by the same judge")
    if not set(a) & set(b) - {None}:
        return None, (f"not compared: no judge model scored both versions (A: {_names(sorted(a, key=str))}; "
                      f"B: {_names(sorted(b, key=str))}); verdicts of different judges are not compared")
    return None, DIFFERENT_SUBJECTS


def _subjects(verdicts: Verdicts) -> int:
    return len({cell[0] for cells in verdicts.values() for cell in cells})


def compare_rows(rows: Sequence[Mapping[str, Any]], hash_a: str, hash_b: str, *, judge: str | None = None,
                 design: Design = "paired") -> ComparisonStats:
    """The statistics for score rows (``template_hash``, ``key``, ``score``, ``max_score``,
    ``subject_id``, ``judge_model``), newest first; see the module doc for the rules."""
    a, b = _verdicts(rows, hash_a), _verdicts(rows, hash_b)
    chosen, refused = _choose(a, b, judge, design)
    pools = [JudgePool(judge_model=j, n_a=len(a.get(j, {})), n_b=len(b.get(j, {})),
                       common=len(set(a.get(j, {})) & set(b.get(j, {}))), compared=j == chosen and chosen is not None)
             for j in sorted({*a, *b}, key=lambda j: (j is None, j or ""))]
    out = ComparisonStats(judges=pools, design=design, paired=design == "paired", judge_model=chosen)
    if chosen is None:  # n per version: the subjects each scored, whatever the judge
        return out.model_copy(update={"refused": refused, "n_a": _subjects(a), "n_b": _subjects(b)})
    ca, cb = a.get(chosen, {}), b.get(chosen, {})
    shared = set(ca) & set(cb)
    if design == "paired" and len({c[0] for c in shared}) < MIN_N:
        reason = DIFFERENT_SUBJECTS if ca and cb and not shared else (
            f"not enough data: judge {chosen} scored {len({c[0] for c in shared})} subject(s) with both versions "
            f"(on the same rubric and scale); a paired comparison needs at least {MIN_N}")
        return out.model_copy(update={"refused": reason, "n_a": len({c[0] for c in ca}),
                                      "n_b": len({c[0] for c in cb})})
    if design == "paired":
        ca, cb = {c: ca[c] for c in shared}, {c: cb[c] for c in shared}
    scales = {c[2] for c in (*ca, *cb)}
    unit = "points" if len(scales) <= 1 else "share"
    xa, xb = _by_subject(ca, unit), _by_subject(cb, unit)
    out = out.model_copy(update={"unit": unit, "n_a": len(xa), "n_b": len(xb),
                                 "mean_a": float(np.mean(list(xa.values()))) if xa else None,
                                 "mean_b": float(np.mean(list(xb.values()))) if xb else None})
    if design == "paired":
        return out.model_copy(update=asdict(_paired(np.array([xa[s] for s in sorted(xa)]),
                                                    np.array([xb[s] for s in sorted(xa)]))))
    if len(xa) < MIN_N or len(xb) < MIN_N:
        return out.model_copy(update={"refused": (
            f"not enough data: judge {chosen} scored {len(xa)} subject(s) with version A and {len(xb)} with B; a "
            f"comparison needs at least {MIN_N} per version")})
    return out.model_copy(update=asdict(_welch(np.array(list(xa.values())), np.array(list(xb.values())))))


@dataclass(frozen=True)
class _TTest:
    """A t-test's figures, as ComparisonStats holds them."""

    test: str
    difference: float
    ci_low: float
    ci_high: float
    p_value: float


# Below this share of the scores' size a mean or a spread is floating-point noise (twelve scores of 0.8
# average to 0.8000000000000002): it is zero, so equal scores never read as a significant difference.
_NOISE = 1e-9


def _noise(*xs: np.ndarray) -> float:
    return _NOISE * max(1.0, *(float(np.abs(x).max()) for x in xs if len(x)))


def _paired(xa: np.ndarray, xb: np.ndarray) -> _TTest:
    d = xb - xa
    n = len(d)
    mean_d, sd = float(d.mean()), float(d.std(ddof=1))
    noise = _noise(xa, xb)
    mean_d, sd = (0.0 if abs(mean_d) <= noise else mean_d), (0.0 if sd <= noise else sd)
    half = float(stats.t.ppf((1 + CONFIDENCE) / 2, n - 1)) * sd / math.sqrt(n)
    p = 1.0 if sd == 0 and mean_d == 0 else (0.0 if sd == 0 else float(stats.ttest_rel(xb, xa).pvalue))
    return _TTest(test="paired t-test", difference=mean_d, ci_low=mean_d - half, ci_high=mean_d + half, p_value=p)


def _welch(xa: np.ndarray, xb: np.ndarray) -> _TTest:
    va, vb = float(xa.var(ddof=1)) / len(xa), float(xb.var(ddof=1)) / len(xb)
    diff = float(xb.mean() - xa.mean())
    se = math.sqrt(va + vb)
    noise = _noise(xa, xb)
    diff, se = (0.0 if abs(diff) <= noise else diff), (0.0 if se <= noise else se)
    if se == 0:
        p, half = (1.0 if diff == 0 else 0.0), 0.0
    else:
        df = (va + vb) ** 2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1))
        half = float(stats.t.ppf((1 + CONFIDENCE) / 2, df)) * se
        p = float(stats.ttest_ind(xb, xa, equal_var=False).pvalue)
    return _TTest(test="Welch t-test", difference=diff, ci_low=diff - half, ci_high=diff + half, p_value=p)


def verdict(result: ComparisonStats, alpha: float = ALPHA) -> tuple[str, bool]:
    """The plain-language verdict and whether the difference is significant."""
    if result.test is None or result.p_value is None or result.difference is None:
        return result.refused or "not compared", False
    if result.paired:
        n = f"n = {result.n_a} subjects scored by both"
    else:
        n = f"n = {result.n_a} each" if result.n_a == result.n_b else f"n = {result.n_a} (A) and {result.n_b} (B)"
        n += " subjects routed at random"
    n += f", judge {result.judge_model}"
    p, diff = result.p_value, result.difference
    if p < alpha and diff != 0:
        better = "B" if diff > 0 else "A"
        return f"{better} is better by {_num(abs(diff))} {result.unit}, {_p(p)}, {n}", True
    return f"no significant difference yet ({_p(p)}, {n})", False


def comparison(prompt: str, a: int, b: int, hash_a: str, hash_b: str, result: ComparisonStats, *,
               key: str | None = None, alpha: float = ALPHA) -> ABComparison:
    """The comparison of versions ``a`` and ``b`` from its statistics, with its verdict."""
    text, significant = verdict(result, alpha)
    return ABComparison(prompt=prompt, a=a, b=b, key=key, hash_a=hash_a, hash_b=hash_b, significant=significant,
                        verdict=text, **result.model_dump())


async def compare_versions(store: Store, name: str, a: int, b: int, key: str | None = None,
                           *, judge: str | None = None, limit: int = 20000) -> ABComparison:
    """Compare versions ``a`` and ``b`` of prompt ``name`` on the subjects both scored with one
    judge model (``judge``, or the only one that scored both); NotFound for an unknown version."""
    if a == b:
        raise InputError("compare two different versions (a and b are the same)")
    va, vb = await prompt_version(store, name, a), await prompt_version(store, name, b)
    if va.hash == vb.hash:
        raise InputError(f"versions {a} and {b} of {name!r} have the same text, so their scores cannot be told apart")
    rows: list[Mapping[str, Any]] = []
    for h in (va.hash, vb.hash):  # each version's newest ``limit`` rows
        rows += await store.aread(q.scores_for_hashes, [h], key=key, limit=limit)
    result = await asyncio.to_thread(compare_rows, rows, va.hash, vb.hash, judge=judge)
    return comparison(name, a, b, va.hash, vb.hash, result, key=key)
