"""Two experiments compared item by item: which answers got worse, and is the drop real?

A is the baseline, B the candidate; every difference is B minus A. Pure over the records
(:class:`ExperimentRecord` and its :class:`ExperimentItem` s): the CLI (``jurist experiment
compare``), the API and the dashboard read the same :class:`ExperimentComparison`.

Like is compared with like, or the comparison is refused (:class:`~jurist.errors.UsageError`,
exit 2) unless ``allow_different`` is given, and then ``different`` names what differs and
``allowed_different`` is true:

* the same dataset version (the same items, the same expected answers);
* the same judges: the same judge models and, for each rubric both judged with, the same
  judge template (its hash).

Per item: both answers and their scores side by side with the difference, and whether it
went from pass to fail (a regression: also when B's target failed on an item A passed) or
back. An item is paired on a score when both runs scored it on the same scale; the others
are listed with the reason (only in one run, the target failed, the judge could not score
it, the scale changed), never dropped silently. Per rubric and overall
(:class:`MetricComparison`): the mean difference with a seeded bootstrap 95% interval, the
Wilcoxon signed-rank test of the scores and the exact sign test of the pass/fail flips
(:mod:`jurist.analysis.paired`), each adjusted by Benjamini-Hochberg across the overall score
and the rubrics. A drop is *significant* when B is lower and an adjusted p-value of either
test is below ``alpha``. With too few pairs there is no test: "not enough pairs", p None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from jurist.errors import UsageError
from jurist.experiments.records import ExperimentItem, ExperimentRecord, ItemScore

if TYPE_CHECKING:  # pragma: no cover
    from jurist.analysis.paired import PairedTest

COMPARISON_VERSION = "1.0"
RESAMPLES = 2000  # jurist.analysis.agreement.BOOTSTRAP_RESAMPLES (imported lazily: it needs scipy)
ALPHA = 0.05
OVERALL = "overall"

Change = Literal["regression", "improvement", "same"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Side(_Model):
    """What one experiment was, as the comparison names it."""

    name: str
    dataset: str
    dataset_version: str
    target: str
    judge_models: list[str]
    rubrics: dict[str, str | None]  # rubric id -> its judge template's hash
    status: str
    items_total: int
    items_scored: int
    items_failed: int
    cost_usd: float | None
    cost_note: str | None
    created_at: str
    git_commit: str | None


class Test(_Model):
    """A paired test's figures: the raw and the Benjamini-Hochberg adjusted p-value (None with
    ``note`` saying why: "not enough pairs")."""

    test: str
    pairs: int
    p_value: float | None
    p_adjusted: float | None = None
    note: str | None = None


class MetricComparison(_Model):
    """One rubric (or the overall score) compared over the items both runs scored."""

    key: str  # "overall" or the rubric's id
    name: str
    max_score: float | None  # the scale's top, when both runs share it
    pairs: int  # items scored by both runs on this scale
    mean_a: float | None
    mean_b: float | None
    difference: float | None  # mean of B minus A over the pairs
    ci_low: float | None  # its bootstrap 95% interval
    ci_high: float | None
    scores: Test  # Wilcoxon signed-rank on the scores
    flips: Test  # exact sign test on pass/fail
    passed_a: int  # pairs that passed in A
    passed_b: int
    regressions: int  # pass -> fail among the pairs
    improvements: int  # fail -> pass
    significant_drop: bool = False


class RubricCell(_Model):
    """One rubric's scores of one item in both runs."""

    score_a: float | None
    score_b: float | None
    difference: float | None
    passed_a: bool | None
    passed_b: bool | None


class ItemRow(_Model):
    """One item side by side: answers, scores and what changed."""

    item_id: str
    input: str | None = None  # the dataset item's input, when the caller gave the dataset
    in_a: bool
    in_b: bool
    answer_a: str | None = None
    answer_b: str | None = None
    error_a: str | None = None
    error_b: str | None = None
    score_a: float | None = None  # overall, on the rubric set's scale
    score_b: float | None = None
    max_score: float | None = None
    difference: float | None = None  # B minus A, when both are scored on one scale
    passed_a: bool | None = None
    passed_b: bool | None = None
    change: Change | None = None  # None: not paired on pass/fail
    not_paired: str | None = None  # why the overall scores are not compared
    evaluation_a: str | None = None  # the stored evaluations (trace ids)
    evaluation_b: str | None = None
    rubrics: dict[str, RubricCell] = Field(default_factory=dict)


