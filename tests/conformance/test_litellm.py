"""LiteLLM as a client (``litellm.completion`` with ``openai/`` models at an ``api_base``), direct
and through the proxy: plain, streamed, a tool loop and a 429."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from jurist.testing import Reply
from tests.conformance.conftest import (ANSWER, API_KEY, CALL, QUESTION, WEATHER_ANSWER, WEATHER_RESULT,
                                        WEATHER_SCHEMA, Outcome, Routes, cell, error_of, openai_upstream_only,
                                        tool_reply)

ASK = [{"role": "user", "content": QUESTION}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                            "parameters": WEATHER_SCHEMA}}


@pytest.fixture(scope="module")
def litellm() -> Any:
    """LiteLLM, with its bundled model price list (it would fetch one at import)."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm as module

    module.telemetry = False
    return module


def completion(litellm: Any, routes: Routes, route: str, **kwargs: Any) -> Outcome:
    try:
        r = litellm.completion(model="openai/gpt-test", api_base=routes.base(route), api_key=API_KEY,
                               num_retries=0, max_retries=0, timeout=30, **kwargs)
    except litellm.exceptions.APIError as exc:  # every LiteLLM error with an HTTP status
        headers = getattr(getattr(exc, "response", None), "headers", None) or getattr(
            exc, "litellm_response_headers", None)
        return Outcome(error=error_of(exc, getattr(exc, "status_code", None), headers))
    except litellm.exceptions.RateLimitError as exc:
        return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))
    if kwargs.get("stream"):
        r = litellm.stream_chunk_builder(list(r))
    choice = r.choices[0]
    calls = [(tc.function.name, json.loads(tc.function.arguments)) for tc in choice.message.tool_calls or ()]
    usage = getattr(r, "usage", None)
    return Outcome(text=choice.message.content, tool_calls=calls, finish=choice.finish_reason,
                   usage=usage.total_tokens if usage else None)


def answered(text: str) -> Any:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert (out.text, out.finish, out.tool_calls) == (text, "stop", [])
    return check


def test_plain(litellm: Any, routes: Routes, route: str) -> None:
    cell(routes, route, [Reply(text=ANSWER)], lambda r: completion(litellm, routes, r, messages=ASK),
         answered(ANSWER))


def test_streamed(litellm: Any, routes: Routes, route: str) -> None:
    cell(routes, route, [Reply(text=ANSWER)],
         lambda r: completion(litellm, routes, r, messages=ASK, stream=True, stream_options={"include_usage": True}),
         answered(ANSWER))


def test_tool_loop(litellm: Any, routes: Routes, route: str) -> None:
    def run(r: str) -> Outcome:
        ask = [{"role": "user", "content": "Weather in Paris?"}]
        first = completion(litellm, routes, r, messages=ask, tools=[WEATHER])
        if first.error or not first.tool_calls:
            return first
        calls = [{"id": CALL.id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                 for name, args in first.tool_calls]
        follow = [*ask, {"role": "assistant", "content": None, "tool_calls": calls},
                  {"role": "tool", "tool_call_id": CALL.id, "content": WEATHER_RESULT}]
        final = completion(litellm, routes, r, messages=follow, tools=[WEATHER])
        final.extra = {"first": (first.tool_calls, first.finish)}
        return final

    def check(out: Outcome) -> None:
        assert out.extra.get("first") == ([("get_weather", {"city": "Paris"})], "tool_calls"), f"first answer: {out}"
        answered(WEATHER_ANSWER)(out)

    cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)], run, check)


@openai_upstream_only
def test_error_429_with_retry_after(litellm: Any, routes: Routes, route: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error is not None and out.error[:2] == ("RateLimitError", 429), out.error

    cell(routes, route, [Reply(status=429, headers={"Retry-After": "7"})],
         lambda r: completion(litellm, routes, r, messages=ASK), check)
