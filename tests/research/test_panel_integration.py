"""ResearchEvaluation with its default evaluators: real Panels on scripted models."""

from __future__ import annotations

import json

from jurist.config import Settings
from jurist.models import ChatRequest, script, scripted
from jurist.research import ResearchEvaluation, load_research_config, research_config
from jurist.store import Store
from jurist.testing import Reply

from tests.research.fakes import SOURCES, Planner, Synthesiser
from tests.quoting import prompt_text

QUERY = "What causes tides and how high do spring tides get?"
ROLES = ("intent_analyst", "coverage_checker", "faithfulness_judge", "quality_assessor", "fact_checker")


def _score(dim: str, prompt: str) -> float:
    return 0.3 if dim == "query_coverage" and "plan 1" in prompt else 0.9


def role_reply(request: ChatRequest) -> str:
    prompt = prompt_text(request.messages)
    dims = list(request.response_schema["properties"]["scores"]["properties"])
    return json.dumps({"scores": {d: _score(d, prompt) for d in dims}, "confidence": 0.8, "critique": "ok"})


def escalation_reply(request: ChatRequest) -> str:
    prompt = prompt_text(request.messages)
    props = request.response_schema["properties"]
    return json.dumps({"panel_review": "the panel is right", "verdict": "agree",
                       "trust": {r: 0.9 for r in props["trust"]["properties"]},
                       "scores": {d: _score(d, prompt) for d in props["scores"]["properties"]}})


CRITIC = json.dumps({"passed": False, "scores": {"intent_alignment": 0.9, "query_coverage": 0.3,
                                                 "scope_appropriateness": 0.9},
                     "failure_type": "missing_coverage", "critique": "spring tides are not searched",
                     "recommendation": "targeted_fix",
                     "specific_issues": [{"issue": "no query on spring tides", "fix": "add 'spring tide height'"}]})


async def test_default_panels_on_scripted_models(tmp_path):
    script("panel", default=role_reply)
    script("escalation", default=escalation_reply)
    script("critic", CRITIC)
    cfg = research_config({"evaluators": {r: {"model": "scripted/panel"} for r in ROLES},
                           "escalation_model": "scripted/escalation", "critic_model": "scripted/critic"})
    store = Store(f"sqlite:///{tmp_path}/p.db")
    try:
        async with ResearchEvaluation(cfg, settings=Settings.load(), store=store) as ev:
            plan = (await ev.evaluate_plan(QUERY, Planner())).plan
            await ev.evaluate_retrieval(QUERY, plan, SOURCES)
            await ev.evaluate_answer(QUERY, SOURCES, Synthesiser())
            rec = await ev.save()
        calls = store.calls(limit=None)
    finally:
        store.close()
    pe = rec.plan_evaluation
    assert [a.passed for a in pe.attempts] == [False, True] and plan["objective"] == "plan 2"
    first = pe.attempts[0]
    assert {r.role for r in first.evaluator_results} == {"intent_analyst", "coverage_checker", "quality_assessor"}
    # the coverage checker's 0.3 against the other roles' 0.9: the roles disagree (> 0.3), near the pass mark
    assert first.escalation is not None and first.escalation.trigger == "disagreement"
    assert first.escalation.model == "scripted/escalation" and first.escalation_triggers == ["disagreement", "borderline"]
    assert first.iteration_decision.specific_issues[0].fix == "add 'spring tide height'"
    assert pe.escalated_to_large_model
    assert {r.role for r in rec.retrieval_evaluation.evaluator_results} == {
        "coverage_checker", "faithfulness_judge", "quality_assessor"}
    assert set(rec.answer_evaluation.final_scores) == {"faithfulness", "relevance", "factual_accuracy",
                                                        "completeness", "coherence"}
    assert not rec.evaluation_skipped and rec.overall_score is not None
    purposes = {c["purpose"] for c in calls}
    assert {"panel_role", "panel_escalation", "plan_critic"} <= purposes
    assert all(c["trace_id"] == ev.log_id for c in calls)
    assert scripted("critic").queue == []


