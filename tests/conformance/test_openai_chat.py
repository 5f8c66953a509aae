"""The `openai` SDK's chat completions, direct and through the proxy."""

from __future__ import annotations

import json
from typing import Any

import openai
import pydantic
import pytest

from jurist.testing import Reply
from jurist.testing.replies import token_logprobs
from tests.conformance.conftest import (ANSWER, API_KEY, CALL, CAPITAL_JSON, NO_JSON_SCHEMA, QUESTION, REPEATED_NAMES,
                                        WEATHER_ANSWER, WEATHER_RESULT, WEATHER_SCHEMA, Outcome, Routes, cell,
                                        error_of, openai_upstream_only, tool_reply)

ASK = [{"role": "user", "content": QUESTION}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                            "parameters": WEATHER_SCHEMA}}


def client(routes: Routes, route: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=routes.base(route), api_key=API_KEY, max_retries=0, timeout=30)


def completion(routes: Routes, route: str, **kwargs: Any) -> Outcome:
    """One non-streamed request; its answer or its error."""
    with client(routes, route) as c:
        try:
            r = c.chat.completions.create(model="gpt-test", **kwargs)
        except openai.APIStatusError as exc:
            return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))
        except openai.APIConnectionError as exc:
            return Outcome(error=error_of(exc, None, None))
    choice = r.choices[0]
    calls = [(tc.function.name, json.loads(tc.function.arguments)) for tc in choice.message.tool_calls or ()]
    logprobs = [(t.token, t.logprob) for t in choice.logprobs.content] if choice.logprobs and choice.logprobs.content \
        else None
    return Outcome(text=choice.message.content, tool_calls=calls, finish=choice.finish_reason,
                   usage=r.usage.total_tokens if r.usage else None,
                   extra={"logprobs": logprobs, "message": choice.message.model_dump(exclude_none=True)},
                   judged="jurist" in (r.model_extra or {}))


def streamed(routes: Routes, route: str, **kwargs: Any) -> Outcome:
    """One streamed request, read as a stock client reads it: content deltas joined, tool-call
    pieces joined by index (names and arguments ``+=``), the last finish reason, the usage chunk."""
    text, finish, usage, judged = "", None, None, False
    calls: dict[int, dict[str, str]] = {}
    with client(routes, route) as c:
        try:
            for chunk in c.chat.completions.create(model="gpt-test", stream=True,
                                                   stream_options={"include_usage": True}, **kwargs):
                if chunk.usage is not None:
                    usage = chunk.usage.total_tokens
                judged = judged or "jurist" in (chunk.model_extra or {})
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    for piece in choice.delta.tool_calls or ():
                        call = calls.setdefault(piece.index, {"name": "", "arguments": ""})
                        if piece.function is not None:
                            call["name"] += piece.function.name or ""
                            call["arguments"] += piece.function.arguments or ""
                    finish = choice.finish_reason or finish
        except openai.APIStatusError as exc:
            return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))
    tool_calls = [(call["name"], json.loads(call["arguments"])) for _, call in sorted(calls.items())]
    return Outcome(text=text or None, tool_calls=tool_calls, finish=finish, usage=usage, judged=judged)


def answered(text: str, finish: str = "stop") -> Any:
    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert (out.text, out.finish, out.tool_calls) == (text, finish, [])
    return check


def test_plain(routes: Routes, route: str) -> None:
    out = cell(routes, route, [Reply(text=ANSWER)], lambda r: completion(routes, r, messages=ASK), answered(ANSWER))
    assert out.usage == 15
    assert out.judged is (route == "proxy")  # through the proxy, the gate's record comes with the answer


def test_streamed(routes: Routes, route: str) -> None:
    out = cell(routes, route, [Reply(text=ANSWER)], lambda r: streamed(routes, r, messages=ASK), answered(ANSWER))
    assert out.judged is (route == "proxy")


def test_multi_turn(routes: Routes, route: str) -> None:
    messages = [{"role": "system", "content": "Answer in one sentence."}, *ASK,
                {"role": "assistant", "content": ANSWER}, {"role": "user", "content": "And of Italy?"}]
    out = cell(routes, route, [Reply(text="Rome.")], lambda r: completion(routes, r, messages=messages),
               answered("Rome."))
    assert out.sent == [("/v1/chat/completions", messages)]


