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
