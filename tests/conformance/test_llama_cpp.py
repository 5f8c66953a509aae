"""The `openai` SDK against llama.cpp's real server (llama-cpp-python with SmolLM2), direct and
through the proxy: the cells where a script cannot tell what the real server does (its
tool-call deltas, its finish reasons, its refusal of ``json_schema``, its missing stream usage).
Greedy decoding (temperature 0, a seed) makes direct and proxied answers the same text."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from tests.conformance.conftest import (API_KEY, NO_JSON_SCHEMA, REPEATED_NAMES, Outcome, error_of,
                                        proxy_in_front_of, same)
from tests.realserver.conftest import MODEL

pytestmark = pytest.mark.realserver

ASK = [{"role": "user", "content": "What is the capital of France? One sentence."}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
GREEDY: dict[str, Any] = {"temperature": 0.0, "seed": 0, "max_tokens": 24}


@pytest.fixture(scope="module")
def bases(llama: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with proxy_in_front_of(llama.base_url, tmp_path_factory.mktemp("proxy-llama") / ".jurist") as root:
        yield {"direct": llama.base_url, "proxy": f"{root}/v1"}


@pytest.fixture(params=("direct", "proxy"))
def route(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def completion(base: str, *, stream: bool = False, **options: Any) -> Outcome:
    kwargs = {**GREEDY, **options}
    with openai.OpenAI(base_url=base, api_key=API_KEY, max_retries=0, timeout=120) as c:
        try:
            if not stream:
                r = c.chat.completions.create(model=MODEL, messages=ASK, **kwargs)
                choice = r.choices[0]
                calls = [(tc.function.name, tc.function.arguments) for tc in choice.message.tool_calls or ()]
                return Outcome(text=choice.message.content or None, tool_calls=calls, finish=choice.finish_reason,
                               usage=r.usage.total_tokens if r.usage else None)
            text, finish, usage = "", None, None
            calls: dict[int, list[str]] = {}
            for chunk in c.chat.completions.create(model=MODEL, messages=ASK, stream=True,
                                                   stream_options={"include_usage": True}, **kwargs):
                usage = chunk.usage.total_tokens if chunk.usage else usage
                for ch in chunk.choices:
                    text += ch.delta.content or ""
                    for piece in ch.delta.tool_calls or ():
                        call = calls.setdefault(piece.index, ["", ""])
                        if piece.function is not None:
                            call[0] += piece.function.name or ""
                            call[1] += piece.function.arguments or ""
                    finish = ch.finish_reason or finish
            return Outcome(text=text or None, tool_calls=[tuple(c) for c in calls.values()],  # type: ignore[misc]
                           finish=finish, usage=usage)
        except openai.APIStatusError as exc:
            return Outcome(error=error_of(exc, exc.status_code, exc.response.headers))


def pair(request: pytest.FixtureRequest, bases: dict[str, str], route: str, run: Callable[[str], Outcome],
         check: Callable[[Outcome], None], direct_fails: str | None = None, gated: bool = False) -> None:
    """As conftest.cell, for the real server: direct, then (proxy cell) through the proxy, compared."""
    direct = run(bases["direct"])
    try:
        check(direct)
        failure = None
    except AssertionError as exc:
        failure = exc
    if route == "direct":
        if direct_fails is None and failure is not None:
            raise failure
        assert direct_fails is None or failure is not None, f"expected to fail direct ({direct_fails}), it worked"
        if direct_fails is not None:
            request.node.user_properties.append(("direct_fails", direct_fails))  # in --junitxml's output
        return
    proxied = run(bases["proxy"])
    if failure is None:
        same(direct, proxied, gated=gated)
    try:
        check(proxied)
    except AssertionError as exc:
        raise AssertionError(f"through the proxy: {exc}") from exc


def test_plain(request: pytest.FixtureRequest, bases: dict[str, str], route: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error is None and out.text and "Paris" in out.text, out
        assert out.finish in ("stop", "length") and out.usage, out

    pair(request, bases, route, lambda b: completion(b), check)


def test_streamed(request: pytest.FixtureRequest, bases: dict[str, str], route: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error is None and out.text and "Paris" in out.text, out
        assert out.usage is None, "llama-cpp-python sends no usage in a stream"

    pair(request, bases, route, lambda b: completion(b, stream=True), check)


def test_cut_off_answer_says_length(request: pytest.FixtureRequest, bases: dict[str, str], route: str) -> None:
    def check(out: Outcome) -> None:
        assert out.error is None and out.finish == "length", out

    pair(request, bases, route, lambda b: completion(b, max_tokens=3), check, gated=True)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_forced_tool_call(request: pytest.FixtureRequest, bases: dict[str, str], route: str, stream: bool) -> None:
    """A named tool_choice: the server answers with a grammar-constrained call, repeating the
    call's name in every streamed piece; a client reads one name."""
    def check(out: Outcome) -> None:
        assert out.error is None, out
        [(name, arguments)] = out.tool_calls
        assert name == "get_weather" and isinstance(json.loads(arguments), dict), out.tool_calls

    choice = {"type": "function", "function": {"name": "get_weather"}}
    pair(request, bases, route, lambda b: completion(b, stream=stream, tools=[WEATHER], tool_choice=choice), check,
         direct_fails=REPEATED_NAMES if stream else None)


def test_structured_output_json_schema(request: pytest.FixtureRequest, bases: dict[str, str], route: str) -> None:
    """llama-cpp-python refuses ``response_format: json_schema`` (500); the proxy translates it."""
    schema = {"type": "object", "properties": {"capital": {"type": "string"}}, "required": ["capital"]}
    fmt = {"type": "json_schema", "json_schema": {"name": "capital", "schema": schema}}

    def check(out: Outcome) -> None:
        assert out.error is None, f"the request failed: {out.error}"
        assert isinstance(json.loads(out.text or ""), dict), out.text

    pair(request, bases, route, lambda b: completion(b, response_format=fmt, max_tokens=40), check,
         direct_fails=NO_JSON_SCHEMA)