class ExperimentComparison(_Model):
    """The comparison of experiment A (baseline) and B (candidate)."""

    kind: Literal["experiment_comparison"] = "experiment_comparison"
    version: str = COMPARISON_VERSION
    a: Side
    b: Side
    different: list[str]  # what differs that makes the runs unlike (empty: like with like)
    allowed_different: bool  # compared anyway (--allow-different)
    alpha: float
    resamples: int
    seed: int
    min_pairs: int  # fewer pairs than this: no test ("not enough pairs")
    notes: list[str]  # what the reader must know (an unfinished run, rubrics in one run only)
    metrics: list[MetricComparison]  # overall first, then the rubrics both runs judged with
    regressions: list[str]  # item ids: pass -> fail overall (or B's target failed where A passed)
    improvements: list[str]  # fail -> pass overall
    only_in_a: list[str]
    only_in_b: list[str]
    not_paired: dict[str, str]  # item id -> why its overall scores are not compared
    rubrics_only_in_a: list[str]
    rubrics_only_in_b: list[str]
    items: list[ItemRow]

    @property
    def significant_drops(self) -> list[MetricComparison]:
        return [m for m in self.metrics if m.significant_drop]


def side(record: ExperimentRecord) -> Side:
    return Side(name=record.name, dataset=record.dataset, dataset_version=record.dataset_version,
                target=record.target, judge_models=sorted(record.judge_models),
                rubrics={r.id: r.template_hash for r in record.rubrics}, status=record.status,
                items_total=record.items_total, items_scored=record.items_scored, items_failed=record.items_failed,
                cost_usd=record.cost_usd, cost_note=record.cost_note, created_at=record.created_at,
                git_commit=record.git_commit)


def differences_between(a: ExperimentRecord, b: ExperimentRecord) -> list[str]:
    """What makes the two runs unlike: the dataset version, the judge models, a shared rubric's
    judge template. Empty when they compare like with like."""
    out: list[str] = []
    if a.dataset_version != b.dataset_version:
        out.append(f"dataset version: A ran on {a.dataset}@{a.dataset_version}, B on {b.dataset}@{b.dataset_version}")
    if sorted(set(a.judge_models)) != sorted(set(b.judge_models)):
        out.append(f"judge models: A was judged by {', '.join(sorted(a.judge_models)) or 'none recorded'}, "
                   f"B by {', '.join(sorted(b.judge_models)) or 'none recorded'}")
    ta, tb = {r.id: r.template_hash for r in a.rubrics}, {r.id: r.template_hash for r in b.rubrics}
    for rid in sorted(set(ta) & set(tb)):
        if ta[rid] != tb[rid]:
            out.append(f"judge template of rubric {rid}: A used {ta[rid] or 'an unrecorded one'}, "
                       f"B {tb[rid] or 'an unrecorded one'}")
    return out


def refusal(a: ExperimentRecord, b: ExperimentRecord, different: Sequence[str]) -> UsageError:
    return UsageError(f"experiments {a.name!r} and {b.name!r} are not like with like ({'; '.join(different)}); "
                      "their scores would differ by more than the target. Run both on the same dataset version "
                      "with the same judge, or pass --allow-different to compare them anyway (the comparison "
                      "then says so)")


@dataclass
class _Pairs:
    """One metric's paired values: A's and B's score and pass/fail per paired item."""

    a: list[float]
    b: list[float]
    flips: list[tuple[bool, bool]]
    scales: set[float]


def _target_failed(item: ExperimentItem) -> bool:
    return item.status == "failed" and item.answer is None


def _why_unscored(item: ExperimentItem, run: str) -> str:
    if _target_failed(item):
        return f"the target failed in {run}" + (f": {item.error}" if item.error else "")
    return f"not scored in {run}" + (f": {item.error}" if item.error else "")


def _diff(a: float, b: float) -> float:
    """B minus A, without floating-point noise (4.6 - 4.2 is 0.4, not 0.39999999999999947)."""
    return round(b - a, 9) + 0.0


def _rubric_cell(a: ItemScore | None, b: ItemScore | None) -> RubricCell:
    va, vb = (a.score if a else None), (b.score if b else None)
    same_scale = a is not None and b is not None and a.max_score == b.max_score
    diff = _diff(va, vb) if va is not None and vb is not None and same_scale else None
    return RubricCell(score_a=va, score_b=vb, difference=diff, passed_a=a.passed if a else None,
                      passed_b=b.passed if b else None)


def _change(pa: bool | None, pb: bool | None) -> Change | None:
    if pa is None or pb is None:
        return None
    return "same" if pa == pb else ("regression" if pa else "improvement")


