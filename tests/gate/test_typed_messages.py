"""The gate reads its messages typed: strictly, with the JSON as given kept for the continue context."""

from __future__ import annotations

import pytest

from jurist.errors import InputError
from jurist.gate.langgraph import evaluate_node
from jurist.gate.policy import read_messages
from jurist.models import script
from jurist.models.messages import ToolMessage, UserMessage

from tests.gate.helpers import QUESTION, bad, gate, good


async def test_a_misspelt_message_field_is_an_input_error_naming_the_field():
    script("judge", default=good())
    g = gate()
    with pytest.raises(InputError, match=r"messages\[1\].*'contnet'.*did you mean 'content'"):
        await g.run([QUESTION[0], {"role": "user", "contnet": "When was it built?"}], "scripted/gen")
    await g.aclose()


async def test_a_tool_output_without_a_call_id_is_a_tool_result_for_the_judge_and_user_text_for_the_model():
    script("gen", default="It is 330 m tall.")
    judge = script("judge", default=good())
    raw = [*QUESTION, {"role": "tool", "content": "HEIGHT 330 m"}]
    typed, as_given = read_messages(raw)
    assert isinstance(typed[-1], ToolMessage) and as_given == raw and typed[-1].openai() == raw[-1]
    g = gate()
    seen: list[list[dict]] = []

    async def generate(messages):
        seen.append(messages)
        return "It is 330 m tall."

    result = await g.run(raw, generate)
    assert seen[0][-1] == raw[-1]  # a generator function gets the dicts as they came
    assert "HEIGHT 330 m" in judge.requests[0].messages[-1].text  # the judge sees it as a tool result
    result = await g.run(raw, "scripted/gen")
    await g.aclose()
    assert result.accept_reason == "passed"
    sent = script("gen").requests[-1].messages
    assert isinstance(sent[-1], UserMessage) and sent[-1].text == "[tool result] HEIGHT 330 m"


async def test_the_langgraph_node_regenerates_with_the_instruction_as_text():
    script("judge", bad())
    node = evaluate_node(gate(evaluator="quality"))
    update = await node({"messages": QUESTION, "response_text": "In 1889."})
    assert update["gate_decision"] == "regenerate" and update["regeneration_count"] == 1
    assert "Give the height too." in str(update["regeneration_instruction"])
    with pytest.raises(InputError, match="regeneration_count"):
        await node({"messages": QUESTION, "response_text": "x", "regeneration_count": "one"})
