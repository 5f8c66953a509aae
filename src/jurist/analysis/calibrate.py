"""Calibration: how far the judge agrees with people, per rubric.

:func:`calibrate` scores every labelled session with the rubric judge (the
judge's replies come from the call cache when the same judge, template,
rubric and session were asked before, so a rerun makes no new calls), then
compares the judge's score on each labelled rubric with the people's labels
(:mod:`jurist.analysis.agreement`). Scores are compared as categories: the
whole numbers of the rubric's scale (a judge's fractional score, which
item-based rubrics give, is rounded to the nearest). A rubric labelled pass/fail
is compared with the judge's pass: a score of at least
:data:`~jurist.rubrics.scoring.PASS_PERCENTAGE` % of the scale's top; for such a rubric
the score threshold that best matches the people's pass/fail is fitted as well
(:mod:`jurist.analysis.threshold`). A degenerate fit (every item passes, none does,
or κ ≤ 0) says so and is not stored as the calibration's threshold.

A calibration is stored (the ``calibrations`` table, one row per rubric) with the
judge it holds for: the judge's model, the template that scored the rubric (by
hash) and the rubric (with the hash of what the prompt shows of it). That is what
``require_calibration`` looks up (:mod:`jurist.judges.calibration`).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES, Ratings, RubricAgreement, agreement
from jurist.analysis.labels import Label, LabelSet
from jurist.analysis.threshold import ThresholdFit, fit_threshold
from jurist.errors import InputError, UsageError
from jurist.ids import new_id
from jurist.judges.calibration import LOCAL_JUDGE, LOCAL_THRESHOLDS, JudgeIdentity, StoreSource
from jurist.rubrics.api import build_judge, load_template
from jurist.rubrics.calibration import calibrated_identities, use_fitted_thresholds
from jurist.judges.outcome import OK
from jurist.rubrics.judging import SCORED
from jurist.rubrics.models import Rubric, RubricSet
from jurist.rubrics.results import RubricResult
from jurist.rubrics.scoring import PASS_PERCENTAGE, SessionEvaluator
from jurist.rubrics.sessions import ChatSession, load_session
from jurist.runtime import Runtime
from jurist.store.calibrations import StoredCalibration, save_calibrations
from jurist.store.labels import LabelRow, LatestRubricScores
from jurist.sync import gather_bounded

if TYPE_CHECKING:  # pragma: no cover
    from jurist.analysis.calibrate_local import LocalFit

TRACE_PAGE = "/evaluation/evaluations/{id}"
DIFFERING = 10  # items listed per rubric where judge and people differ most
PASS_FAIL = [0, 1]  # fail, pass


@dataclass
class Disagreement:
    """An item where the judge and the people differ."""

    item: str
    judge: float | None  # the judge's score as given
    humans: dict[str, float]  # annotator -> label (pass/fail as 1/0)
    gap: float  # |judge category - mean of the people's categories|
    reasoning: str | None
    trace: str | None  # the dashboard's trace page of the judge's evaluation

    def to_json(self) -> dict[str, object]:
        return {"item": self.item, "judge": self.judge, "humans": self.humans, "gap": round(self.gap, 4),
                "reasoning": self.reasoning, "trace": self.trace}


@dataclass
class UnusableLabel:
    """A stored label the calibration leaves out, and why (the dashboard lists it, to delete)."""

    id: int
    item: str
    rubric: str
    annotator: str
    label: float | bool | None
    reason: str

    def to_json(self) -> dict[str, object]:
        finite = not isinstance(self.label, float) or math.isfinite(self.label)
        return {"id": self.id, "item": self.item, "rubric": self.rubric, "annotator": self.annotator,
                "label": self.label if finite else repr(self.label), "reason": self.reason}


@dataclass
class RubricCalibration:
    rubric: str
    name: str
    scale: str  # "1-5" or "pass/fail"
    agreement: RubricAgreement
    unscored: list[str]  # items the judge gave no score for (left out of the figures)
    differing: list[Disagreement] = field(default_factory=list)
    pass_at: float | None = None  # pass/fail: the judge's score that counts as a pass in the figures
    threshold: ThresholdFit | None = None  # pass/fail: the fitted threshold
    judge: JudgeIdentity | None = None  # the judge the figures hold for (None: not known, not stored)
    calibration_id: str | None = None  # the stored calibration's id, once stored
    local: "LocalFit | None" = None  # --fit-local: the offline judge's threshold fitted on the labels

    def to_json(self) -> dict[str, object]:
        judge = None if self.judge is None else {
            "model": self.judge.judge_model, "template": self.judge.template_name,
            "template_hash": self.judge.template_hash, "rubric_hash": self.judge.rubric_hash}
        fitted = {} if self.local is None else {LOCAL_THRESHOLDS: self.local.to_json()}
        return {"rubric": self.rubric, "name": self.name, "scale": self.scale, **self.agreement.to_json(),
                "pass_at": self.pass_at, "threshold": None if self.threshold is None else self.threshold.to_json(),
                **fitted, "judge_key": judge, "calibration_id": self.calibration_id,
                "unscored": self.unscored, "differing": [d.to_json() for d in self.differing]}


@dataclass
class CalibrationReport:
    judge: str | None
    labels: str
    annotators: list[str]
    rubrics: list[RubricCalibration]
    resamples: int
    fit: str = "agreement"  # what the thresholds of pass/fail rubrics maximise
    target: str = "rubric"  # what was calibrated: rubric | gate | panel
    unusable: list[UnusableLabel] = field(default_factory=list)  # labels left out of the figures, with why

    @property
    def degenerate(self) -> list[str]:
        """Why the fitted thresholds that are no threshold to use are not (``rubric: reason``)."""
        return ([f"{r.rubric}: {r.threshold.degenerate}" for r in self.rubrics
                 if r.threshold is not None and r.threshold.degenerate]
                + [f"{r.rubric} (the offline judge's fitted threshold): {r.local.degenerate}" for r in self.rubrics
                   if r.local is not None and r.local.degenerate])

    def to_json(self) -> dict[str, object]:
        return {"kind": "calibration", "target": self.target, "judge": self.judge, "labels": self.labels,
                "annotators": self.annotators, "bootstrap_resamples": self.resamples, "fit": self.fit,
                "rubrics": [r.to_json() for r in self.rubrics], "unusable": [u.to_json() for u in self.unusable]}


def find_sessions(labels: LabelSet, sessions: list[Path]) -> dict[str, ChatSession]:
    """The labelled sessions, by id, from session files and folders of ``*.jsonl``; an item
    with no session is an :class:`InputError` at its first label's line."""
    files: list[Path] = []
    for p in sessions:
        files.extend(sorted(p.glob("*.jsonl")) if p.is_dir() else [p])
    wanted = {lab.item for lab in labels.labels}
    found: dict[str, ChatSession] = {}
    for f in files:
        chat = load_session(f)
        if chat.session_id in wanted:
            found.setdefault(chat.session_id, chat)
    for i, lab in enumerate(labels.labels):
        if lab.item not in found:
            file, line = labels.where(i)
            raise InputError(f"no session {lab.item!r} in {', '.join(str(s) for s in sessions)}", file=file, line=line)
    return found