async def test_unresolvable_models_skip_the_stages(tmp_path):
    cfg = research_config({"evaluators": {r: {"model": "nosuchprovider/x"} for r in ROLES}})
    store = Store(f"sqlite:///{tmp_path}/p.db")
    try:
        async with ResearchEvaluation(cfg, settings=Settings.load(), store=store) as ev:
            plan = (await ev.evaluate_plan(QUERY, Planner())).plan
            await ev.evaluate_retrieval(QUERY, plan, SOURCES)
            answer = (await ev.evaluate_answer(QUERY, SOURCES, Synthesiser())).answer
            rec = ev.record()
    finally:
        store.close()
    assert plan["objective"] == "plan 1" and answer == "answer 1"
    assert rec.evaluation_skipped and "unknown provider 'nosuchprovider'" in rec.plan_evaluation.skip_reason
    assert rec.retrieval_evaluation.evaluation_skipped and rec.answer_evaluation.evaluation_skipped


# --- research.model against the real HTTP provider ------------------------------------------------


def _http_reply(body: dict) -> Reply:
    """Role, escalation and critic replies, by the JSON schema the request asks for."""
    schema = body["response_format"]["json_schema"]
    request = ChatRequest(messages=body["messages"], response_schema=schema["schema"])
    replies = {"panel_role": role_reply, "panel_escalation": escalation_reply,
               "plan_critic": lambda _: CRITIC, "plan_meta_review": lambda _: CRITIC}
    return Reply(text=replies[schema["name"]](request))


async def _research_run(folder):
    """Plan, retrieval and answer of one query, configured as jurist.yaml and the environment say."""
    settings = Settings.load()
    store = Store(f"sqlite:///{folder}/p.db")
    try:
        async with ResearchEvaluation(load_research_config(settings=settings), settings=settings,
                                      store=store) as ev:
            plan = (await ev.evaluate_plan(QUERY, Planner())).plan
            await ev.evaluate_retrieval(QUERY, plan, SOURCES)
            await ev.evaluate_answer(QUERY, SOURCES, Synthesiser())
            return ev.record()
    finally:
        store.close()


async def test_research_model_reaches_every_role_critic_and_escalation(isolated, provider, monkeypatch):
    # As a new user configures it: an OpenAI-compatible server, a judge, and research.model.
    monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("JURIST_JUDGE", "openai/gpt-4o-mini")
    (isolated / "jurist.yaml").write_text("max_retries: 0\ntimeout: 5\nresearch:\n  model: openai/gpt-4o-mini\n")
    provider.default = _http_reply
    rec = await _research_run(isolated)
    assert not rec.evaluation_skipped and rec.skip_reason is None, rec.skip_reason
    sent = [(r["json"]["model"], r["json"]["response_format"]["json_schema"]["name"]) for r in provider.requests]
    assert {model for model, _ in sent} == {"gpt-4o-mini"}
    assert {purpose for _, purpose in sent} == {"panel_role", "panel_escalation", "plan_critic"}
    roles = {prompt_text(r["json"]["messages"]).split(" on a panel", 1)[0].removeprefix("You are the ")
             for r in provider.requests if r["json"]["response_format"]["json_schema"]["name"] == "panel_role"}
    assert roles == set(ROLES)
    used = {r.model for s in (*rec.plan_evaluation.attempts, rec.retrieval_evaluation, *rec.answer_evaluation.attempts)
            for r in s.evaluator_results}
    assert used == {"openai/gpt-4o-mini"}
    assert rec.plan_evaluation.attempts[0].escalation.model == "openai/gpt-4o-mini"
    assert rec.plan_evaluation.attempts[0].iteration_decision.critic_model == "openai/gpt-4o-mini"


async def test_an_evaluator_whose_every_call_fails_says_so(isolated, provider, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    (isolated / "jurist.yaml").write_text("max_retries: 0\nresearch:\n  model: openai/gpt-4o-mini\n")
    provider.default = Reply(status=500, text=None)
    rec = await _research_run(isolated)
    assert provider.requests and {r["json"]["model"] for r in provider.requests} == {"gpt-4o-mini"}
    assert rec.evaluation_skipped and rec.overall_score is None
    summary = rec.summary()
    assert summary["evaluationSkipped"] is True and summary["skipReason"] == rec.skip_reason
    for stage in ("plan", "retrieval", "answer"):
        reason = next(p for p in rec.skip_reason.split("; ") if p.startswith(f"{stage}: "))
        assert "every role failed" in reason and "openai/gpt-4o-mini" in reason, reason
