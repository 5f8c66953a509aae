"""A LangGraph `create_react_agent` with memory (a checkpointer) over two turns, direct and
through the proxy: turn 1 calls the tool, turn 2 answers from what turn 1 found (no second
call), which needs every earlier turn, tool calls and results included, to reach the model."""

from __future__ import annotations

import warnings
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from jurist.testing import Reply
from tests.conformance.conftest import (API_KEY, CALL, WEATHER_ANSWER, WEATHER_RESULT, Outcome, Routes, cell,
                                        tool_reply)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain's create_agent
    from langgraph.prebuilt import create_react_agent

RECALL = "As I found before, it is 18C and sunny in Paris."


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return WEATHER_RESULT


def two_turns(routes: Routes, route: str) -> Outcome:
    model = ChatOpenAI(model="gpt-test", base_url=routes.base(route), api_key=API_KEY, max_retries=0,
                       timeout=30)
    agent: Any = create_react_agent(model, [get_weather], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "conformance"}}
    first = agent.invoke({"messages": [("user", "Weather in Paris?")]}, config)["messages"]
    second = agent.invoke({"messages": [("user", "Remind me what you found.")]}, config)["messages"]
    turn2 = second[len(first):]

    def calls(messages: list[Any]) -> list[tuple[str, Any]]:
        return [(c["name"], c["args"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]

    return Outcome(text=second[-1].content, tool_calls=calls(turn2), finish=second[-1].response_metadata.get(
        "finish_reason"), extra={"turn 1": (calls(first), first[-1].content),
                                 "tool results": sum(isinstance(m, ToolMessage) for m in second)})


def test_react_agent_with_memory_over_two_turns(routes: Routes, route: str) -> None:
    def check(out: Outcome) -> None:
        assert out.extra["turn 1"] == ([("get_weather", {"city": "Paris"})], WEATHER_ANSWER), out.extra
        assert out.tool_calls == [], f"turn 2 called the tool again: {out.tool_calls}"
        assert (out.text, out.finish) == (RECALL, "stop")

    # Turn 2's reply is a tool call when its request lacks turn 1's tool call and result (a model that
    # cannot see what it found looks again); with the whole history it recalls the answer.
    def turn2(request: dict[str, Any]) -> Reply:
        roles = [m["role"] for m in request["messages"]]
        return Reply(text=RECALL) if "tool" in roles else tool_reply(CALL)

    out = cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER), turn2, Reply(text=RECALL)],
               lambda r: two_turns(routes, r), check)
    assert [m["role"] for m in out.sent[2][1]] == ["user", "assistant", "tool", "assistant", "user"]