def _check_labels(labels: LabelSet, rubric_set: RubricSet) -> dict[str, Rubric]:
    """The labelled rubrics; a label for an unknown rubric, off the scale, or mixing
    scores and pass/fail in one rubric, is an :class:`InputError` at its line."""
    by_id = {r.id: r for r in rubric_set.rubrics}
    kinds: dict[str, bool] = {}
    for i, lab in enumerate(labels.labels):
        file, line = labels.where(i)
        rubric = by_id.get(lab.rubric)
        if rubric is None:
            raise InputError(f"rubric {lab.rubric!r} is not in {rubric_set.source or 'the rubrics'} "
                             f"(rubrics: {', '.join(by_id)})", file=file, line=line)
        if kinds.setdefault(lab.rubric, lab.is_pass_fail) != lab.is_pass_fail:
            raise InputError(f"rubric {lab.rubric!r} mixes scores and pass/fail labels", file=file, line=line)
        if not lab.is_pass_fail:
            lo, hi = rubric_set.scale_of(rubric)
            value = float(lab.label)
            if not (lo <= value <= hi) or value != int(value):
                raise InputError(f"label {lab.label:g} is not a whole number on {lab.rubric!r}'s scale "
                                 f"{lo:g}-{hi:g}", file=file, line=line)
    return {rid: by_id[rid] for rid in dict.fromkeys(lab.rubric for lab in labels.labels)}


