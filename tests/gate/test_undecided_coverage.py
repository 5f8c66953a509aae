"""The gate on a judge that matches meaning and cannot decide every part of the question: the
parts it did decide settle the verdict when the others cannot change it; otherwise the
evaluation is skipped, saying why. The judge is scripted: a table of part -> covered (True /
False) or None for a part it is unsure of, answered per attempt."""

from __future__ import annotations

import pytest

from jurist.config import Settings
from jurist.errors import Uncertain
from jurist.gate import Gate, GateConfig
from jurist.gate.evaluators import coverage_evaluation
from jurist.models import script
from jurist.models.base import CoverageResult

QUESTION = [{"role": "user", "content": "When was the Eiffel Tower built? How tall is it? Who designed it?"}]
PARTS = ["When was the Eiffel Tower built?", "How tall is it?", "Who designed it?"]


class ScriptedCoverage:
    """A meaning judge whose coverage answers come from ``tables``, one per call; it says which
    parts it decided, as the local judge does."""

    name = "mine/coverage"

    def __init__(self, *tables):
        self.tables = list(tables)

    async def coverage(self, question, answer, parts=None):
        table = self.tables.pop(0)
        decided = CoverageResult(covered=[p for p in PARTS if table[p] is True],
                                 uncovered=[p for p in PARTS if table[p] is False],
                                 confidence={p: 0.8 for p in PARTS if table[p] is not None}, judge_model=self.name)
        unsure = [p for p in PARTS if table[p] is None]
        if unsure:
            raise Uncertain(f"uncertain: not sure about {unsure[0]!r}", subject=unsure[0], probability=0.5,
                            threshold=0.5, band=0.1, undecided=unsure, decided=decided)
        return decided

    async def expresses(self, text, statements):
        raise AssertionError("not asked")

    async def relevance(self, query, passages):
        raise AssertionError("not asked")

    async def support(self, answer, sources):
        raise AssertionError("not asked")


def table(built, tall, who):
    return dict(zip(PARTS, (built, tall, who)))


async def run(config, *tables):
    script("gen", "Built in 1889.", "Built in 1889, 330 m tall, by Gustave Eiffel's company.")
    g = Gate(GateConfig(evaluate_feedback_enabled=True, **config), settings=Settings.load(),
             judge=ScriptedCoverage(*tables))
    try:
        return await g.run(QUESTION, "scripted/gen")
    finally:
        await g.aclose()


async def test_a_part_found_missing_fails_comprehensiveness_whatever_the_undecided_part_is():
    result = await run({"evaluator": "comprehensiveness"}, table(True, False, None), table(True, True, True))
    first = result.evaluations[0]
    assert first.passed is False and first.comprehensive is False
    assert first.issues == ["does not address: How tall is it?",
                            "could not decide whether it addresses: Who designed it?"]
    assert result.accepted_attempt == 2 and result.accept_reason == "passed"


async def test_an_undecided_part_that_could_change_the_verdict_skips_the_evaluation():
    result = await run({"evaluator": "comprehensiveness"}, table(True, True, None))
    assert result.accept_reason == "evaluation_skipped" and result.evaluations[0].passed is None
    assert "uncertain: not sure about 'Who designed it?'" in result.skip_reason


async def test_quality_is_decided_when_the_score_range_lies_on_one_side_of_the_threshold():
    # threshold 0.4: one part covered of three, one undecided -> between 1/3 and 2/3: could go either way
    skipped = await run({}, table(True, False, None))
    assert skipped.accept_reason == "evaluation_skipped"
    # two covered, one undecided -> at least 2/3: passes either way; the score is the end that decides
    passed = await run({}, table(True, True, None))
    ev = passed.evaluations[0]
    assert passed.accept_reason == "passed" and ev.passed and ev.quality_score == 0.6667
    assert ev.issues == ["could not decide whether it addresses: Who designed it?"]
    assert ev.reason == "quality lies between 0.6667 and 1 and passes the threshold 0.4 either way"
    # none covered, one undecided, threshold 0.5 -> at most 1/3: fails either way, and is regenerated
    failed = await run({"threshold": 0.5}, table(False, False, None), table(True, True, True))
    ev = failed.evaluations[0]
    assert ev.passed is False and ev.quality_score == 0.3333 and failed.accepted_attempt == 2
    assert ev.reason == "quality lies between 0 and 0.3333 and fails the threshold 0.5 either way"
    assert ev.issues == ["does not address: When was the Eiffel Tower built?", "does not address: How tall is it?",
                         "could not decide whether it addresses: Who designed it?"]
    assert ev.improvement_hint == "Also address: When was the Eiffel Tower built?; How tall is it?; Who designed it?"


@pytest.mark.parametrize(("name", "threshold", "covered", "uncovered", "undecided", "decided"), [
    ("comprehensiveness", 0.4, ["a"], [], [], True),
    ("comprehensiveness", 0.4, ["a"], ["b"], ["c"], False),
    ("comprehensiveness", 0.4, ["a", "b"], [], ["c"], None),
    ("quality", 0.5, ["a"], ["b"], [], True),
    ("quality", 0.5, ["a"], ["b"], ["c"], None),
    ("quality", 0.3, ["a"], ["b"], ["c"], True),
    ("quality", 0.7, ["a"], ["b"], ["c"], False),
    ("quality", 0.4, [], [], [], False),
])
def test_coverage_evaluation_decides_only_what_the_undecided_parts_cannot_change(
        name, threshold, covered, uncovered, undecided, decided):
    cov = CoverageResult(covered=covered, uncovered=uncovered, confidence={p: 0.9 for p in covered + uncovered},
                         judge_model="m")
    ev = coverage_evaluation(cov, name, threshold, undecided)
    assert (None if ev is None else ev.passed) == decided
