"""The LangGraph helper: evaluate node and the regenerate / accept edge."""

from __future__ import annotations

import importlib.util
import os
import runpy
from pathlib import Path

import pytest

if importlib.util.find_spec("langgraph") is None:
    if os.environ.get("CI"):
        pytest.fail("langgraph is not installed (pip install 'jurist[langgraph]')")
    pytest.skip("langgraph is not installed", allow_module_level=True)

from jurist.config import Settings  # noqa: E402
from jurist.gate import Gate, GateConfig  # noqa: E402
from jurist.models import script  # noqa: E402
from tests.gate.helpers import bad, good  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gate_langgraph.py"


def _graph(gate: Gate, answers: list[str]):
    from langgraph.graph import START, StateGraph

    from jurist.gate.langgraph import GateState, add_gate

    seen: list[str | None] = []

    async def generate_response(state: GateState) -> dict:
        seen.append(state.get("regeneration_instruction"))
        return {"response_text": answers[len(seen) - 1]}

    builder = StateGraph(GateState)
    builder.add_node("generate_response", generate_response)
    builder.add_edge(START, "generate_response")
    add_gate(builder, gate)
    return builder.compile(), seen


async def test_regenerates_once_then_accepts():
    script("judge", bad(), good())
    gate = Gate(GateConfig(evaluate_feedback_enabled=True), settings=Settings.load(), judge="scripted/judge")
    graph, seen = _graph(gate, ["half", "whole"])
    state = await graph.ainvoke({"messages": [{"role": "user", "content": "q?"}], "regeneration_count": 0})
    await gate.aclose()
    assert state["response_text"] == "whole" and state["regeneration_count"] == 1
    assert state["quality_score"] == 0.9 and state["gate_decision"] == "accept"
    assert seen[0] is None and "Give the height too." in seen[1] and "(DO NOT repeat this): half" in seen[1]
    assert state["evaluation_feedback"] is None


async def test_cap_and_disabled_flag_accept():
    script("judge", default=bad())
    gate = Gate(GateConfig(evaluate_feedback_enabled=True), settings=Settings.load(), judge="scripted/judge")
    graph, seen = _graph(gate, ["a", "b", "c"])
    state = await graph.ainvoke({"messages": [{"role": "user", "content": "q?"}], "regeneration_count": 0})
    assert len(seen) == 2 and state["response_text"] == "b"  # quality: one regeneration
    off = Gate(GateConfig(), settings=Settings.load(), judge="scripted/judge")
    graph, seen = _graph(off, ["a", "b"])
    state = await graph.ainvoke({"messages": [{"role": "user", "content": "q?"}]})
    assert len(seen) == 1 and state["quality_score"] == 0.2  # scored, never regenerated
    await gate.aclose()
    await off.aclose()


def test_example_runs_offline_and_leaves_nothing_behind(capsys, isolated):
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    assert "330 metres" in out and "regenerations: 1" in out
    assert list(isolated.iterdir()) == []  # no store in JURIST_HOME, the data folder or the current folder


def _gate(rt, **cfg) -> Gate:
    cfg.setdefault("evaluate_feedback_enabled", True)
    return Gate(GateConfig(**cfg), runtime=rt, judge="scripted/judge")


def _stored(rt) -> list[dict]:
    rt.store.flush()
    return rt.store.evaluations(kind="gate")