def _item_row(item_id: str, ia: ExperimentItem | None, ib: ExperimentItem | None,
              text: str | None) -> ItemRow:
    row = ItemRow(item_id=item_id, input=text, in_a=ia is not None, in_b=ib is not None)
    if ia is None or ib is None:
        only = "A" if ib is None else "B"
        one = ia or ib
        assert one is not None
        fields = {"answer_a" if only == "A" else "answer_b": one.answer,
                  "error_a" if only == "A" else "error_b": one.error,
                  "score_a" if only == "A" else "score_b": one.score,
                  "passed_a" if only == "A" else "passed_b": one.passed,
                  "evaluation_a" if only == "A" else "evaluation_b": one.evaluation_id}
        return row.model_copy(update={**fields, "max_score": one.max_score, "not_paired": f"only in {only}"})
    reason = None
    if ia.score is None:
        reason = _why_unscored(ia, "A")
    elif ib.score is None:
        reason = _why_unscored(ib, "B")
    elif ia.max_score != ib.max_score:
        reason = f"the scale changed: A out of {ia.max_score}, B out of {ib.max_score}"
    diff = None if reason or ia.score is None or ib.score is None else _diff(ia.score, ib.score)
    change = _change(ia.passed, ib.passed)
    if change is None and ia.passed and _target_failed(ib):
        change = "regression"  # the app now fails where it passed: that is a regression
    rubrics = {rid: _rubric_cell(ia.scores.get(rid), ib.scores.get(rid))
               for rid in sorted(set(ia.scores) | set(ib.scores))}
    return row.model_copy(update={
        "answer_a": ia.answer, "answer_b": ib.answer, "error_a": ia.error, "error_b": ib.error,
        "score_a": ia.score, "score_b": ib.score, "max_score": ia.max_score if ia.max_score == ib.max_score else None,
        "difference": diff, "passed_a": ia.passed, "passed_b": ib.passed, "change": change, "not_paired": reason,
        "evaluation_a": ia.evaluation_id, "evaluation_b": ib.evaluation_id, "rubrics": rubrics})


def _collect(pairs: Sequence[tuple[ExperimentItem, ExperimentItem]], key: str) -> _Pairs:
    out = _Pairs([], [], [], set())
    for ia, ib in pairs:
        if key == OVERALL:
            va, vb, sa, sb, pa, pb = ia.score, ib.score, ia.max_score, ib.max_score, ia.passed, ib.passed
        else:
            ra, rb = ia.scores.get(key), ib.scores.get(key)
            if ra is None or rb is None:
                continue
            va, vb, sa, sb, pa, pb = ra.score, rb.score, ra.max_score, rb.max_score, ra.passed, rb.passed
        if va is None or vb is None or sa != sb:
            continue
        out.a.append(va)
        out.b.append(vb)
        if sa is not None:
            out.scales.add(sa)
        if pa is not None and pb is not None:
            out.flips.append((pa, pb))
    return out


def _metric(key: str, name: str, values: _Pairs, resamples: int, seed: int) -> tuple[MetricComparison,
                                                                                           "PairedTest", "PairedTest"]:
    from jurist.analysis.paired import differences, mean_difference, sign_test, wilcoxon_signed_rank

    d = differences(values.a, values.b)
    est = mean_difference(d, resamples=resamples, seed=seed)
    worse = sum(1 for pa, pb in values.flips if pa and not pb)
    better = sum(1 for pa, pb in values.flips if pb and not pa)
    scores, flips = wilcoxon_signed_rank(d), sign_test(worse, better, len(values.flips))
    n = len(d)
    metric = MetricComparison(
        key=key, name=name, max_score=next(iter(values.scales)) if len(values.scales) == 1 else None, pairs=n,
        mean_a=round(float(np.mean(values.a)), 4) if n else None,
        mean_b=round(float(np.mean(values.b)), 4) if n else None,
        difference=est.value, ci_low=est.low, ci_high=est.high,
        scores=Test(test=scores.test, pairs=scores.pairs, p_value=scores.p_value, note=scores.note),
        flips=Test(test=flips.test, pairs=flips.pairs, p_value=flips.p_value, note=flips.note),
        passed_a=sum(1 for pa, _ in values.flips if pa), passed_b=sum(1 for _, pb in values.flips if pb),
        regressions=worse, improvements=better)
    return metric, scores, flips


