"""Research stages with require_calibration: refused before the stage runs (the planner or
synthesiser included) unless the stage panel's judges are calibrated on its dimensions;
calibrate_research on a labelled items file against a real HTTP judge."""

from __future__ import annotations

import json

import pytest

import jurist
from jurist.analysis.calibrate_panel import calibrate_research, load_research_items
from jurist.errors import CalibrationRequired, ConfigError, InputError
from jurist.judges.calibration import CalibrationRequirement
from jurist.judges.panel import Panel, Role
from jurist.research import ResearchEvaluation
from jurist.research.config import load_research_config, research_config
from jurist.testing import Reply
from tests.calibrations import label_set, store_calibration
from tests.judges.test_panel_calibration import role_judge
from tests.research.fakes import Planner, Synthesiser

ANSWER_DIMS = ("faithfulness", "relevance", "factual_accuracy", "completeness", "coherence")
SOURCES = [{"id": "s1", "title": "Tower", "content": "Built in 1889; 330 m tall."}]


def _config_file(tmp_path, provider, stage_yaml: str = "      require_calibration: {min_kappa: 0.6}\n"):
    path = tmp_path / "jurist.yaml"
    path.write_text(
        "max_retries: 0\n"
        f"providers:\n  fake:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: k\n"
        "research:\n  model: fake/m\n  escalation_model: null\n  stages:\n    answer:\n" + stage_yaml)
    return path


