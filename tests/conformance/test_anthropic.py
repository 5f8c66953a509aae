"""The `anthropic` SDK (Messages API, ``POST /v1/messages``), direct and through the proxy.

The ``openai`` upstream also speaks the Messages API; the ``llama-cpp-python`` one, like
that server, does not (404): direct fails there, and the proxy, which translates to chat
completions for such upstreams, must still answer."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from jurist.testing import Reply
from tests.conformance.conftest import (ANSWER, API_KEY, CALL, NO_MESSAGES_API, QUESTION, WEATHER_ANSWER,
                                        WEATHER_RESULT, WEATHER_SCHEMA, Outcome, Routes, cell, error_of, tool_reply)

WEATHER = {"name": "get_weather", "description": "The weather in a city.", "input_schema": WEATHER_SCHEMA}
ASK = [{"role": "user", "content": QUESTION}]


def client(routes: Routes, route: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=routes.root(route), api_key=API_KEY, max_retries=0, timeout=30)


def outcome_of(message: Any) -> Outcome:
    text = "".join(block.text for block in message.content if block.type == "text")
    calls = [(block.name, block.input) for block in message.content if block.type == "tool_use"]
    return Outcome(text=text or None, tool_calls=calls, finish=message.stop_reason,
                   usage=message.usage.input_tokens + message.usage.output_tokens,
                   extra={"tool_ids": [block.id for block in message.content if block.type == "tool_use"]})


def create(routes: Routes, route: str, **kwargs: Any) -> Outcome:
    with client(routes, route) as c:
        try:
            return outcome_of(c.messages.create(model="claude-test", max_tokens=200, **kwargs))
        except anthropic.APIStatusError as exc:
            return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))


def streamed(routes: Routes, route: str, **kwargs: Any) -> Outcome:
    with client(routes, route) as c:
        try:
            with c.messages.stream(model="claude-test", max_tokens=200, **kwargs) as stream:
                text = "".join(stream.text_stream)
                out = outcome_of(stream.get_final_message())
        except anthropic.APIStatusError as exc:
            return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))
    out.extra["deltas"] = text or None
    return out


def answered(text: str) -> Any:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert (out.text, out.finish, out.tool_calls) == (text, "end_turn", [])
    return check


def test_messages(routes: Routes, route: str) -> None:
    cell(routes, route, [Reply(text=ANSWER)], lambda r: create(routes, r, messages=ASK), answered(ANSWER),
         direct_fails=NO_MESSAGES_API if routes.llama else None)


def test_stream(routes: Routes, route: str) -> None:
    def check(out: Outcome) -> None:
        answered(ANSWER)(out)
        assert out.extra["deltas"] == ANSWER

    cell(routes, route, [Reply(text=ANSWER)], lambda r: streamed(routes, r, messages=ASK), check,
         direct_fails=NO_MESSAGES_API if routes.llama else None)


def test_system_and_multi_turn(routes: Routes, route: str) -> None:
    messages = [*ASK, {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "And of Italy?"}]
    cell(routes, route, [Reply(text="Rome.")],
         lambda r: create(routes, r, system="Answer in one sentence.", messages=messages), answered("Rome."),
         direct_fails=NO_MESSAGES_API if routes.llama else None)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_tool_use(routes: Routes, route: str, stream: bool) -> None:
    read = streamed if stream else create

    def run(r: str) -> Outcome:
        ask = [{"role": "user", "content": "Weather in Paris?"}]
        first = read(routes, r, messages=ask, tools=[WEATHER])
        if first.error or not first.tool_calls:
            return first
        [(name, args)] = first.tool_calls
        [tool_id] = first.extra["tool_ids"]
        follow = [*ask, {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": name,
                                                           "input": args}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
                                                "content": WEATHER_RESULT}]}]
        final = read(routes, r, messages=follow, tools=[WEATHER])
        final.extra = {"first": (first.tool_calls, first.finish), "tool_id": tool_id}
        return final

    def check(out: Outcome) -> None:
        assert out.extra.get("first") == ([("get_weather", {"city": "Paris"})], "tool_use"), f"first answer: {out}"
        answered(WEATHER_ANSWER)(out)

    cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)], run, check,
         direct_fails=NO_MESSAGES_API if routes.llama else None)


def test_error_429_with_retry_after(routes: Routes, route: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error == ("RateLimitError", 429, "7")

    cell(routes, route, [Reply(status=429, headers={"Retry-After": "7"})],
         lambda r: create(routes, r, messages=ASK), check,
         direct_fails=NO_MESSAGES_API if routes.llama else None)