def _category(value: float, pass_fail: bool, scale: tuple[float, float], pass_at: float | None = None) -> int:
    if pass_fail:
        return int(value >= pass_at) if pass_at is not None else int(value / scale[1] * 100.0 >= PASS_PERCENTAGE)
    return int(min(max(math.floor(value + 0.5), scale[0]), scale[1]))


@dataclass
class JudgedSessions:
    """The labelled sessions scored: each one's result and the id of its stored evaluation
    (for the trace link), and the judge each rubric's scores came from."""

    results: dict[str, tuple[RubricResult, str | None]]
    judges: dict[str, JudgeIdentity]


async def judge_sessions(rubric_set: RubricSet, sessions: dict[str, ChatSession], runtime: Runtime, *,
                         judge: str | None = None, template: str | Path | None = None, cache: bool | None = None,
                         parallel: int = 4, on_progress: Callable[[str], None] | None = None) -> JudgedSessions:
    """Score the sessions with the rubric judge (as ``jurist evaluate`` does; saved to the store)."""
    store = await runtime.astore()
    loaded = await asyncio.to_thread(load_template, template, store)
    rj = build_judge(runtime, judge=judge, template=loaded, cache=cache)
    try:
        judges = await calibrated_identities(rubric_set, rj)  # before any call
        await use_fitted_thresholds(runtime, rubric_set, rj)  # the judge as it runs: with thresholds fitted before
    except BaseException:
        await rj.model.aclose()
        raise
    evaluator = SessionEvaluator(rubric_set, rj, store, runtime.settings.session_char_budget,
                                 runtime.settings.rubric_timeout)
    async def one(chat: ChatSession) -> RubricResult:
        result = await evaluator.evaluate(chat)
        if on_progress:
            on_progress(chat.session_id)
        return result

    try:
        results = await gather_bounded(one, sessions.values(), parallel)
    finally:
        await rj.aclose()
    await runtime.aflush()
    out: dict[str, tuple[RubricResult, str | None]] = {}
    for result in results:
        rows = await asyncio.to_thread(store.evaluations, kind="rubric", subject_id=result.session_id, limit=20)
        ids = [r["id"] for r in rows if r["trace_id"] == result.trace_id]
        out[result.session_id] = (result, ids[0] if ids else None)
    return JudgedSessions(out, judges)


@dataclass
class JudgeScore:
    """The judge's verdict on one item for one rubric."""

    score: float | None  # None: no score (failed, or never judged)
    reasoning: str | None = None
    evaluation_id: str | None = None


def rubric_calibration(rubric: str, name: str, scale: tuple[float, float], labels: list[Label],
                       judged: Callable[[str], JudgeScore], *, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = 0, pass_at: float | None = None, fit: str = "agreement") -> RubricCalibration:
    """One rubric's figures from its labels and the judge's score of each labelled item. Pass/fail
    labels are compared with the judge's pass: a score of at least ``pass_at`` (None: at least
    PASS_PERCENTAGE % of the scale's top), and a threshold is fitted by ``fit``."""
    pass_fail = labels[0].is_pass_fail
    categories = PASS_FAIL if pass_fail else list(range(int(math.ceil(scale[0])), int(scale[1]) + 1))
    items = list(dict.fromkeys(lab.item for lab in labels))
    humans_raw: dict[str, dict[str, float]] = {item: {} for item in items}
    for lab in labels:
        humans_raw[lab.item][lab.annotator] = float(lab.label)
    verdicts = {item: judged(item) for item in items}
    ratings = Ratings(
        items=items,
        judge=[None if (v := verdicts[i].score) is None else _category(v, pass_fail, scale, pass_at) for i in items],
        humans=[{a: int(v) if pass_fail else _category(v, False, scale) for a, v in humans_raw[i].items()}
                for i in items],
        categories=categories,
    )
    stats = agreement(rubric, ratings, resamples=resamples, seed=seed)
    differing: list[Disagreement] = []
    for k, item in enumerate(items):
        jc, verdict = ratings.judge[k], verdicts[item]
        if jc is None:
            continue
        gap = abs(jc - sum(ratings.humans[k].values()) / len(ratings.humans[k]))
        if gap > 0:
            trace = TRACE_PAGE.format(id=verdict.evaluation_id) if verdict.evaluation_id else None
            differing.append(Disagreement(item, verdict.score, humans_raw[item], gap, verdict.reasoning, trace))
    differing.sort(key=lambda d: (-d.gap, d.item))
    threshold = None
    if pass_fail:
        pass_at = pass_at if pass_at is not None else scale[1] * PASS_PERCENTAGE / 100.0
        threshold = fit_threshold([verdicts[i].score for i in items], ratings.humans, fit=fit, resamples=resamples,
                                  seed=seed, scale=scale)
    return RubricCalibration(
        rubric=rubric, name=name, scale="pass/fail" if pass_fail else f"{scale[0]:g}-{scale[1]:g}",
        agreement=stats, unscored=[i for i in items if verdicts[i].score is None], differing=differing[:DIFFERING],
        pass_at=pass_at if pass_fail else None, threshold=threshold)


