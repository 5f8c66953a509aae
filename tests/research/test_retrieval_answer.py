"""Retrieval flags severe failures; the answer is regenerated once below 0.5."""

from __future__ import annotations

import pytest

from jurist.research import ResearchConfig, evaluate_answer, evaluate_retrieval, research_config
from jurist.research import stages as st

from tests.research.fakes import BAD_ANSWER, GOOD_ANSWER, GOOD_RETRIEVAL, SOURCES, FakeEvaluator, Synthesiser

QUERY = "What causes tides?"
PLAN = {"search_queries": ["tides moon"]}


async def test_retrieval_is_logged_and_not_flagged_above_half():
    ev = FakeEvaluator(st.RETRIEVAL, GOOD_RETRIEVAL)
    sec = await evaluate_retrieval(QUERY, PLAN, SOURCES, evaluator=ev, config=ResearchConfig())
    assert sec.passed and not sec.flagged_severe and sec.warnings == []
    assert sec.scores == GOOD_RETRIEVAL and sec.overall == pytest.approx(0.7575)
    assert [(s.source_id, s.title, s.url) for s in sec.source_details] == [
        ("a", "A", "https://a.example"), ("s2", None, None)]
    assert '"content": "plain beta text"' in ev.subjects[0]["sources"]
    assert '"tides moon"' in ev.subjects[0]["plan"]


async def test_retrieval_flags_a_dimension_below_half():
    scores = dict(GOOD_RETRIEVAL, context_recall=0.42)
    sec = await evaluate_retrieval(QUERY, PLAN, SOURCES, evaluator=FakeEvaluator(st.RETRIEVAL, scores),
                                   config=ResearchConfig())
    assert sec.flagged_severe and sec.severe_dimensions == ["context_recall"] and not sec.passed
    assert sec.warnings == ["Retrieval quality warning: context_recall 0.42 - may be missing key sources"]
    assert sec.to_json()["flaggedSevere"] is True


async def test_retrieval_flags_a_low_overall():
    scores = {"context_recall": 0.5, "context_precision": 0.5, "source_quality": 0.0}
    sec = await evaluate_retrieval(QUERY, PLAN, SOURCES, evaluator=FakeEvaluator(st.RETRIEVAL, scores),
                                   config=ResearchConfig())
    assert sec.flagged_severe and sec.overall == pytest.approx(0.375)
    assert sec.severe_dimensions == ["source_quality"]


async def test_answer_above_half_is_not_regenerated():
    synth = Synthesiser()
    out = await evaluate_answer(QUERY, SOURCES, synth, evaluator=FakeEvaluator(st.ANSWER, GOOD_ANSWER),
                                config=ResearchConfig())
    assert out.answer == "answer 1" and synth.feedback == [None]
    assert out.evaluation.passed and not out.evaluation.regenerated and len(out.evaluation.attempts) == 1


async def test_answer_below_half_is_regenerated_once_with_feedback():
    synth = Synthesiser()
    ev = FakeEvaluator(st.ANSWER, BAD_ANSWER, GOOD_ANSWER)
    out = await evaluate_answer(QUERY, SOURCES, synth, evaluator=ev, config=ResearchConfig())
    sec = out.evaluation
    assert out.answer == "answer 2" and sec.regenerated and sec.final_attempt == 2
    assert len(synth.feedback) == 2 and synth.feedback[0] is None
    assert "below 0.5" in synth.feedback[1] and "faithfulness 0.20" in synth.feedback[1]
    assert "fake critique" in synth.feedback[1]
    assert [a.answer for a in sec.attempts] == ["answer 1", "answer 2"]
    assert sec.attempts[1].feedback == synth.feedback[1]
    assert sec.final_scores == GOOD_ANSWER and sec.passed
    assert [s["answer"] for s in ev.subjects] == ["answer 1", "answer 2"]


async def test_regeneration_only_once_and_the_better_answer_wins():
    synth = Synthesiser()
    worse = dict(BAD_ANSWER, faithfulness=0.1)
    out = await evaluate_answer(QUERY, SOURCES, synth, evaluator=FakeEvaluator(st.ANSWER, BAD_ANSWER, worse),
                                config=ResearchConfig())
    assert len(synth.feedback) == 2  # once, even though the second is still bad
    assert out.answer == "answer 1" and out.evaluation.final_attempt == 1 and out.evaluation.regenerated


async def test_regeneration_disabled():
    synth = Synthesiser()
    cfg = research_config({"evaluation": {"answerEvaluation": {"regenerationEnabled": False}}})
    out = await evaluate_answer(QUERY, SOURCES, synth, evaluator=FakeEvaluator(st.ANSWER, BAD_ANSWER), config=cfg)
    assert synth.feedback == [None] and not out.evaluation.regenerated and out.evaluation.passed is False


async def test_failing_regeneration_keeps_the_first_answer():
    synth = Synthesiser(fail_on=2)
    out = await evaluate_answer(QUERY, SOURCES, synth, evaluator=FakeEvaluator(st.ANSWER, BAD_ANSWER),
                                config=ResearchConfig())
    assert out.answer == "answer 1" and not out.evaluation.regenerated
    assert "answer regeneration failed (RuntimeError: synthesiser broke)" in out.evaluation.warnings[0]


async def test_given_answer_is_not_synthesised():
    synth = Synthesiser()
    out = await evaluate_answer(QUERY, SOURCES, synth, evaluator=FakeEvaluator(st.ANSWER, GOOD_ANSWER),
                                config=ResearchConfig(), answer="mine")
    assert out.answer == "mine" and synth.feedback == []


async def test_regenerated_answer_that_cannot_be_evaluated():
    synth = Synthesiser()
    ev = FakeEvaluator(st.ANSWER, BAD_ANSWER, RuntimeError("judge gone"))
    out = await evaluate_answer(QUERY, SOURCES, synth, evaluator=ev, config=ResearchConfig())
    sec = out.evaluation
    assert out.answer == "answer 2" and sec.final_attempt == 2 and sec.attempts[1].evaluation_skipped
    assert sec.final_scores == BAD_ANSWER and "could not be evaluated" in sec.scoring_note


async def test_source_relevance_reported_by_an_evaluator_is_read_and_booleans_are_not_numbers():
    import json

    from tests.research.fakes import panel_result

    result = panel_result(GOOD_RETRIEVAL, st.RETRIEVAL)
    raw = json.dumps({"sources": [{"id": "a", "relevance": 0.75}, {"id": "s2", "relevance": True}, "junk"]})
    result = result.model_copy(update={"role_results": [result.role_results[0].model_copy(
        update={"raw_response": raw})]})
    section = await evaluate_retrieval("q", {"objective": "x"}, SOURCES,
                                       evaluator=FakeEvaluator(st.RETRIEVAL, result), config=ResearchConfig())
    assert [(d.source_id, d.relevance) for d in section.source_details] == [("a", 0.75), ("s2", None)]