# Every answer under max_tokens=2 is cut off, as a real server's would be: the gate may ask again
# (a cut-off answer is not complete), and the client still gets the cut-off answer with "length".
CUT_OFF = [Reply(text="Paris is", finish_reason="length")] * 4


def test_cut_off_answer_says_length(routes: Routes, route: str) -> None:
    cell(routes, route, CUT_OFF, lambda r: completion(routes, r, messages=ASK, max_tokens=2),
         answered("Paris is", "length"), gated=True)


def test_cut_off_answer_says_length_streamed(routes: Routes, route: str) -> None:
    cell(routes, route, CUT_OFF, lambda r: streamed(routes, r, messages=ASK, max_tokens=2),
         answered("Paris is", "length"), gated=True)


def test_logprobs(routes: Routes, route: str) -> None:
    tokens = token_logprobs(["Paris", "."], {0: {"Paris": -0.1, "Lyon": -2.5}})

    def check(out: Outcome) -> None:
        answered("Paris.")(out)
        assert out.extra["logprobs"] == [("Paris", -0.1), (".", 0.0)]

    cell(routes, route, [Reply(text="Paris.", logprobs=tokens)],
         lambda r: completion(routes, r, messages=ASK, logprobs=True, top_logprobs=2), check)


def tool_loop(routes: Routes, route: str, read: Any) -> Outcome:
    """The SDK's tool loop by hand: ask with the tool, run the call, send its result, read the answer."""
    first = read(routes, route, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER])
    if first.error or not first.tool_calls:
        return first
    calls = [{"id": CALL.id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
             for name, args in first.tool_calls]
    messages = [{"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": CALL.id, "content": WEATHER_RESULT}]
    final = read(routes, route, messages=messages, tools=[WEATHER])
    final.extra = {"first": (first.tool_calls, first.finish)}
    return final


def loop_check(out: Outcome) -> None:
    assert out.extra.get("first") == ([("get_weather", {"city": "Paris"})], "tool_calls"), f"first answer: {out}"
    answered(WEATHER_ANSWER)(out)


def test_tool_loop(routes: Routes, route: str) -> None:
    out = cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)],
               lambda r: tool_loop(routes, r, completion), loop_check)
    assert [m["role"] for m in out.sent[1][1]] == ["user", "assistant", "tool"]


def test_tool_loop_streamed(routes: Routes, route: str) -> None:
    cell(routes, route, [tool_reply(CALL), Reply(text=WEATHER_ANSWER)],
         lambda r: tool_loop(routes, r, streamed), loop_check, direct_fails=REPEATED_NAMES if routes.llama else None)


class Capital(pydantic.BaseModel):
    country: str
    capital: str


def test_structured_output(routes: Routes, route: str) -> None:
    def run(r: str) -> Outcome:
        with client(routes, r) as c:
            try:
                parsed = c.chat.completions.parse(model="gpt-test", messages=ASK, response_format=Capital)
            except openai.APIStatusError as exc:
                return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))
        choice = parsed.choices[0]
        return Outcome(text=choice.message.content, finish=choice.finish_reason,
                       extra={"parsed": choice.message.parsed.model_dump() if choice.message.parsed else None})

    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert out.extra["parsed"] == {"country": "France", "capital": "Paris"}

    cell(routes, route, [Reply(text=CAPITAL_JSON)], run, check, direct_fails=NO_JSON_SCHEMA if routes.llama else None)


@openai_upstream_only
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_error_429_with_retry_after(routes: Routes, route: str, stream: bool) -> None:
    read = streamed if stream else completion

    def check(out: Outcome) -> None:
        assert out.error == ("RateLimitError", 429, "7")

    cell(routes, route, [Reply(status=429, headers={"Retry-After": "7"})],
         lambda r: read(routes, r, messages=ASK), check)


@openai_upstream_only
def test_error_500(routes: Routes, route: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error == ("InternalServerError", 500, None)

    cell(routes, route, [Reply(status=500)], lambda r: completion(routes, r, messages=ASK), check)


def test_error_upstream_down(down: Routes, route: str) -> None:
    """Direct, the client cannot connect; through the proxy it gets the proxy's 502 naming the upstream."""
    out = completion(down, route, messages=ASK)
    if route == "direct":
        assert out.error == ("APIConnectionError", None, None)
    else:
        assert out.error == ("InternalServerError", 502, None)