def compare_experiments(a: ExperimentRecord, items_a: Sequence[ExperimentItem], b: ExperimentRecord,
                        items_b: Sequence[ExperimentItem], *, allow_different: bool = False, alpha: float = ALPHA,
                        resamples: int = RESAMPLES, seed: int = 0,
                        inputs: Mapping[str, str] | None = None) -> ExperimentComparison:
    """Compare experiment B with A (the baseline). ``inputs`` (item id -> its input as text) shows each
    item's question beside its answers. Raises :class:`~jurist.errors.UsageError` when the runs are
    not like with like and ``allow_different`` is false. Needs scipy (the ``analysis`` extra)."""
    from jurist.analysis.paired import MIN_PAIRS, adjust

    if not 0 < alpha < 1:
        raise UsageError(f"alpha must be between 0 and 1, not {alpha:g}")
    different = differences_between(a, b)
    if different and not allow_different:
        raise refusal(a, b, different)
    by_a, by_b = _by_id(items_a, a.name), _by_id(items_b, b.name)
    ids = sorted(set(by_a) | set(by_b))
    rows = [_item_row(i, by_a.get(i), by_b.get(i), (inputs or {}).get(i)) for i in ids]
    pairs = [(by_a[i], by_b[i]) for i in ids if i in by_a and i in by_b]
    names_a, names_b = {r.id: r.name for r in a.rubrics}, {r.id: r.name for r in b.rubrics}
    shared = [rid for rid in names_a if rid in names_b]
    keys = [(OVERALL, "Overall")] + [(rid, names_b[rid]) for rid in shared]
    computed = [_metric(key, name, _collect(pairs, key), resamples, seed) for key, name in keys]
    adj_scores = adjust([s.p_value for _, s, _ in computed])
    adj_flips = adjust([f.p_value for _, _, f in computed])
    metrics = []
    for (m, _, _), ps, pf in zip(computed, adj_scores, adj_flips):
        drop = (m.difference is not None and m.difference < 0 and ps is not None and ps < alpha) or \
            (m.regressions > m.improvements and pf is not None and pf < alpha)
        metrics.append(m.model_copy(update={"scores": m.scores.model_copy(update={"p_adjusted": ps}),
                                            "flips": m.flips.model_copy(update={"p_adjusted": pf}),
                                            "significant_drop": drop}))
    notes = _notes(a, b, different, len(pairs), MIN_PAIRS)
    return ExperimentComparison(
        a=side(a), b=side(b), different=different, allowed_different=bool(different) and allow_different,
        alpha=alpha, resamples=resamples, seed=seed, min_pairs=MIN_PAIRS, notes=notes, metrics=metrics,
        regressions=[r.item_id for r in rows if r.change == "regression"],
        improvements=[r.item_id for r in rows if r.change == "improvement"],
        only_in_a=[r.item_id for r in rows if not r.in_b], only_in_b=[r.item_id for r in rows if not r.in_a],
        not_paired={r.item_id: r.not_paired for r in rows if r.not_paired},
        rubrics_only_in_a=sorted(set(names_a) - set(names_b)), rubrics_only_in_b=sorted(set(names_b) - set(names_a)),
        items=rows)


def _by_id(items: Sequence[ExperimentItem], name: str) -> dict[str, ExperimentItem]:
    out: dict[str, ExperimentItem] = {}
    for item in items:
        if item.item_id in out:
            raise UsageError(f"experiment {name!r} holds item {item.item_id!r} twice")
        out[item.item_id] = item
    return out


def _notes(a: ExperimentRecord, b: ExperimentRecord, different: Sequence[str], pairs: int,
           min_pairs: int) -> list[str]:
    notes = []
    if different:
        notes.append("compared although the runs are not like with like (--allow-different): "
                     + "; ".join(different))
    for label, rec in (("A", a), ("B", b)):
        if rec.status != "finished":
            notes.append(f"{label} ({rec.name}) is {rec.status}: {rec.items_scored + rec.items_failed} of "
                         f"{rec.items_total} items have a result")
    if pairs < min_pairs:
        notes.append(f"{pairs} item(s) in both runs: not enough pairs for a test (at least {min_pairs})")
    return notes


def gate(comparison: ExperimentComparison, max_regressions: int = 0) -> list[str]:
    """Why a CI gate fails (empty: it passes): a significant drop on a rubric or overall, or more
    than ``max_regressions`` items that went from pass to fail."""
    reasons = []
    for m in comparison.significant_drops:
        tests = [f"{t.test} adjusted p = {t.p_adjusted:.3g}" for t in (m.scores, m.flips)
                 if t.p_adjusted is not None and t.p_adjusted < comparison.alpha]
        reasons.append(f"{m.name}: a significant drop of {m.difference:+.3g} ({'; '.join(tests)} < "
                       f"{comparison.alpha:g})")
    if len(comparison.regressions) > max_regressions:
        reasons.append(f"{len(comparison.regressions)} item(s) went from pass to fail (more than {max_regressions}): "
                       + ", ".join(comparison.regressions[:20]) + (" ..." if len(comparison.regressions) > 20 else ""))
    return reasons


__all__ = ["ALPHA", "ExperimentComparison", "ItemRow", "MetricComparison", "RubricCell", "Side", "Test",
           "compare_experiments", "differences_between", "gate"]
