"""Two experiments compared: pairs, differences, tests, regressions, refusals, nothing dropped silently."""

from __future__ import annotations

import pytest
from scipy import stats

from jurist.errors import UsageError
from jurist.experiments.compare import compare_experiments, gate
from jurist.experiments.records import RubricRef
from tests.experiments.compare_data import RUBRICS, item, record, run

IDS = [f"q{i:02d}" for i in range(20)]


def _baseline() -> dict[str, tuple[float | None, float | None]]:
    return {iid: (5.0, 4.0) for iid in IDS}


def test_a_real_drop_is_significant_and_its_regressions_are_named():
    a_rows = _baseline()
    b_rows = dict(a_rows)
    for iid in IDS[:10]:  # the new prompt gets ten answers wrong
        b_rows[iid] = (2.0, 4.0)
    a, b = record("before", items=20), record("after", items=20)
    got = compare_experiments(a, run("before", a_rows), b, run("after", b_rows), resamples=500)
    overall, correct, concise = got.metrics
    assert (overall.key, correct.key, concise.key) == ("overall", "correct", "concise")
    assert correct.pairs == 20 and correct.mean_a == 5.0 and correct.mean_b == 3.5
    assert correct.difference == -1.5 and correct.ci_low is not None and correct.ci_high is not None
    assert correct.ci_low <= -1.5 <= correct.ci_high < 0
    d = [-3.0] * 10 + [0.0] * 10
    assert correct.scores.p_value == pytest.approx(float(stats.wilcoxon(d).pvalue))
    assert correct.flips.p_value == pytest.approx(2 * 0.5**10)
    assert correct.regressions == 10 and correct.improvements == 0
    assert correct.significant_drop and overall.significant_drop and not concise.significant_drop
    assert concise.scores.p_value == 1.0 and concise.difference == 0.0
    # Benjamini-Hochberg across overall and the rubrics
    raw = [m.scores.p_value for m in got.metrics]
    assert [m.scores.p_adjusted for m in got.metrics] == pytest.approx(
        list(stats.false_discovery_control(raw, method="bh")))
    assert got.regressions == IDS[:10] and got.improvements == []
    assert not got.different and not got.only_in_a and not got.not_paired
    row = next(r for r in got.items if r.item_id == "q00")
    assert (row.score_a, row.score_b, row.difference, row.change) == (4.5, 3.0, -1.5, "regression")
    assert row.rubrics["correct"].difference == -3.0 and row.evaluation_b == "ev-after-q00"
    reasons = gate(got, max_regressions=0)
    assert any(r.startswith("Correct: a significant drop of -1.5") for r in reasons)
    assert any("10 item(s) went from pass to fail" in r for r in reasons)
    assert gate(got, max_regressions=10) == [r for r in reasons if "item(s) went" not in r]


def test_noise_is_not_a_drop():
    a_rows = _baseline()
    b_rows = dict(a_rows)
    b_rows["q03"] = (4.0, 4.0)
    b_rows["q07"] = (5.0, 5.0)
    a, b = record("a", items=20), record("b", items=20)
    got = compare_experiments(a, run("a", a_rows), b, run("b", b_rows), resamples=200)
    assert not got.significant_drops and got.regressions == []
    assert gate(got) == []


def test_the_seed_makes_the_interval_repeatable():
    a_rows = {iid: (float(i % 5 + 1), 3.0) for i, iid in enumerate(IDS)}
    b_rows = {iid: (float((i * 3) % 5 + 1), 3.0) for i, iid in enumerate(IDS)}
    a, b = record("a", items=20), record("b", items=20)
    one = compare_experiments(a, run("a", a_rows), b, run("b", b_rows), resamples=300, seed=1)
    two = compare_experiments(a, run("a", a_rows), b, run("b", b_rows), resamples=300, seed=1)
    other = compare_experiments(a, run("a", a_rows), b, run("b", b_rows), resamples=300, seed=2)
    assert one.model_dump() == two.model_dump()
    assert one.metrics[1].ci_low != other.metrics[1].ci_low or one.metrics[1].ci_high != other.metrics[1].ci_high