async def test_a_graph_run_stores_the_record_gate_run_stores_and_streams_the_thinking_event():
    from jurist.runtime import Runtime

    script("judge", bad(), good())
    rt = Runtime(Settings.load())
    gate = _gate(rt)
    graph, _ = _graph(gate, ["half", "whole"])
    custom, final = [], None
    async for mode, chunk in graph.astream({"messages": [{"role": "user", "content": "q?"}], "regeneration_count": 0},
                                           stream_mode=["custom", "values"]):
        if mode == "custom":
            custom.append(chunk)
        else:
            final = chunk
    await gate.aclose()
    [thinking] = custom
    assert thinking["event"] == "thinking" and thinking["data"]["strategy"] == "regenerate"
    assert thinking["data"]["retry_count"] == 1 and thinking["data"]["feedback"] == "Give the height too."
    assert "can do better" in thinking["data"]["message"]
    record = final["gate_record"]
    assert record["accept_reason"] == "passed" and record["accepted_attempt"] == 2 and record["answer"] == "whole"
    assert [a["kind"] for a in record["attempts"]] == ["generation", "regeneration"]
    assert [e["passed"] for e in record["evaluations"]] == [False, True]
    types = [c["type"] for c in record["llm_calls"]]
    assert types.count("quality_evaluation") == 2 and types.count("generation") == 1 and "regeneration" in types
    assert {c["model"] for c in record["llm_calls"] if c["type"] != "quality_evaluation"} == {"node:generate_response"}
    [row] = _stored(rt)
    assert row["trace_id"] == final["gate_trace_id"] == record["trace_id"]
    assert row["iterations"] == 2 and row["passed"] is True and row["payload"]["answer"] == "whole"
    judged = rt.store.calls(trace_id=record["trace_id"])
    assert len(judged) == 2 and {c["purpose"] for c in judged} == {"quality_evaluation"}
    await rt.aclose()


async def test_the_budget_cancels_a_slow_regeneration_and_keeps_the_best_answer():
    import asyncio
    import time

    from langgraph.graph import START, StateGraph

    from jurist.gate.langgraph import GateState, add_gate
    from jurist.runtime import Runtime

    script("judge", bad(0.3), bad(0.5))
    rt = Runtime(Settings.load())
    gate = _gate(rt, budget_s=3.0, max_regenerations=2)

    async def generate_response(state: GateState) -> dict:
        if state.get("regeneration_count"):
            await asyncio.sleep(30)  # a regeneration that never ends within the budget
        return {"response_text": "first"}

    builder = StateGraph(GateState)
    builder.add_node("generate_response", generate_response)
    builder.add_edge(START, "generate_response")
    graph = add_gate(builder, gate).compile()
    started = time.monotonic()
    state = await graph.ainvoke({"messages": [{"role": "user", "content": "q?"}], "regeneration_count": 0})
    assert time.monotonic() - started < 4.5
    await gate.aclose()
    record = state["gate_record"]
    assert record["accept_reason"] == "budget" and record["accepted_attempt"] == 1
    assert state["response_text"] == "first" and state["gate_decision"] == "accept"
    [cut] = [c for c in record["llm_calls"] if c["type"] == "regeneration"]
    assert cut["status"] == "error" and "budget ran out" in cut["error"]
    [row] = _stored(rt)
    assert row["payload"]["accept_reason"] == "budget"
    await rt.aclose()


async def test_a_first_generation_that_raises_is_recorded_and_the_graph_fails():
    from langgraph.graph import START, StateGraph

    from jurist.gate.langgraph import GateState, add_gate
    from jurist.runtime import Runtime

    rt = Runtime(Settings.load())
    gate = _gate(rt)

    async def generate_response(state: GateState) -> dict:
        raise RuntimeError("the model is down")

    builder = StateGraph(GateState)
    builder.add_node("generate_response", generate_response)
    builder.add_edge(START, "generate_response")
    graph = add_gate(builder, gate).compile()
    with pytest.raises(RuntimeError, match="the model is down"):
        await graph.ainvoke({"messages": [{"role": "user", "content": "q?"}], "regeneration_count": 0})
    await gate.aclose()
    [row] = _stored(rt)
    assert row["status"] == "failed" or row["payload"]["error"]
    assert "the model is down" in row["payload"]["error"]
    await rt.aclose()


def test_gating_a_node_that_is_not_there_says_so():
    from langgraph.graph import StateGraph

    from jurist.errors import ConfigError
    from jurist.gate.langgraph import GateState, add_gate

    gate = Gate(GateConfig(), settings=Settings.load(), judge="scripted/judge")
    with pytest.raises(ConfigError, match="no node 'generate_response'"):
        add_gate(StateGraph(GateState), gate)
