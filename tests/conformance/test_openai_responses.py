"""The `openai` SDK's Responses API (``POST /v1/responses``), direct and through the proxy.

The ``openai`` upstream speaks the Responses API itself; the ``llama-cpp-python`` one,
like that server, does not (404): direct fails there, and the proxy, which translates to
chat completions for such upstreams, must still answer."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from jurist.testing import Reply
from tests.conformance.conftest import (ANSWER, API_KEY, CALL, NO_RESPONSES_API, QUESTION, WEATHER_ANSWER,
                                        WEATHER_RESULT, WEATHER_SCHEMA, Outcome, Routes, cell, error_of, tool_reply)

WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
           "parameters": WEATHER_SCHEMA, "strict": False}


def client(routes: Routes, route: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=routes.base(route), api_key=API_KEY, max_retries=0, timeout=30)


def outcome_of(r: Any) -> Outcome:
    calls = [(item.name, json.loads(item.arguments)) for item in r.output if item.type == "function_call"]
    return Outcome(text=r.output_text or None, tool_calls=calls, finish=r.status,
                   usage=r.usage.total_tokens if r.usage else None,
                   extra={"call_ids": [item.call_id for item in r.output if item.type == "function_call"]})


def create(routes: Routes, route: str, **kwargs: Any) -> Outcome:
    with client(routes, route) as c:
        try:
            return outcome_of(c.responses.create(model="gpt-test", **kwargs))
        except openai.APIStatusError as exc:
            return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))


def streamed(routes: Routes, route: str, **kwargs: Any) -> Outcome:
    """Read the events: text deltas joined; the final ``response`` of ``response.completed``."""
    text, final = "", None
    with client(routes, route) as c:
        try:
            for event in c.responses.create(model="gpt-test", stream=True, **kwargs):
                if event.type == "response.output_text.delta":
                    text += event.delta
                elif event.type in ("response.completed", "response.incomplete"):
                    final = event.response
        except openai.APIStatusError as exc:
            return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))
    if final is None:
        return Outcome(text=text, finish="no response.completed event")
    out = outcome_of(final)
    out.extra["deltas"] = text or None
    return out


def answered(text: str, finish: str = "completed") -> Any:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert (out.text, out.finish, out.tool_calls) == (text, finish, [])
    return check


def test_plain(routes: Routes, route: str) -> None:
    cell(routes, route, [Reply(text=ANSWER)], lambda r: create(routes, r, input=QUESTION), answered(ANSWER),
         direct_fails=NO_RESPONSES_API if routes.llama else None)


def test_streamed(routes: Routes, route: str) -> None:
    def check(out: Outcome) -> None:
        answered(ANSWER)(out)
        assert out.extra["deltas"] == ANSWER

    cell(routes, route, [Reply(text=ANSWER)], lambda r: streamed(routes, r, input=QUESTION), check,
         direct_fails=NO_RESPONSES_API if routes.llama else None)


def test_multi_turn(routes: Routes, route: str) -> None:
    conversation = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": ANSWER},
                    {"role": "user", "content": "And of Italy?"}]
    cell(routes, route, [Reply(text="Rome.")],
         lambda r: create(routes, r, input=conversation, instructions="Answer in one sentence."), answered("Rome."),
         direct_fails=NO_RESPONSES_API if routes.llama else None)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_tool_loop(routes: Routes, route: str, stream: bool) -> None:
    read = streamed if stream else create

    def run(r: str) -> Outcome:
        ask = [{"role": "user", "content": "Weather in Paris?"}]
        first = read(routes, r, input=ask, tools=[WEATHER])
        if first.error or not first.tool_calls:
            return first
        [(name, args)] = first.tool_calls
        [call_id] = first.extra["call_ids"]
        follow = [*ask, {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)},
                  {"type": "function_call_output", "call_id": call_id, "output": WEATHER_RESULT}]
        final = read(routes, r, input=follow, tools=[WEATHER])
        final.extra = {"first": first.tool_calls, "call_id": call_id}
        return final

    def check(out: Outcome) -> None:
        assert out.extra.get("first") == [("get_weather", {"city": "Paris"})], f"first answer: {out}"
        answered(WEATHER_ANSWER)(out)

    cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)], run, check,
         direct_fails=NO_RESPONSES_API if routes.llama else None)


def test_error_429_with_retry_after(routes: Routes, route: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error == ("RateLimitError", 429, "7")

    cell(routes, route, [Reply(status=429, headers={"Retry-After": "7"})],
         lambda r: create(routes, r, input=QUESTION), check,
         direct_fails=NO_RESPONSES_API if routes.llama else None)
