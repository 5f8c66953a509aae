"""The checklist evaluator, a panel and the gate in Python, judged by the real server."""

from __future__ import annotations

import json

import pytest

import jurist
from jurist.checklist.evaluator import ChecklistEvaluator
from jurist.checklist.points import load_checklist
from jurist.gate import Gate, GateConfig
from jurist.judges import Panel, Role
from tests.realserver.conftest import EXAMPLES, MODEL, write_config

pytestmark = pytest.mark.realserver

JUDGE = f"llamacpp/{MODEL}"


def calls_of(rt: jurist.Runtime, trace_id: str) -> list[dict]:
    rt.store.flush()
    return rt.store.calls(trace_id=trace_id, limit=None)


async def test_the_checklist_evaluator(llama, tmp_path) -> None:
    write_config(tmp_path, llama.base_url)
    checklist = load_checklist(EXAMPLES / "checklists" / "caffeine.json")
    learner = json.loads((EXAMPLES / "checklists" / "caffeine_learner.json").read_text())["messages"]
    async with jurist.open(tmp_path / "jurist.yaml") as rt:
        evaluator = ChecklistEvaluator(JUDGE, runtime=rt)
        try:
            result = await evaluator.evaluate_batch(checklist.points, [{"role": "user", "content": learner[1]}],
                                                    trace_id="checklist-1")
        finally:
            await evaluator.aclose()
        [call] = calls_of(rt, "checklist-1")
    assert result.status == "ok", result.reason  # the reply parsed
    assert set(result.recalled_point_ids) <= {p.id for p in checklist.points} and not result.dropped_ids
    assert all(0 <= c <= 1 for c in result.confidence_per_point.values())
    assert call["purpose"] == "checklist_batch" and call["params"]["structured_output"] == "json_object_schema"
    assert call["input_tokens"] > 100 and call["output_tokens"] > 5


async def test_a_panel(llama, tmp_path) -> None:
    write_config(tmp_path, llama.base_url)
    roles = [Role("accuracy_checker", ["accuracy"], model=JUDGE), Role("clarity_checker", ["clarity"], model=JUDGE)]
    async with jurist.open(tmp_path / "jurist.yaml") as rt:
        panel = Panel(roles, {"accuracy": 2, "clarity": 1}, runtime=rt, store=rt.sink)
        try:
            result = await panel.evaluate({"user_query": "What is the capital of France?", "answer": "Paris."},
                                          task="Judge the answer to the user's query.", trace_id="panel-1")
        finally:
            await panel.aclose()
        calls = calls_of(rt, "panel-1")
    assert [r.role for r in result.role_results] == ["accuracy_checker", "clarity_checker"]
    assert result.status == "ok" and 0 <= result.overall <= 1  # both roles' replies parsed
    assert all(0 <= r.confidence <= 1 for r in result.role_results)
    assert len(calls) >= 2 and {c["params"]["structured_output"] for c in calls} == {"json_object_schema"}
    assert result.tokens_used == sum(c["input_tokens"] + c["output_tokens"] for c in calls) > 0


@pytest.mark.parametrize("strategy", ["blocking", "revision"])
async def test_the_gate_with_the_model_as_generator_and_judge(llama, tmp_path, strategy) -> None:
    write_config(tmp_path, llama.base_url)
    config = GateConfig(strategy=strategy, judge=JUDGE, budget_s=600, judge_timeout_s=300, max_tokens=48)
    async with jurist.open(tmp_path / "jurist.yaml") as rt:
        gate = Gate(config, runtime=rt)
        try:
            result = await gate.run([{"role": "user", "content": "What is the capital of France?"}], JUDGE,
                                    trace_id=f"gate-{strategy}", wait_for_evaluation=True)
        finally:
            await gate.aclose()
        stored = {c["id"]: c for c in calls_of(rt, f"gate-{strategy}")}
    assert result.answer and result.error is None
    [ev] = result.evaluations
    assert ev.passed is not None, ev  # the quality judge's reply parsed
    kinds = [c.type for c in result.llm_calls]
    assert kinds == ["generation", "quality_evaluation"] and set(stored) == {c.call_id for c in result.llm_calls}
    generation, judged = result.llm_calls
    assert generation.call_id is not None and judged.call_id is not None
    assert stored[generation.call_id]["response_text"] == result.answer
    assert generation.tokens is None  # streamed: this server sends no usage in a stream
    assert (judged.input_tokens or 0) > 50 and (judged.output_tokens or 0) > 5
    assert stored[judged.call_id]["params"]["structured_output"] == "json_object_schema"
