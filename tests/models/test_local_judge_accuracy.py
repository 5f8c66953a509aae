"""benchmarks/local_judge_accuracy.py: the metrics it prints, on cases worked out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "local_judge_accuracy.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("local_judge_accuracy", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_auc_counts_each_positive_over_each_negative_and_ties_as_half(bench: ModuleType) -> None:
    # positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of 4 orderings right
    assert bench.roc_auc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == pytest.approx(0.75)
    assert bench.roc_auc([0.5, 0.5, 0.9], [True, False, True]) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        bench.roc_auc([0.1, 0.2], [True, True])


def test_macro_f1_is_the_mean_of_both_classes_f1(bench: ModuleType) -> None:
    predicted, labels = [True, True, False, False], [True, False, False, False]
    assert bench.f1(predicted, labels) == pytest.approx(2 / 3)
    assert bench.f1(predicted, labels, positive=False) == pytest.approx(0.8)
    assert bench.macro_f1(predicted, labels) == pytest.approx((2 / 3 + 0.8) / 2)
    assert bench.accuracy(predicted, labels) == pytest.approx(0.75)


def test_the_threshold_is_fitted_on_the_scores_given(bench: ModuleType) -> None:
    assert bench.fit_threshold([0.1, 0.2, 0.8, 0.9], [False, False, True, True]) == pytest.approx(0.8)
    # nothing separates them: saying no to all (a threshold above every score) ties with the others
    t = bench.fit_threshold([0.5, 0.5], [True, False])
    assert t in (0.5, 1.5)


def test_map_and_mrr_drop_questions_without_a_correct_sentence(bench: ModuleType) -> None:
    scores = [0.9, 0.5, 0.7, 0.4, 0.6, 0.3, 0.1]
    labels = [False, True, True, False, False, True, False]
    groups = ["a", "a", "a", "b", "b", "c", "c"]
    ap_a = (1 / 2 + 2 / 3) / 2  # ranked: 0.9 wrong, 0.7 right, 0.5 right
    mean_ap, mrr, counted = bench.ranking_metrics(scores, labels, groups)
    assert counted == 2
    assert mean_ap == pytest.approx((ap_a + 1.0) / 2)
    assert mrr == pytest.approx((1 / 2 + 1.0) / 2)
    with pytest.raises(ValueError):
        bench.ranking_metrics([0.1], [False], ["a"])


def test_ties_are_not_broken_in_favour_of_the_order_given(bench: ModuleType) -> None:
    # the data files list the correct sentences first; a scorer that gives every sentence
    # the same score must not get a perfect ranking from that order
    groups = [f"q{i}" for i in range(30) for _ in range(10)]
    labels = [j == 0 for _ in range(30) for j in range(10)]
    mean_ap, mrr, _ = bench.ranking_metrics([0.5] * 300, labels, groups)
    assert mean_ap < 0.6 and mrr < 0.6
    assert bench.ranking_metrics([0.5] * 300, labels, groups) == (mean_ap, mrr, 30)  # seeded: the same each run


def test_ece_weighs_each_bins_gap_by_its_share(bench: ModuleType) -> None:
    # bin [0.9, 1.0]: confidence 0.95, accuracy 0.5; bin [0.5, 0.6): confidence 0.55, accuracy 1.0
    assert bench.ece([0.95, 0.95, 0.55, 0.55], [True, False, True, True]) == pytest.approx(0.45)
    assert bench.ece([1.0, 1.0], [True, True]) == pytest.approx(0.0)  # 1.0 falls in the last bin
    assert bench.ece([0.7] * 10, [True] * 7 + [False] * 3) == pytest.approx(0.0)


def test_word_overlap_counts_the_references_content_words(bench: ModuleType) -> None:
    assert bench.overlap("The terminals are connected", "terminal 1 is connected to the battery") == 1.0
    assert bench.overlap("The bulb is in a closed path", "the battery is damaged") == 0.0
    assert bench.overlap("the", "anything") == 0.0  # no content word


def test_the_confidence_of_a_decision_is_the_probability_of_the_side_chosen(bench: ModuleType) -> None:
    assert bench.confidence_of(0.9, 0.6) == pytest.approx(0.9)
    assert bench.confidence_of(0.2, 0.6) == pytest.approx(0.8)
    d = bench.band_decisions([0.62, 0.9, 0.1], 0.6, 0.05)
    assert [x.uncertain for x in d] == [True, False, False]
    assert [x.said_yes(0.6) for x in d] == [True, True, False]