@pytest.mark.parametrize(("change", "what"), [
    ({"judges": ["openai/other-judge"]}, "judge models"),
    ({"dataset_version": "d2"}, "dataset version"),
    ({"rubrics": [RubricRef(id="correct", name="Correct", template_hash="t-new"), RUBRICS[1]]},
     "judge template of rubric correct"),
])
def test_unlike_runs_are_refused_unless_allowed(change, what):
    a, b = record("a", items=20), record("b", items=20, **change)
    items_a, items_b = run("a", _baseline()), run("b", _baseline())
    with pytest.raises(UsageError, match="--allow-different") as info:
        compare_experiments(a, items_a, b, items_b)
    assert what in str(info.value)
    got = compare_experiments(a, items_a, b, items_b, allow_different=True, resamples=100)
    assert got.allowed_different and any(what in d for d in got.different)
    assert got.notes[0].startswith("compared although the runs are not like with like")
    same = compare_experiments(a, items_a, a, items_a, allow_different=True, resamples=100)
    assert not same.allowed_different and same.different == []


def test_nothing_is_dropped_silently():
    a_rows = _baseline()
    b_rows = dict(a_rows)
    del b_rows["q19"]  # B was interrupted before q19
    items_a = run("a", a_rows) + [item("a", "q20", {"correct": 5.0, "concise": 5.0})]
    items_b = [i for i in run("b", b_rows) if i.item_id not in ("q01", "q02")] + [
        item("b", "q01", {"correct": None, "concise": None}, answer=None, error="timed out after 30 s"),
        item("b", "q02", {"correct": None, "concise": 4.0}, error="judge reply not JSON"),
        item("b", "q21", {"correct": 1.0, "concise": 1.0}),
    ]
    a, b = record("a", items=21), record("b", items=22, status="interrupted")
    got = compare_experiments(a, items_a, b, items_b, resamples=100)
    assert got.only_in_a == ["q19", "q20"] and got.only_in_b == ["q21"]
    assert got.not_paired["q01"] == "the target failed in B: timed out after 30 s"
    assert got.not_paired["q02"] == "not scored in B: judge reply not JSON"
    assert got.not_paired["q19"] == "only in A" and got.not_paired["q21"] == "only in B"
    assert "q01" in got.regressions  # the app now fails where it passed
    assert "q02" not in got.regressions  # the judge failed, not the app: not paired, said so
    correct = got.metrics[1]
    assert correct.pairs == 17 and got.metrics[2].pairs == 18  # q02 is paired on concise
    assert any(n.startswith("B (b) is interrupted") for n in got.notes)
    assert {r.item_id for r in got.items} == {*IDS, "q20", "q21"}


def test_too_few_pairs_say_so_and_never_gate_on_a_made_up_p():
    a_rows = {iid: (5.0, 5.0) for iid in IDS[:4]}
    b_rows = {iid: (1.0, 1.0) for iid in IDS[:4]}
    a, b = record("a", items=4), record("b", items=4)
    got = compare_experiments(a, run("a", a_rows), b, run("b", b_rows))
    for m in got.metrics:
        assert m.scores.p_value is None and m.scores.p_adjusted is None and m.flips.p_value is None
        assert m.scores.note is not None and m.scores.note.startswith("not enough pairs")
        assert m.ci_low is None and m.difference == -4.0 and not m.significant_drop
    assert any("not enough pairs" in n for n in got.notes)
    assert gate(got, max_regressions=4) == []
    assert gate(got, max_regressions=3) != []  # four items regressed: more than three


def test_rubrics_in_one_run_only_are_listed():
    extra = RubricRef(id="polite", name="Polite", template_hash="t-polite")
    a = record("a", items=20)
    b = record("b", items=20, rubrics=[RubricRef(id="correct", name="Correct", template_hash="t-correct"), extra])
    got = compare_experiments(a, run("a", _baseline()), b, run("b", _baseline()), resamples=100)
    assert got.rubrics_only_in_a == ["concise"] and got.rubrics_only_in_b == ["polite"]
    assert [m.key for m in got.metrics] == ["overall", "correct"]


def test_bad_alpha_and_duplicate_items_are_usage_errors():
    a = record("a", items=20)
    with pytest.raises(UsageError, match="alpha"):
        compare_experiments(a, [], a, [], alpha=1.5)
    twice = run("a", _baseline()) + run("a", {"q00": (1.0, 1.0)})
    with pytest.raises(UsageError, match="item 'q00' twice"):
        compare_experiments(a, twice, a, run("a", _baseline()))
