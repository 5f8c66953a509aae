"""A LangGraph app gated by jurist, offline: scripted generator and judge.

    python examples/gate_langgraph.py

The generator first answers only half of the question; the judge scores it
0.2 with a hint; the graph loops back to ``generate_response`` once, with the
feedback, and accepts the second answer.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from typing import Any

from langgraph.graph import START, StateGraph

from jurist.config import Settings
from jurist.gate import Gate, GateConfig
from jurist.gate.langgraph import GateState, add_gate
from jurist.models import script
from jurist.models.base import ChatRequest
from jurist.models.messages import messages_from_openai
from jurist.models.registry import resolve_model


class AssistantState(GateState, total=False):
    """The app's state: the gate's keys plus its own."""

    question: str


def build(settings: Settings, gate: Gate) -> Any:
    """The graph: generate_response -> evaluate -> regenerate | accept."""
    model = resolve_model("scripted/example-gen", settings)

    async def generate_response(state: AssistantState) -> dict[str, Any]:
        messages = list(state["messages"])
        if state.get("regeneration_instruction"):
            messages.append({"role": "user", "content": state["regeneration_instruction"]})
        reply = await model.complete(ChatRequest(messages=messages_from_openai(messages)), purpose="generation")
        return {"response_text": reply.text}

    builder = StateGraph(AssistantState)
    builder.add_node("generate_response", generate_response)
    builder.add_edge(START, "generate_response")
    add_gate(builder, gate)
    return builder.compile()


def script_models() -> None:
    """Offline replies: a half answer, a full one; a low score, then a pass."""
    script("example-gen", "The Eiffel Tower was finished in 1889.",
           "The Eiffel Tower was finished in 1889 and is 330 metres tall.")
    script("example-judge",
           json.dumps({"quality_score": 0.2, "confidence_score": 0.9, "issues": ["the height is missing"],
                       "improvement_hint": "Say how tall it is."}),
           json.dumps({"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": None}))


async def main() -> None:
    script_models()
    # The gate records its calls and evaluations in a store of its own here, removed at the
    # end; an app leaves database_url out and records into the user's store (or JURIST_DATABASE_URL).
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.load(database_url=f"sqlite:///{tmp}/example.db")
        gate = Gate(GateConfig(evaluate_feedback_enabled=True), settings=settings, judge="scripted/example-judge")
        graph = build(settings, gate)
        question = "When was the Eiffel Tower finished and how tall is it?"
        state = await graph.ainvoke({"messages": [{"role": "user", "content": question}], "regeneration_count": 0})
        print(f"question: {question}")
        print(f"answer:   {state['response_text']}")
        print(f"regenerations: {state['regeneration_count']}, final score: {state['quality_score']}")
        await gate.aclose()


if __name__ == "__main__":
    asyncio.run(main())