def compare(rubric_set: RubricSet, labels: LabelSet, judged: dict[str, tuple[RubricResult, str | None]], *,
            resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0, judge: str | None = None, fit: str = "agreement",
            judges: dict[str, JudgeIdentity] | None = None) -> CalibrationReport:
    """The calibration report from the judge's results and the labels (``judges``: the judge
    identity of each rubric, for storing)."""
    rubrics = _check_labels(labels, rubric_set)
    out: list[RubricCalibration] = []
    for rid, rubric in rubrics.items():
        def verdict(item: str, rid: str = rid) -> JudgeScore:
            result, evaluation_id = judged[item]
            score = next((s for s in result.rubric_scores if s.rubric_id == rid), None)
            if score is None:
                return JudgeScore(None, None, evaluation_id)
            value = score.score if score.status == OK else None
            return JudgeScore(value, score.reasoning, evaluation_id)

        mine = [lab for lab in labels.labels if lab.rubric == rid]
        cal = rubric_calibration(rid, rubric.name, rubric_set.scale_of(rubric), mine, verdict, resamples=resamples,
                                 seed=seed, fit=fit)
        cal.judge = (judges or {}).get(rid)
        out.append(cal)
    annotators = sorted({lab.annotator for lab in labels.labels})
    return CalibrationReport(judge=judge, labels=labels.source, annotators=annotators, rubrics=out,
                             resamples=resamples, fit=fit)


def _stored_label_problem(row: LabelRow, low: float, top: float | None) -> str | None:
    """Why a stored label cannot be compared (None: it can): no verdict, a score that is not a
    whole number on the rubric's scale, or a score for a rubric whose scale no stored evaluation gives."""
    if row.passed is not None:
        return None
    if row.score is None:
        return "neither a score nor pass/fail"
    if not math.isfinite(row.score) or row.score != int(row.score):
        return f"score {row.score!r} is not a whole number"
    if top is None:
        return f"no stored evaluation of the labelled items scores rubric {row.rubric!r}, so its scale is not known"
    if not low <= row.score <= top:
        return f"score {row.score:g} is off the rubric's scale {low:g}-{top:g}"
    return None


