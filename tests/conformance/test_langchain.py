"""LangChain's `ChatOpenAI` (langchain-openai), direct and through the proxy: invoke, stream, a
`bind_tools` loop and `with_structured_output` (JSON schema and function calling)."""

from __future__ import annotations

from typing import Any

import openai
import pydantic
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from jurist.testing import Reply, tool_call
from tests.conformance.conftest import (ANSWER, API_KEY, CALL, CAPITAL_JSON, NO_JSON_SCHEMA, QUESTION, WEATHER_ANSWER,
                                        WEATHER_RESULT, Outcome, Routes, cell, error_of, openai_upstream_only,
                                        tool_reply)


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return WEATHER_RESULT


class Capital(pydantic.BaseModel):
    """A country's capital."""

    country: str
    capital: str


def llm(routes: Routes, route: str, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-test", base_url=routes.base(route), api_key=API_KEY, max_retries=0,
                      timeout=30, **kwargs)


def outcome_of(message: Any) -> Outcome:
    usage = message.usage_metadata["total_tokens"] if getattr(message, "usage_metadata", None) else None
    return Outcome(text=message.content or None, tool_calls=[(c["name"], c["args"]) for c in message.tool_calls],
                   finish=message.response_metadata.get("finish_reason"), usage=usage)


def guarded(run: Any) -> Any:
    def wrapped(route: str) -> Outcome:
        try:
            return run(route)
        except openai.APIStatusError as exc:
            return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))
    return wrapped


def answered(text: str) -> Any:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert (out.text, out.finish, out.tool_calls) == (text, "stop", [])
    return check


def test_invoke(routes: Routes, route: str) -> None:
    out = cell(routes, route, [Reply(text=ANSWER)], guarded(lambda r: outcome_of(llm(routes, r).invoke(QUESTION))),
               answered(ANSWER))
    assert out.usage == 15


def test_stream(routes: Routes, route: str) -> None:
    def run(r: str) -> Outcome:
        total = None
        for chunk in llm(routes, r, stream_usage=True).stream(QUESTION):
            total = chunk if total is None else total + chunk
        return outcome_of(total)

    cell(routes, route, [Reply(text=ANSWER)], guarded(run), answered(ANSWER))


def test_multi_turn(routes: Routes, route: str) -> None:
    history = [HumanMessage(QUESTION), AIMessage(ANSWER), HumanMessage("And of Italy?")]
    cell(routes, route, [Reply(text="Rome.")], guarded(lambda r: outcome_of(llm(routes, r).invoke(history))),
         answered("Rome."))


def test_bind_tools_loop(routes: Routes, route: str) -> None:
    def run(r: str) -> Outcome:
        model = llm(routes, r).bind_tools([get_weather])
        messages: list[Any] = [HumanMessage("Weather in Paris?")]
        first = model.invoke(messages)
        if not first.tool_calls:
            return outcome_of(first)
        messages.append(first)
        for call in first.tool_calls:
            messages.append(ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"]))
        out = outcome_of(model.invoke(messages))
        out.extra = {"first": [(c["name"], c["args"]) for c in first.tool_calls]}
        return out

    def check(out: Outcome) -> None:
        assert out.extra.get("first") == [("get_weather", {"city": "Paris"})], f"first answer: {out}"
        answered(WEATHER_ANSWER)(out)

    cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)], guarded(run), check)


def structured(method: str) -> Any:
    def run(routes: Routes, r: str) -> Outcome:
        result = llm(routes, r).with_structured_output(Capital, method=method).invoke(QUESTION)
        return Outcome(extra={"parsed": result.model_dump() if isinstance(result, Capital) else repr(result)})
    return run


def parsed_capital(out: Outcome) -> None:
    assert out.error is None, f"the request failed: {out.error}"
    assert out.extra["parsed"] == {"country": "France", "capital": "Paris"}


def test_with_structured_output_json_schema(routes: Routes, route: str) -> None:
    run = structured("json_schema")
    cell(routes, route, [Reply(text=CAPITAL_JSON)], guarded(lambda r: run(routes, r)), parsed_capital,
         direct_fails=NO_JSON_SCHEMA if routes.llama else None)


def test_with_structured_output_function_calling(routes: Routes, route: str) -> None:
    run = structured("function_calling")
    answer = tool_reply(tool_call("Capital", {"country": "France", "capital": "Paris"}, "call_c1"))
    cell(routes, route, [answer], guarded(lambda r: run(routes, r)), parsed_capital)


@openai_upstream_only
def test_error_429_with_retry_after(routes: Routes, route: str) -> None:
    def check(out: Outcome) -> None:
        # langchain-openai raises its own subclass of openai.RateLimitError
        assert out.error == ("OpenAIRateLimitError", 429, "7"), out.error

    cell(routes, route, [Reply(status=429, headers={"Retry-After": "7"})],
         guarded(lambda r: outcome_of(llm(routes, r).invoke(QUESTION))), check)
