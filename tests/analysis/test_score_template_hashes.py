"""Every stored score carries the hash of the prompt that produced it: research and gate score rows
are judged with a prompt version, and the prompt lab's static A-versus-B comparison finds them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from jurist.analysis import compare_versions, create_prompt_version
from jurist.analysis.prompt_tests import activate_version
from jurist.config import Settings
from jurist.gate import Gate, GateConfig
from jurist.judges.templates import builtin
from jurist.models import script
from jurist.research import ResearchEvaluation, research_config
from jurist.store.tables import scores

from tests.golden import text
from tests.research.golden import SOURCES

QUERIES = ["What causes tides?", "How high do spring tides get?", "Why are there two tides a day?"]
ROLES = ("intent_analyst", "coverage_checker", "quality_assessor", "fact_checker", "faithfulness_judge")


def _role(request: Any) -> str:
    """Version 2 of the role prompt (it says "strictly") gets lower scores than version 1."""
    dims = list(dict(request.response_schema or {})["properties"]["scores"]["properties"])
    score = 0.6 if "strictly" in text(request.messages) else 0.9
    return json.dumps({"scores": {d: score for d in dims}, "confidence": 0.8, "critique": "ok"})


async def _research(store: Any, query: str) -> str:
    cfg = research_config({"evaluators": {r: {"model": "scripted/hash-panel"} for r in ROLES},
                           "iteration": {"max_attempts": 1}})

    async def planner(q: str, feedback: Any, mode: str | None) -> dict[str, Any]:
        return {"objective": q, "search_queries": [q]}

    async def synthesiser(q: str, sources: list[Any], feedback: str | None) -> str:
        return "The moon's pull."

    async with ResearchEvaluation(cfg, settings=Settings.load(max_retries=0), store=store) as ev:
        plan = (await ev.evaluate_plan(query, planner)).plan
        await ev.evaluate_retrieval(query, plan, SOURCES)
        await ev.evaluate_answer(query, SOURCES, synthesiser)
        return (await ev.save()).log_id


def _hashes(store: Any, evaluation_id: str) -> dict[str, str | None]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(scores.c.key, scores.c.template_hash)
                            .where(scores.c.evaluation_id == evaluation_id)).all()
    return {r.key: r.template_hash for r in rows}


async def test_research_scores_carry_the_role_prompts_hash_and_versions_compare(store):
    script("hash-panel", default=_role)
    shipped = builtin("panel_role")
    first = _hashes(store, await _research(store, QUERIES[0]))
    assert {"overall", "plan.overall", "plan.intent_alignment", "answer.coherence"} <= set(first)
    assert set(first.values()) == {shipped.hash}  # every row: the shipped role prompt

    for query in QUERIES[1:]:
        await _research(store, query)
    v2 = await create_prompt_version(store, "panel_role", shipped.text.replace(
        "You are", "You are strictly", 1), note="stricter")
    await activate_version(store, "panel_role", v2.version)
    for query in QUERIES:
        log_id = await _research(store, query)
    assert set(_hashes(store, log_id).values()) == {v2.hash}

    result = await compare_versions(store, "panel_role", 1, v2.version, key="answer.overall")
    assert result.refused is None, result.refused
    assert (result.n_a, result.n_b) == (3, 3) and result.test == "paired t-test"
    assert result.mean_a == pytest.approx(0.9) and result.mean_b == pytest.approx(0.6)


async def test_gate_scores_carry_the_judge_prompts_hash(store):
    script("hash-judge", default=json.dumps({"quality_score": 0.9, "confidence_score": 0.9, "issues": [],
                                             "improvement_hint": None}))
    script("hash-gen", default="Paris.")
    async with Gate(GateConfig(evaluate_feedback_enabled=True), settings=Settings.load(), store=store,
                    judge="scripted/hash-judge") as gate:
        record = await gate.run([{"role": "user", "content": "Capital of France?"}], "scripted/hash-gen")
    assert record.attempts[0].evaluation.template_hash == builtin("gate_quality").hash
    store.flush()
    with store.engine.connect() as conn:
        rows = conn.execute(select(scores.c.key, scores.c.template_hash)).all()
    assert [(r.key, r.template_hash) for r in rows] == [("attempt.1", builtin("gate_quality").hash)]
    v2 = await create_prompt_version(store, "gate_quality", builtin("gate_quality").text + "\nBe brief.")
    found = await compare_versions(store, "gate_quality", 1, v2.version)
    assert found.n_a == 1 and found.n_b == 0  # version 1's verdict is found (n = 0 before)
