"""The OpenAI Agents SDK (`openai-agents`), direct and through the proxy: an agent on the
chat-completions model and on the Responses model (the SDK's default), with one function
tool. Tracing is off: the SDK would otherwise export traces to OpenAI."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool,
                    set_tracing_disabled)

from jurist.testing import Reply
from tests.conformance.conftest import (ANSWER, API_KEY, CALL, NO_RESPONSES_API, QUESTION, WEATHER_ANSWER,
                                        WEATHER_RESULT, Outcome, Routes, cell, error_of, tool_reply)

set_tracing_disabled(True)
MODELS = {"chat_completions": OpenAIChatCompletionsModel, "responses": OpenAIResponsesModel}


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return WEATHER_RESULT


def run_agent(routes: Routes, route: str, kind: str, prompt: str, tools: list[Any]) -> Outcome:
    client = openai.AsyncOpenAI(base_url=routes.base(route), api_key=API_KEY, max_retries=0, timeout=30)
    agent = Agent(name="assistant", instructions="Answer briefly.", tools=tools,
                  model=MODELS[kind](model="gpt-test", openai_client=client),
                  model_settings=ModelSettings(include_usage=True))
    try:
        result = Runner.run_sync(agent, prompt, max_turns=4)
    except openai.APIStatusError as exc:
        return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))
    calls = [(item.raw_item.name, item.raw_item.arguments) for item in result.new_items
             if item.type == "tool_call_item"]
    outputs = [item.output for item in result.new_items if item.type == "tool_call_output_item"]
    usage = result.context_wrapper.usage
    return Outcome(text=result.final_output, tool_calls=calls, usage=usage.total_tokens or None,
                   extra={"tool outputs": outputs, "requests": usage.requests})


@pytest.mark.parametrize("kind", MODELS)
def test_agent(routes: Routes, route: str, kind: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the run failed: {out.error}"
        assert out.text == ANSWER and out.tool_calls == []

    cell(routes, route, [Reply(text=ANSWER)], lambda r: run_agent(routes, r, kind, QUESTION, []), check,
         direct_fails=NO_RESPONSES_API if routes.llama and kind == "responses" else None)


@pytest.mark.parametrize("kind", MODELS)
def test_agent_with_a_function_tool(routes: Routes, route: str, kind: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the run failed: {out.error}"
        assert out.tool_calls == [("get_weather", '{"city": "Paris"}')], out.tool_calls
        assert out.extra["tool outputs"] == [WEATHER_RESULT]
        assert out.text == WEATHER_ANSWER

    cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)],
         lambda r: run_agent(routes, r, kind, "Weather in Paris?", [get_weather]), check,
         direct_fails=NO_RESPONSES_API if routes.llama and kind == "responses" else None)