def _items_file(tmp_path, n: int = 6):
    path = tmp_path / "items.jsonl"
    rows = [{"item": f"q{k}", "query": f"What about the tower, {k}?", "sources": SOURCES,
             "answer": ("GOOD" if k % 2 else "weak") + f" answer {k}"} for k in range(n)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path, rows


async def test_an_uncalibrated_answer_stage_refuses_before_the_synthesiser_is_asked(provider, tmp_path):
    provider.default = role_judge
    path = _config_file(tmp_path, provider)
    async with jurist.open(path) as rt:
        synthesiser = Synthesiser()
        async with ResearchEvaluation(runtime=rt) as ev:
            assert ev.config.evaluation.answer_evaluation.fail_action == "continue"  # not swallowed as a failure
            with pytest.raises(CalibrationRequired) as caught:
                await ev.evaluate_answer("What about the tower?", SOURCES, synthesiser)
    assert synthesiser.feedback == [] and provider.requests == []
    message = str(caught.value)
    for dim in ANSWER_DIMS:
        assert f"rubric {dim!r}: no stored calibration" in message
    assert caught.value.commands == [f"jurist calibrate --research answer --config {path} --items ITEMS.jsonl "
                                     "--labels LABELS.jsonl"]


async def test_calibrate_research_then_the_stage_runs(provider, tmp_path):
    provider.default = role_judge
    path = _config_file(tmp_path, provider)
    items, rows = _items_file(tmp_path)
    labels = label_set([(r["item"], dim, r["answer"].startswith("GOOD"), who) for r in rows for dim in ANSWER_DIMS
                        for who in ("ana", "ben")])
    async with jurist.open(path) as rt:
        report = await calibrate_research("answer", items, labels, rt, resamples=100)
        assert {r.rubric for r in report.rubrics} == set(ANSWER_DIMS) and report.target == "panel"
        assert all(r.agreement.judge_vs_humans.weighted_kappa.value == 1.0 and r.pass_at == 0.7
                   for r in report.rubrics)
        calls = len(provider.requests)
        assert calls == 6 * 5  # six items, the answer stage's five roles
        async with ResearchEvaluation(runtime=rt) as ev:
            out = await ev.evaluate_answer("What about the tower?", SOURCES, Synthesiser())
        assert not out.evaluation.evaluation_skipped and len(provider.requests) > calls
        # another stage's bar is its own: the plan stage has none here, it runs
        async with ResearchEvaluation(runtime=rt) as ev:
            await ev.evaluate_plan("What about the tower?", Planner())


async def test_a_bar_on_one_dimension_and_a_low_kappa(provider, tmp_path):
    provider.default = role_judge
    path = _config_file(tmp_path, provider, "      dimensions:\n        coherence: {weight: 0.1, "
                                            "require_calibration: {min_kappa: 0.5}}\n")
    async with jurist.open(path) as rt:
        async with ResearchEvaluation(runtime=rt) as ev:
            panel = ev.build_panel("answer")
            coherence = next(i for _, i in panel.identities() if i.rubric == "coherence")
            await panel.aclose()
            store_calibration(rt.store, coherence, 0.2)
            with pytest.raises(CalibrationRequired) as caught:
                await ev.evaluate_answer("q?", SOURCES, Synthesiser())
            assert "rubric 'coherence'" in str(caught.value) and "faithfulness" not in str(caught.value)
            store_calibration(rt.store, coherence, 0.55)
            out = await ev.evaluate_answer("q?", SOURCES, Synthesiser())
            assert not out.evaluation.evaluation_skipped


async def test_a_panel_given_for_a_stage_is_checked_before_the_planner(provider, tmp_path):
    provider.default = role_judge
    async with jurist.open(_config_file(tmp_path, provider, "      pass_threshold: 0.7\n")) as rt:
        panel = Panel([Role("judge", ["intent_alignment", "query_coverage", "scope_appropriateness"],
                            model="fake/m")], {"intent_alignment": 1, "query_coverage": 1, "scope_appropriateness": 1},
                      runtime=rt, require_calibration=CalibrationRequirement(min_kappa=0.6))
        planner = Planner()
        async with ResearchEvaluation(runtime=rt, evaluators={"plan": panel}) as ev:
            with pytest.raises(CalibrationRequired):
                await ev.evaluate_plan("q?", planner)
        await panel.aclose()
    assert planner.calls == [] and provider.requests == []


async def test_the_offline_evaluators_cannot_be_required_calibrated(tmp_path):
    cfg = research_config({"stages": {"answer": {"require_calibration": {"min_kappa": 0.6}}}})
    async with ResearchEvaluation.local(cfg) as ev:
        with pytest.raises(ConfigError, match="no judge to look one up for"):
            await ev.evaluate_answer("q?", SOURCES, Synthesiser())
        await ev.evaluate_plan("q?", Planner())  # no bar on the plan stage


def test_the_bar_is_validated_in_the_configuration(tmp_path):
    with pytest.raises(ConfigError, match=r"research.stages.answer.require_calibration.min_kappa"):
        research_config({"stages": {"answer": {"require_calibration": {"min_kappa": 2}}}})
    with pytest.raises(ConfigError, match=r"coherence.require_calibration"):
        research_config({"stages": {"answer": {"dimensions": {"coherence": {"require_calibration": 0.6}}}}})
    cfg = load_research_config({"stages": {"plan": {"require_calibration": {"min_kappa": 0.6}, "dimensions": {
        "scope_appropriateness": {"require_calibration": {"min_kappa": 0.3}}}}}})
    assert cfg.stages.plan.calibration_bars() == {"intent_alignment": CalibrationRequirement(min_kappa=0.6),
                                                  "query_coverage": CalibrationRequirement(min_kappa=0.6),
                                                  "scope_appropriateness": CalibrationRequirement(min_kappa=0.3)}
    assert research_config({}).stages.answer.calibration_bars() == {}  # off by default


def test_research_items_are_checked_with_their_line(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"item": "q1", "query": "q", "plan": {"steps": [1]}}) + "\n")
    assert load_research_items(path, "plan") == {"q1": {"query": "q", "plan": '{\n  "steps": [\n    1\n  ]\n}'}}
    path.write_text(json.dumps({"item": "q1", "query": "q", "plan": "p"}) + "\n"
                    + json.dumps({"item": "q2", "query": "q"}) + "\n")
    with pytest.raises(InputError, match=r"items.jsonl:2: the plan stage judges query, plan; this item has no plan"):
        load_research_items(path, "plan")
    path.write_text(json.dumps({"item": "q1", "query": "q", "sources": ["a"], "answer": "x", "extra": 1}) + "\n")
    with pytest.raises(InputError, match=r"items.jsonl:1: unknown field 'extra' \(fields: item, query, plan, "):
        load_research_items(path, "answer")
    path.write_text(json.dumps({"item": "q1", "query": "q", "sources": ["a"], "anwser": "x"}) + "\n")
    with pytest.raises(InputError, match=r"items.jsonl:1: unknown field 'anwser' \(did you mean 'answer'\?\)"):
        load_research_items(path, "answer")


def test_a_calibration_bar_is_a_number_not_a_boolean():
    with pytest.raises(ConfigError, match=r"min_kappa: expected a number, got true"):
        research_config({"stages": {"answer": {"require_calibration": {"min_kappa": True}}}})
