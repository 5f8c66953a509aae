"""The fail-safe wrapper: enabled flags, timeouts and failAction on every stage."""

from __future__ import annotations

import logging

import pytest

from jurist.errors import JuristError, ModelUnavailable
from jurist.research import ResearchBlocked, ResearchEvaluation, research_config
from jurist.research import stages as st

from tests.research.fakes import (
    GOOD_ANSWER, GOOD_PLAN, GOOD_RETRIEVAL, SOURCES, FakeEvaluator, Planner, Synthesiser, skipped_result,
)

QUERY = "What causes tides?"
GOOD = {st.PLAN: GOOD_PLAN, st.RETRIEVAL: GOOD_RETRIEVAL, st.ANSWER: GOOD_ANSWER}
SECTION = {st.PLAN: "planEvaluation", st.RETRIEVAL: "retrievalEvaluation", st.ANSWER: "answerEvaluation"}


def evaluation(stage: str, broken: FakeEvaluator, **section: object) -> ResearchEvaluation:
    cfg = research_config({"evaluation": {SECTION[stage]: section}}) if section else research_config({})
    evaluators = {s: FakeEvaluator(s, GOOD[s]) for s in st.STAGE_NAMES}
    evaluators[stage] = broken
    return ResearchEvaluation(cfg, evaluators=evaluators, critic=None)


async def run_stages(ev: ResearchEvaluation) -> tuple[object, str]:
    plan = (await ev.evaluate_plan(QUERY, Planner())).plan
    await ev.evaluate_retrieval(QUERY, plan, SOURCES)
    answer = (await ev.evaluate_answer(QUERY, SOURCES, Synthesiser())).answer
    return plan, answer


def section_of(ev: ResearchEvaluation, stage: str):
    return {st.PLAN: ev.plan, st.RETRIEVAL: ev.retrieval, st.ANSWER: ev.answer}[stage]


@pytest.mark.parametrize("stage", st.STAGE_NAMES)
async def test_continue_skips_the_stage_and_research_goes_on(stage, caplog):
    ev = evaluation(stage, FakeEvaluator(stage, ModelUnavailable("endpoint down")))
    with caplog.at_level(logging.INFO, logger="jurist.research"):
        plan, answer = await run_stages(ev)
    assert plan["objective"] == "plan 1" and answer == "answer 1"  # the research completed
    sec = section_of(ev, stage)
    assert sec.evaluation_skipped and sec.skip_reason == "ModelUnavailable: endpoint down"
    assert sec.warnings == []
    rec = ev.record()
    assert rec.evaluation_skipped and rec.skip_reason == f"{stage}: ModelUnavailable: endpoint down"
    assert rec.warnings == []
    assert f"{stage} evaluation skipped" in caplog.text
    others = [s for s in st.STAGE_NAMES if s != stage]
    assert all(not section_of(ev, s).evaluation_skipped for s in others)
    assert rec.overall_score is not None  # the mean of the stages that were scored


@pytest.mark.parametrize("stage", st.STAGE_NAMES)
async def test_warn_adds_a_warning_to_the_record(stage, caplog):
    ev = evaluation(stage, FakeEvaluator(stage, RuntimeError("boom")), failAction="warn")
    with caplog.at_level(logging.WARNING, logger="jurist.research"):
        await run_stages(ev)
    rec = ev.record()
    assert section_of(ev, stage).evaluation_skipped
    assert rec.warnings == [f"{stage} evaluation skipped (RuntimeError: boom); research continued without "
                            "quality validation"]
    assert "RuntimeError: boom" in caplog.text


@pytest.mark.parametrize("stage", st.STAGE_NAMES)
async def test_block_raises_a_typed_error(stage):
    ev = evaluation(stage, FakeEvaluator(stage, RuntimeError("boom")), failAction="block")
    with pytest.raises(ResearchBlocked) as err:
        await run_stages(ev)
    assert isinstance(err.value, JuristError) and err.value.stage == stage
    assert "RuntimeError: boom" in str(err.value) and "failAction" in str(err.value)


@pytest.mark.parametrize("stage", st.STAGE_NAMES)
async def test_timeout_is_a_failure(stage):
    ev = evaluation(stage, FakeEvaluator(stage, GOOD[stage], delay=5), timeout=50)
    await run_stages(ev)
    sec = section_of(ev, stage)
    assert sec.evaluation_skipped and sec.skip_reason == "timed out after 0.05 s"


async def test_timeout_with_block_raises():
    ev = evaluation(st.ANSWER, FakeEvaluator(st.ANSWER, GOOD_ANSWER, delay=5), timeout=50, failAction="block")
    with pytest.raises(ResearchBlocked, match="timed out after 0.05 s"):
        await run_stages(ev)


@pytest.mark.parametrize("stage", st.STAGE_NAMES)
async def test_a_panel_without_surviving_roles_is_a_failure(stage):
    ev = evaluation(stage, FakeEvaluator(stage, skipped_result("every role failed: ModelTimeout")))
    await run_stages(ev)
    assert section_of(ev, stage).skip_reason == "EvaluationUnavailable: every role failed: ModelTimeout"


@pytest.mark.parametrize("stage", st.STAGE_NAMES)
async def test_disabled_stage_is_skipped_without_a_call(stage):
    broken = FakeEvaluator(stage, RuntimeError("must not be called"))
    ev = evaluation(stage, broken, enabled=False, failAction="block")
    await run_stages(ev)
    assert broken.subjects == []
    assert section_of(ev, stage).skip_reason == f"{stage} evaluation disabled by configuration"


async def test_all_disabled():
    evaluators = {s: FakeEvaluator(s, RuntimeError("no")) for s in st.STAGE_NAMES}
    ev = ResearchEvaluation(research_config({"evaluation": {"enabled": False}}), evaluators=evaluators)
    plan, answer = await run_stages(ev)
    rec = ev.record()
    assert rec.evaluation_skipped and rec.overall_score is None and answer == "answer 1"
    assert all(not e.subjects for e in evaluators.values())


async def test_persistence_error_is_logged_not_raised(caplog):
    class BrokenStore:
        def save_evaluation(self, *a: object) -> None:
            raise RuntimeError("disk full")

    ev = ResearchEvaluation(research_config({}), evaluators={s: FakeEvaluator(s, GOOD[s]) for s in st.STAGE_NAMES},
                            store=BrokenStore())  # type: ignore[arg-type]
    await run_stages(ev)
    with caplog.at_level(logging.ERROR, logger="jurist.research"):
        rec = await ev.save()
    assert rec.overall_score is not None and "disk full" in caplog.text


async def test_per_attempt_timeout_bounds_the_plan_evaluation():
    cfg = research_config({"iteration": {"timeout_per_attempt": 50}})
    ev = ResearchEvaluation(cfg, evaluators={st.PLAN: FakeEvaluator(st.PLAN, GOOD_PLAN, delay=5)}, critic=None)
    out = await ev.evaluate_plan(QUERY, Planner())
    assert out.plan["objective"] == "plan 1"
    assert out.evaluation.evaluation_skipped and out.evaluation.skip_reason == "timed out after 0.05 s"