def compare_stored(label_rows: Sequence[LabelRow], latest: Mapping[str, LatestRubricScores], *, low: float,
                   resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> CalibrationReport:
    """The report for labels kept in the store (added on the dashboard), against the newest
    stored rubric evaluation of each item (no judge is run). A rubric's scale runs from
    ``low`` (the configured scale's bottom) to the top its stored scores name. A label the
    figures cannot use is listed in the report's ``unusable`` with why: a score that is not a
    whole number on that scale (or of a rubric no stored evaluation gives a scale for), or a
    label whose pass/fail kind differs from the rubric's first label."""
    tops: dict[str, float] = {}  # rubric -> the top of its scale, from the stored evaluations
    for entry in latest.values():
        for key, s in entry.scores.items():
            if s.max_score is not None and math.isfinite(s.max_score) and s.max_score > low:
                tops[key] = max(tops.get(key, s.max_score), s.max_score)
    by_rubric: dict[str, list[Label]] = {}
    unusable: list[UnusableLabel] = []
    for row in label_rows:
        value = row.passed if row.passed is not None else row.score
        problem = _stored_label_problem(row, low, tops.get(row.rubric))
        if problem is None and value is not None:
            # the store's items are any evaluation's subject (not only a labels file's ids): checked above
            lab = Label.model_construct(item=row.item, rubric=row.rubric, label=value, annotator=row.annotator,
                                        note=row.note)
            mine = by_rubric.setdefault(lab.rubric, [])
            if not mine or mine[0].is_pass_fail == lab.is_pass_fail:
                mine.append(lab)
                continue
            kinds = ("a pass/fail label", "scores") if lab.is_pass_fail else ("a score", "pass/fail")
            problem = f"{kinds[0]} on a rubric labelled with {kinds[1]} (first: item {mine[0].item!r})"
        unusable.append(UnusableLabel(row.id, row.item, row.rubric, row.annotator, value,
                                      problem or "neither a score nor pass/fail"))
    out: list[RubricCalibration] = []
    judges: set[str] = set()
    for rid, mine in sorted(by_rubric.items()):
        top = tops.get(rid, low + 1)  # pass/fail labels of a rubric no stored evaluation scored

        def verdict(item: str, rid: str = rid) -> JudgeScore:
            entry = latest.get(item)
            if entry is None:
                return JudgeScore(None)
            if entry.judge_model:
                judges.add(entry.judge_model)
            s = entry.scores.get(rid)
            if s is None:
                return JudgeScore(None, None, entry.evaluation_id)
            value = s.score if s.status == SCORED and s.score is not None and math.isfinite(s.score) else None
            return JudgeScore(value, s.reason, entry.evaluation_id)

        out.append(rubric_calibration(rid, rid, (low, float(top)), mine, verdict, resamples=resamples, seed=seed))
    annotators = sorted({row.annotator for row in label_rows})
    return CalibrationReport(judge=", ".join(sorted(judges)) or None, labels="the store", annotators=annotators,
                             rubrics=out, resamples=resamples, unusable=unusable)


async def calibrate(rubric_set: RubricSet, labels: LabelSet, sessions: list[Path], runtime: Runtime, *,
                    judge: str | None = None, template: str | Path | None = None, cache: bool | None = None,
                    resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0, parallel: int = 4, fit: str = "agreement",
                    store: bool = True, fit_local: bool = False, local_band: float | None = None,
                    on_progress: Callable[[str], None] | None = None) -> CalibrationReport:
    """Score the labelled sessions with the judge (or answer from the call cache) and
    compare, per rubric, the judge's scores with the labels; with ``store``, keep each
    rubric's calibration in the runtime's store (what ``require_calibration`` looks up).

    With ``fit_local`` (the judge must be the offline ``local/minilm``), also fit its decision
    threshold on each rubric's labels (:mod:`jurist.analysis.calibrate_local`), kept with the
    calibration; ``local_band``: the half-width of its band of uncertainty (None: as shipped).
    Too few labels for a fit is a UsageError, before any call."""
    rubrics = _check_labels(labels, rubric_set)  # before any call
    if fit_local:
        _check_fit_local(rubric_set, rubrics, labels, runtime.judge_ref(judge, announce=False), local_band)
    chats = await asyncio.to_thread(find_sessions, labels, sessions)
    judged = await judge_sessions(rubric_set, chats, runtime, judge=judge, template=template, cache=cache,
                                  parallel=parallel, on_progress=on_progress)
    used = next((r.judge_model for r, _ in judged.results.values() if r.judge_model), None)
    report = await asyncio.to_thread(lambda: compare(rubric_set, labels, judged.results, resamples=resamples,
                                                     seed=seed, judge=used, fit=fit, judges=judged.judges))
    if fit_local:
        await fit_local_thresholds(report, rubric_set, rubrics, labels, chats, runtime, band=local_band,
                                   parallel=parallel)
    if store:
        await store_calibrations(report, runtime)
    return report


def _check_fit_local(rubric_set: RubricSet, rubrics: Mapping[str, Rubric], labels: LabelSet, judge: str,
                     band: float | None) -> None:
    from jurist.analysis.calibrate_local import check_fit_labels

    if judge != LOCAL_JUDGE:
        raise UsageError(f"--fit-local fits the thresholds of the offline judge ({LOCAL_JUDGE}); the judge "
                         f"calibrated here is {judge}: give --judge {LOCAL_JUDGE}, or leave --fit-local out")
    if band is not None and not 0.0 <= band < 0.5:
        raise UsageError(f"--local-band is the half-width of the band of uncertainty, from 0 to under 0.5, not {band:g}")
    check_fit_labels({rid: (r, rubric_set.scale_of(r)) for rid, r in rubrics.items()}, labels.labels)


async def fit_local_thresholds(report: CalibrationReport, rubric_set: RubricSet, rubrics: Mapping[str, Rubric],
                               labels: LabelSet, chats: Mapping[str, ChatSession], runtime: Runtime, *,
                               band: float | None = None, parallel: int = 4) -> None:
    """Fit the offline judge's threshold of each rubric of the report on its labels (``band``: the
    band's half-width to keep with it; None: the shipped one) and attach the fit to the rubric."""
    from jurist.analysis.calibrate_local import KIND, fit_rubric, item_probabilities, shipped_thresholds

    probabilities = await item_probabilities(list(rubrics.values()), chats, runtime, parallel=parallel)
    await runtime.aflush()
    shipped, shipped_band = shipped_thresholds()
    if band is not None:
        shipped_band = {**shipped_band, KIND: band}
    for r in report.rubrics:
        rubric = rubrics[r.rubric]
        mine = [lab for lab in labels.labels if lab.rubric == r.rubric]
        r.local = fit_rubric(rubric, rubric_set.scale_of(rubric), mine, probabilities[r.rubric], shipped=shipped,
                             band=shipped_band)


LABELS_SOURCE_CHARS = 500  # calibrations.labels


def calibration_rows(report: CalibrationReport, at: datetime | None = None) -> list[StoredCalibration]:
    """The ``calibrations`` rows of a report: one per rubric whose judge is known (new ids)."""
    at = at or datetime.now(timezone.utc)
    rows: list[StoredCalibration] = []
    for r in report.rubrics:
        if r.judge is None:
            continue
        jv, fitted = r.agreement.judge_vs_humans, r.threshold
        figures = {k: v for k, v in r.to_json().items() if k not in ("differing", "calibration_id")}
        rows.append(StoredCalibration.model_validate({
            "id": new_id(), "kind": report.target, "judge_model": r.judge.judge_model,
            "template_name": r.judge.template_name, "template_hash": r.judge.template_hash,
            "rubric": r.judge.rubric, "rubric_hash": r.judge.rubric_hash,
            "scale": r.scale, "items": r.agreement.items, "n": jv.n,
            "kappa": jv.weighted_kappa.value, "kappa_low": jv.weighted_kappa.low, "kappa_high": jv.weighted_kappa.high,
            "agreement": jv.exact.value, "agreement_low": jv.exact.low, "agreement_high": jv.exact.high,
            "pass_at": r.pass_at,
            # a degenerate fit is kept in the figures (with why), never as the calibration's threshold
            "threshold": fitted.threshold if fitted and not fitted.degenerate else None,
            "threshold_fit": fitted.fit if fitted else None,
            "threshold_agreement": fitted.agreement.value if fitted else None,
            "threshold_agreement_low": fitted.agreement.low if fitted else None,
            "threshold_agreement_high": fitted.agreement.high if fitted else None,
            "labels": report.labels[:LABELS_SOURCE_CHARS], "figures": figures, "created_at": at,
        }))
        r.calibration_id = rows[-1].id
    return rows


async def store_calibrations(report: CalibrationReport, source: StoreSource) -> None:
    """Keep the report's calibrations in the store (durable when this returns); each rubric
    gets its ``calibration_id``."""
    rows = calibration_rows(report)
    store = await source.astore()
    await store.awrite(save_calibrations, rows)
