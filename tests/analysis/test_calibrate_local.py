"""Fitting the offline judge's item threshold on a team's labels: the fit, worked by hand, the
refusals, and the fitted thresholds kept with the calibration and found by the judge's look-up."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from jurist.analysis.agreement import Estimate, PairStats, RubricAgreement
from jurist.analysis.calibrate import CalibrationReport, RubricCalibration, calibration_rows
from jurist.analysis.calibrate_local import (MIN_ITEMS, candidates, check_fit_labels, fit_rubric, macro_f1,
                                             people_categories)
from jurist.errors import ConfigError, UsageError
from jurist.judges.calibration import (LOCAL_JUDGE, LOCAL_THRESHOLDS, FittedLocalThresholds, JudgeIdentity,
                                      fitted_local_thresholds)
from jurist.rubrics.models import Rubric
from jurist.runtime import Runtime
from jurist.store import Store
from jurist.store.calibrations import save_calibrations
from tests.calibrations import label_set, store_calibration

SCALE = (1.0, 5.0)
SHIPPED = {"expresses": 0.3, "answers": 0.5}
BAND = {"expresses": 0.05, "answers": 0.05}
ONE_ITEM = Rubric.model_validate({"id": "apology", "name": "Apologises", "description": "d",
                                  "items": [{"id": "sorry", "text": "The assistant apologises for the delay.",
                                             "points": 1}]})
TWO_ITEMS = Rubric.model_validate({"id": "reply", "name": "Replies well", "description": "d",
                                   "items": [{"id": "sorry", "text": "The assistant apologises.", "points": 1},
                                             {"id": "when", "text": "The assistant says when it ships.", "points": 1}]})
FREE = Rubric.model_validate({"id": "tone", "name": "Tone", "description": "Is the tone kind?",
                               "scoring_criteria": {"1": "rude", "5": "kind"}})


def _labels(passes: list[bool], rubric: str = "apology", annotators: tuple[str, ...] = ("ana",)):
    return label_set([(f"s{i}", rubric, p, a) for i, p in enumerate(passes) for a in annotators]).labels


# 24 sessions, one item each. The people pass s0..s11 and fail s12..s23. The judge's
# probabilities: the passes at 0.45..0.67 (steps of 0.02), the fails at 0.10..0.20 and one
# fail at 0.50 (s23). At the shipped 0.3 every pass is met and, of the fails, s23 only. No
# threshold does better than that one mistake (s23 sits among the passes), and 0.3 already lies
# between the fails (up to 0.20) and the passes (from 0.45), so the fit keeps it. Shifted up by
# 0.3, the fit moves.
PASS_P = [0.45 + 0.02 * i for i in range(12)]
FAIL_P = [0.10 + 0.01 * i for i in range(11)] + [0.50]


def _probs(values: list[float], shift: float = 0.0):
    return {f"s{i}": {"sorry": round(p + shift, 4)} for i, p in enumerate(values)}


def test_the_fit_keeps_the_threshold_when_it_already_separates_best():
    fit = fit_rubric(ONE_ITEM, SCALE, _labels([True] * 12 + [False] * 12), _probs(PASS_P + FAIL_P),
                     shipped=SHIPPED, band=BAND)
    assert fit.items == 24 and fit.classes == {"fail": 12, "pass": 12}
    assert fit.before.threshold == 0.3 and fit.after.threshold == 0.3
    assert fit.before.agreement == fit.after.agreement == 23 / 24
    assert fit.degenerate is None and fit.thresholds == {"expresses": 0.3, "answers": 0.5}


def test_the_fit_moves_the_threshold_to_where_the_people_draw_the_line():
    # shifted up by 0.3: passes at 0.75..0.97, fails at 0.40..0.50 and 0.80. The shipped 0.3 meets
    # every item (12 of 24 agree, macro-F1 of a judge that passes everything: (2/3 + 0) / 2).
    fit = fit_rubric(ONE_ITEM, SCALE, _labels([True] * 12 + [False] * 12), _probs(PASS_P + FAIL_P, 0.3),
                     shipped=SHIPPED, band=BAND)
    assert fit.before.agreement == 0.5 and fit.before.macro_f1 == pytest.approx((2 / 3) / 2)
    # best: a threshold between 0.50 (the highest fail but s23) and 0.75 (the lowest pass): the midpoint 0.625
    assert fit.after.threshold == pytest.approx(0.625)
    assert fit.after.agreement == 23 / 24
    assert fit.after.macro_f1 > fit.before.macro_f1
    assert fit.thresholds["expresses"] == pytest.approx(0.625) and fit.thresholds["answers"] == 0.5
    assert fit.band == BAND
    # uncertain: sessions with an item within the band (0.05) of the threshold
    assert fit.before.uncertain == 0 and fit.after.uncertain == 0
    stored = fit.stored("c1")
    assert stored is not None and stored.thresholds["expresses"] == pytest.approx(0.625)
    assert stored.describe() == "thresholds fitted by calibration c1: answers 0.5 (band ±0.05), expresses 0.625 " \
                                "(band ±0.05)"


def test_scores_are_fitted_by_macro_f1_over_the_scale_points():
    # two items of one point each: met both -> 5, one -> 3, none -> 1. People: 5, 3, 1 in turn, eight of each.
    # p(sorry), p(when) per category: 5: (0.8, 0.8); 3: (0.8, 0.35); 1: (0.35, 0.35). At 0.3 all score 5.
    labels = label_set([(f"s{i}", "reply", (5, 3, 1)[i % 3], "ana") for i in range(24)]).labels
    probs = {f"s{i}": [{"sorry": 0.8, "when": 0.8}, {"sorry": 0.8, "when": 0.35},
                       {"sorry": 0.35, "when": 0.35}][i % 3] for i in range(24)}
    fit = fit_rubric(TWO_ITEMS, SCALE, labels, probs, shipped=SHIPPED, band=BAND)
    assert fit.classes == {"1": 8, "3": 8, "5": 8}
    assert fit.before.agreement == pytest.approx(1 / 3) and fit.after.agreement == 1.0
    assert fit.after.threshold == pytest.approx((0.35 + 0.8) / 2) and fit.after.macro_f1 == 1.0


def test_a_fitted_threshold_is_the_number_stored_so_the_figures_and_a_report_use_that_one():
    # the people's line lies between 0.1639 (the highest fail) and 0.164 (the lowest pass): their
    # midpoint in floating point is 0.16394999999999998, which prints as 0.1639 while the 6 decimals
    # stored make it 0.16395 (0.1640); the fit tries, reports and stores 0.16395
    probs = _probs([0.164 + 0.02 * i for i in range(12)] + [0.1639 - 0.01 * i for i in range(12)])
    fit = fit_rubric(ONE_ITEM, SCALE, _labels([True] * 12 + [False] * 12), probs, shipped=SHIPPED, band=BAND)
    assert fit.after.agreement == 1.0 and fit.degenerate is None
    stored = fit.to_json()
    assert fit.after.threshold == fit.thresholds["expresses"] == stored["thresholds"]["expresses"] == 0.16395
    assert f"{fit.thresholds['expresses']:.4f}" == f"{stored['thresholds']['expresses']:.4f}" == "0.1640"
    assert stored["after"]["threshold"] == 0.164
    assert candidates([{"a": 0.1639}, {"a": 0.164}]) == [0.08195, 0.16395, 0.582]


def test_a_fit_that_puts_every_session_in_one_category_is_degenerate_and_not_stored():
    # the people split, but the judge gives every session the same probability
    fit = fit_rubric(ONE_ITEM, SCALE, _labels([True, False] * 12), {f"s{i}": {"sorry": 0.6} for i in range(24)},
                     shipped=SHIPPED, band=BAND)
    assert fit.degenerate is not None and "every labelled session scores" in fit.degenerate
    assert fit.stored("c1") is None


def test_macro_f1_and_the_candidates_by_hand():
    # judge 1 1 0 0, people 1 0 0 0: F1(pass) = 2/(2+1) = 2/3, F1(fail) = 2*2/(4+1) = 4/5
    assert macro_f1([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx((2 / 3 + 4 / 5) / 2)
    assert candidates([{"a": 0.2}, {"a": 0.6, "b": 0.2}]) == pytest.approx([0.1, 0.4, 0.8])
    assert candidates([]) == []


def test_an_even_split_of_annotators_is_left_out():
    labels = label_set([("s1", "apology", True, "ana"), ("s1", "apology", False, "ben"),
                        ("s2", "apology", True, "ana"), ("s2", "apology", True, "ben")]).labels
    assert people_categories(labels, SCALE) == {"s1": None, "s2": 1}


def test_too_few_labels_one_class_or_a_free_form_rubric_are_refused_by_name():
    with pytest.raises(UsageError) as few:
        check_fit_labels({"apology": (ONE_ITEM, SCALE)}, _labels([True, False] * 9 + [True]))
    assert f"rubric 'apology' has 19 labelled sessions; fitting the offline judge's threshold needs at least " \
           f"{MIN_ITEMS}" in str(few.value)
    with pytest.raises(UsageError) as one:
        check_fit_labels({"apology": (ONE_ITEM, SCALE)}, _labels([True] * 25))
    assert "the people label every session pass" in str(one.value)
    with pytest.raises(UsageError) as free:
        check_fit_labels({"tone": (FREE, SCALE)}, _labels([True, False] * 12, rubric="tone"))
    assert "rubric 'tone' is free-form" in str(free.value)
    check_fit_labels({"apology": (ONE_ITEM, SCALE)}, _labels([True, False] * 10))  # 20: enough


def test_too_few_sessions_with_probabilities_are_refused_after_judging():
    probs = {**_probs(PASS_P + FAIL_P), "s3": None, "s4": None, "s5": None, "s6": None, "s7": None}
    with pytest.raises(UsageError, match="probabilities for 19 labelled sessions"):
        fit_rubric(ONE_ITEM, SCALE, _labels([True] * 12 + [False] * 12), probs, shipped=SHIPPED, band=BAND)


def test_a_stored_fit_reads_back_and_a_broken_one_says_so():
    assert FittedLocalThresholds.from_figure("c", None) is None
    assert FittedLocalThresholds.from_figure("c", {"degenerate": "why", "thresholds": {}, "band": {}}) is None
    with pytest.raises(ConfigError, match="calibration c: its stored local thresholds do not read"):
        FittedLocalThresholds.from_figure("c", {"thresholds": {"expresses": "x"}, "band": {}})


def _identity(model: str = LOCAL_JUDGE, rubric: str = "apology") -> JudgeIdentity:
    return JudgeIdentity(model, "rubric_items_judge", "abc123", rubric, "h1")


def _report(fit_values: list[float], judge: JudgeIdentity) -> CalibrationReport:
    none = Estimate(None)
    figures = PairStats(n=24, exact=none, within_one=none, kappa=none, weighted_kappa=none, spearman=none,
                          kendall=none, mean_bias=none, confusion=[[0, 0], [0, 0]])
    agreement = RubricAgreement(rubric="apology", items=24, annotators=["ana"], categories=[0, 1],
                                judge_vs_humans=figures,
                                humans=figures, alpha=none, alpha_humans=none)
    r = RubricCalibration(rubric="apology", name="Apologises", scale="pass/fail", agreement=agreement, unscored=[],
                          judge=judge)
    r.local = fit_rubric(ONE_ITEM, SCALE, _labels([True] * 12 + [False] * 12), _probs(fit_values, 0.3),
                         shipped=SHIPPED, band=BAND)
    return CalibrationReport(judge=judge.judge_model, labels="labels.jsonl", annotators=["ana"], rubrics=[r],
                             resamples=0)


def test_the_fit_is_stored_with_the_calibration_and_the_newest_fit_is_found(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/cal.db")
    runtime = Runtime(store=store)
    try:
        judge = _identity()
        at = datetime(2026, 11, 1, tzinfo=timezone.utc)
        rows = calibration_rows(_report(PASS_P + FAIL_P, judge), at=at)
        assert rows[0].figures[LOCAL_THRESHOLDS]["thresholds"]["expresses"] == pytest.approx(0.625)
        store.write(save_calibrations, rows)
        # a newer calibration without a fit (calibrate run again without --fit-local) leaves the fit in use
        store_calibration(store, judge, 0.7, at=at + timedelta(days=1))
        # another judge (an LLM) on the same rubric, and the offline judge on another rubric: no fit
        store_calibration(store, _identity("openai/gpt-4o-mini"), 0.9)
        found = asyncio.run(fitted_local_thresholds(runtime, [judge, _identity("openai/gpt-4o-mini"),
                                                              _identity(rubric="other")]))
        assert list(found) == [judge.key]
        assert found[judge.key].calibration_id == rows[0].id
        assert found[judge.key].thresholds["expresses"] == pytest.approx(0.625)
        # a newer fit replaces it
        newer = calibration_rows(_report([p + 0.1 for p in PASS_P + FAIL_P], judge), at=at + timedelta(days=2))
        store.write(save_calibrations, newer)
        found = asyncio.run(fitted_local_thresholds(runtime, [judge]))
        assert found[judge.key].calibration_id == newer[0].id
        assert found[judge.key].thresholds["expresses"] == pytest.approx(0.725)
        # no store: nothing fitted, no error
        assert asyncio.run(fitted_local_thresholds(None, [judge])) == {}
    finally:
        asyncio.run(runtime.aclose())
        store.close()


def test_the_rubric_judge_is_built_with_the_fitted_thresholds_and_says_so(tmp_path):
    from pathlib import Path

    from jurist.rubrics import load_rubrics
    from jurist.rubrics.api import build_judge, evaluate_result
    from jurist.rubrics.calibration import rubric_identities

    support = Path(__file__).resolve().parents[2] / "examples" / "labels" / "support"
    rubric_set = load_rubrics(support / "rubrics.json")
    sessions = [support / "sessions" / f"t{n:02d}.jsonl" for n in (1, 2, 3, 4)]
    store = Store(f"sqlite:///{tmp_path}/fit.db")
    runtime = Runtime(store=store)

    def fit_figure(expresses: float) -> dict:
        return {"thresholds": {"expresses": expresses, "answers": 0.5}, "band": {"expresses": 0.0, "answers": 0.0},
                "degenerate": None}

    async def scores() -> list:
        out = []
        for s in sessions:
            result = await evaluate_result(rubric_set, s, judge=LOCAL_JUDGE, runtime=runtime)
            out.append(result.rubric_scores[0])
        return out

    try:
        shipped = asyncio.run(scores())
        assert all(s.local_thresholds is None for s in shipped)
        rj = build_judge(runtime, judge=LOCAL_JUDGE)
        judge = rubric_identities(rubric_set, rj)["apology"]
        asyncio.run(rj.aclose())
        # a fit that meets every item, then a newer one that meets none: each run is judged with the newest
        for expresses, score in ((0.0, 5.0), (1.0, 1.0)):
            row = store_calibration(store, judge, 0.5)
            with store.engine.begin() as conn:
                from sqlalchemy import update

                from jurist.store.tables import calibrations
                conn.execute(update(calibrations).where(calibrations.c.id == row)
                             .values(figures={LOCAL_THRESHOLDS: fit_figure(expresses)}))
            fitted = asyncio.run(scores())
            assert [s.score for s in fitted] == [score] * len(sessions)
            assert {s.local_thresholds for s in fitted} == {
                f"thresholds fitted by calibration {row}: answers 0.5 (band ±0), expresses {expresses:g} (band ±0)"}
            assert all(s.items and s.items[0].met is (score == 5.0) for s in fitted)
        # another judge on the rubric is not touched: the fit is the offline judge's
        other = _identity("openai/gpt-4o-mini")
        assert asyncio.run(fitted_local_thresholds(runtime, [other])) == {}
    finally:
        asyncio.run(runtime.aclose())
        store.close()
