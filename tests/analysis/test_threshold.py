"""The fitted pass threshold, checked against examples worked by hand."""

from __future__ import annotations

import pytest

from jurist.analysis.calibrate import JudgeScore, rubric_calibration
from jurist.analysis.labels import Label
from jurist.analysis.threshold import fit_threshold

# Five items, one annotator; the judge passes an item at a score >= t. By hand, for each t
# (the judge's pass per item, then agreement with the people's [T, F, F, F, F] and F1 of the pass):
#   t=0.1  1 1 1 1 1   agreement 1/5 = 0.2   F1 = 2*1 / (2*1 + 4 + 0) = 1/3
#   t=0.2  0 1 1 1 1   agreement 0/5 = 0.0   F1 = 0 (no true pass)
#   t=0.3  0 0 1 1 1   agreement 1/5 = 0.2   F1 = 0
#   t=0.4  0 0 0 1 1   agreement 2/5 = 0.4   F1 = 0
#   t=0.5  0 0 0 0 1   agreement 3/5 = 0.6   F1 = 0
SCORES = [0.1, 0.2, 0.3, 0.4, 0.5]
PEOPLE = [{"ana": True}, {"ana": False}, {"ana": False}, {"ana": False}, {"ana": False}]


def test_agreement_and_f1_pick_the_thresholds_worked_by_hand():
    by_agreement = fit_threshold(SCORES, PEOPLE, fit="agreement", resamples=0)
    assert by_agreement.threshold == 0.5 and by_agreement.n == 5
    assert by_agreement.agreement.value == 0.6 and by_agreement.f1 == 0.0
    # κ at t=0.5: observed 0.6; the judge and the people both pass 1 in 5, chance 0.2*0.2 + 0.8*0.8 = 0.68,
    # κ = (0.6 - 0.68) / (1 - 0.68) = -0.25
    assert by_agreement.kappa.value == -0.25

    by_f1 = fit_threshold(SCORES, PEOPLE, fit="f1", resamples=0)
    assert by_f1.threshold == 0.1 and by_f1.f1 == round(1 / 3, 4) and by_f1.agreement.value == 0.2


def test_ties_go_to_the_other_figure_then_the_lower_threshold():
    # scores 0.2, 0.4, 0.6, 0.8; people F, T, F, T:
    #   t=0.2  1111  agreement 0.5   F1 4/6
    #   t=0.4  0111  agreement 0.75  F1 4/5
    #   t=0.6  0011  agreement 0.5   F1 2/4
    #   t=0.8  0001  agreement 0.75  F1 2/3
    # agreement ties at 0.4 and 0.8; F1 breaks it: 0.4.
    fitted = fit_threshold([0.2, 0.4, 0.6, 0.8], [{"a": 0}, {"a": 1}, {"a": 0}, {"a": 1}], resamples=0)
    assert fitted.threshold == 0.4 and fitted.agreement.value == 0.75 and fitted.f1 == 0.8
    # the candidates are the judge's scores: one score, one threshold
    assert fit_threshold([0.3, 0.3], [{"a": 1}, {"a": 1}], resamples=0).threshold == 0.3


def test_pairs_are_one_per_annotator_and_unscored_items_are_left_out():
    # item 1 (0.9): ana pass, ben fail; item 2 (0.2): both fail; item 3: no score.
    # t=0.2: passes 1 and 2: pairs (1,1) (1,0) (1,0) (1,0) -> 1/4; t=0.9: (1,1) (1,0) (0,0) (0,0) -> 3/4
    fitted = fit_threshold([0.9, 0.2, None], [{"ana": True, "ben": False}, {"ana": False, "ben": False},
                                              {"ana": True}], resamples=0)
    assert (fitted.threshold, fitted.n, fitted.agreement.value) == (0.9, 4, 0.75)
    assert fit_threshold([None], [{"a": 1}], resamples=0).threshold is None


def test_the_interval_is_a_bootstrap_over_items_around_the_value():
    fitted = fit_threshold(SCORES * 4, PEOPLE * 4, resamples=300, seed=1)
    assert fitted.threshold == 0.5
    assert fitted.agreement.low < 0.6 < fitted.agreement.high
    assert 0.0 <= fitted.agreement.low and fitted.agreement.high <= 1.0
    again = fit_threshold(SCORES * 4, PEOPLE * 4, resamples=300, seed=1)
    assert again.agreement == fitted.agreement  # seeded


def test_unknown_fit_is_refused():
    with pytest.raises(ValueError, match="agreement, f1"):
        fit_threshold(SCORES, PEOPLE, fit="accuracy")


def test_a_pass_fail_rubric_reports_its_threshold_and_the_pass_rule_it_was_compared_at():
    labels = [Label(item=f"i{k}", rubric="safe", label=p["ana"], annotator="ana") for k, p in enumerate(PEOPLE)]
    scores = dict(zip([f"i{k}" for k in range(5)], SCORES))
    cal = rubric_calibration("safe", "Safe", (0.0, 1.0), labels, lambda item: JudgeScore(scores[item]),
                             resamples=0, pass_at=0.3)
    # at the rule used (pass at >= 0.3): the judge passes i2..i4, the people only i0 -> 1 agreement in 5
    assert cal.pass_at == 0.3 and cal.agreement.judge_vs_humans.exact.value == 0.2
    assert cal.threshold is not None and cal.threshold.threshold == 0.5
    data = cal.to_json()
    assert data["threshold"]["agreement"]["value"] == 0.6 and data["pass_at"] == 0.3
    scored = rubric_calibration("safe", "Safe", (1.0, 5.0), [Label(item="i0", rubric="safe", label=4.0,
                                                                   annotator="ana")],
                                lambda item: JudgeScore(4.0), resamples=0)
    assert scored.threshold is None and scored.pass_at is None  # a scored rubric has no pass threshold


def test_a_fit_that_separates_nothing_is_degenerate():
    # The hand-worked example's fits: by agreement t=0.5 has κ -0.25; by F1 t=0.1 passes every item.
    by_agreement = fit_threshold(SCORES, PEOPLE, fit="agreement", resamples=0, scale=(0.0, 1.0))
    assert by_agreement.degenerate == "threshold 0.5 is degenerate: Cohen's κ at it is -0.250, no better than chance"
    by_f1 = fit_threshold(SCORES, PEOPLE, fit="f1", resamples=0)
    assert by_f1.degenerate is not None and by_f1.degenerate.startswith(
        "threshold 0.1 is degenerate: every item passes (it is the lowest score the judge gave)")
    # The judge's scores do not follow the people's: the fit lands on the bottom of the scale.
    flat = fit_threshold([0.0, 0.5, 0.0, 0.5], [{"a": True}, {"a": False}, {"a": True}, {"a": True}], resamples=0,
                         scale=(0.0, 1.0))
    assert flat.threshold == 0.0 and flat.kappa.value == 0.0 and flat.degenerate == (
        "threshold 0 is degenerate: it is at the bottom of the scale (0-1), so every item passes; Cohen's κ at it "
        "is 0.000, no better than chance")
    assert flat.to_json()["degenerate"] == flat.degenerate
    good = fit_threshold([0.2, 0.4, 0.6, 0.8], [{"a": False}, {"a": False}, {"a": True}, {"a": True}], resamples=0,
                         scale=(0.0, 1.0))
    assert good.threshold == 0.6 and good.kappa.value == 1.0 and good.degenerate is None
