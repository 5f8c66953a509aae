"""Every parser of a judge's reply, fed generated replies: a verdict, or the parse error the judge
re-asks with (:class:`~jurist.errors.JudgeParseError`; the gate's and the checklist's parsers say
``ValueError``, which is their contract). Never another exception: no RecursionError from a reply
nested deep, no OverflowError from a score of 400 digits, no ValueError out of ``json`` where a
JudgeParseError belongs.

The replies: any text (lone surrogates, NUL and control characters included), a JSON object in the
shape each parser asks for with any value in any place, numbers no float holds, NaN and
infinities, ``SCORE:`` lines with such numbers, fences, and a reply nested 100,000 deep.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jurist.analysis.writer import parse_written
from jurist.checklist.evaluator import parse_batch_response
from jurist.config import Settings
from jurist.errors import JudgeParseError, ModelError
from jurist.gate.evaluators import parse_comprehensive, parse_quality
from jurist.judges import meaning
from jurist.judges.panel import parse_escalation_reply, parse_role_reply
from jurist.judges.parsing import parse_items, parse_preference, parse_score
from jurist.models import ChatRequest, resolve_model
from jurist.models.base import ToolCallDelta
from jurist.models.messages import UserMessage
from jurist.research.plan import parse_critic
from jurist.testing import ProviderServer, Reply

from tests.faults.generated import (DEEP, NUMBER_TOKENS, PROPERTY, Raw, characters, dump, json_values, mutated,
                                    nested)


class Parser:
    """A reply parser, a reply it reads (the shape of its JSON), and the errors it may raise."""

    def __init__(self, name: str, parse: Callable[[str], object], good: object,
                 errors: tuple[type[Exception], ...] = (JudgeParseError,)):
        self.name, self.parse, self.good, self.errors = name, parse, good, errors

    def __repr__(self) -> str:
        return self.name


UNIT = 0.5
PARSERS = [
    Parser("score", lambda t: parse_score(t, (1, 5)), {"score": 4, "reasoning": "clear"}),
    Parser("items", lambda t: parse_items(t, ["a", "b"]),
           {"items": [{"id": "a", "met": True, "reasoning": "x"}, {"id": "b", "met": "no"}]}),
    Parser("preference", parse_preference, {"winner": "A", "reasoning": "fuller"}),
    Parser("panel role", lambda t: parse_role_reply(t, ["accuracy"]),
           {"scores": {"accuracy": UNIT}, "confidence": UNIT, "critique": "fine"}),
    Parser("panel escalation", lambda t: parse_escalation_reply(t, ["accuracy"], ["critic"]),
           {"panel_review": "ok", "trust": {"critic": UNIT}, "scores": {"accuracy": UNIT}, "verdict": "pass"}),
    Parser("expresses", lambda t: meaning.parse_expresses(t, ["1"]),
           {"results": [{"id": "1", "expressed": True, "confidence": UNIT, "evidence": "quote"}]}),
    Parser("coverage", lambda t: meaning.parse_coverage(t, None),
           {"parts": [{"id": "", "part": "why", "covered": True, "confidence": UNIT}]}),
    Parser("relevance", lambda t: meaning.parse_relevance(t, ["p1"]), {"scores": [{"id": "p1", "score": UNIT}]}),
    Parser("support", meaning.parse_support,
           {"sentences": [{"sentence": "It is.", "supported": False, "confidence": UNIT}]}),
    Parser("critic", parse_critic, {"passed": False, "scores": {"coverage": UNIT}, "critique": "thin",
                                    "recommendation": "refine", "specific_issues": [{"issue": "x", "fix": "y"}]}),
    Parser("pattern writer", parse_written, {"title": "Short answers", "description": "They skip steps.",
                                             "suggested_fix": None}),
    Parser("checklist", parse_batch_response,
           {"recalledPoints": [{"id": "adenosine", "confidence": UNIT, "observation": "x"}], "feedback": "more"},
           (JudgeParseError, ValueError)),
    Parser("gate quality", parse_quality,
           {"quality_score": UNIT, "confidence_score": UNIT, "issues": ["x"], "improvement_hint": None},
           (JudgeParseError, ValueError)),
    Parser("gate comprehensive", parse_comprehensive, {"comprehensive": True, "reason": "all parts"},
           (JudgeParseError, ValueError)),
]

_number_text = st.sampled_from(NUMBER_TOKENS)


def replies(good: object) -> st.SearchStrategy[str]:
    """Replies modelled on ``good`` (the JSON a parser reads), and any text."""
    return st.one_of(
        st.text(characters, max_size=300),
        mutated(good).map(dump),
        mutated(good).map(lambda v: f"Here is my verdict.\n```json\n{dump(v)}\n```\nThanks."),
        st.tuples(mutated(good), st.text(characters, max_size=40)).map(lambda p: p[1] + dump(p[0]) + p[1]),
        st.tuples(_number_text, st.text(characters, max_size=40)).map(
            lambda p: f"SCORE: {p[0]}\nREASONING: {p[1]}\nWINNER: {p[1]}"),
        st.tuples(st.integers(1, 5000), st.booleans()).map(
            lambda d: nested(d[0], dump(good), objects=d[1]) if d[1] else '{"score": ' + nested(d[0]) + "}"),
        st.integers(1, 2000).map(lambda n: '{"a": ' * n),  # an object that never closes
        st.just(dump(good)),
    )


def parses_or_says_why(parser: Parser, text: str) -> None:
    try:
        parser.parse(text)
    except parser.errors:
        pass


@pytest.mark.parametrize("parser", PARSERS, ids=repr)
def test_a_generated_reply_is_a_verdict_or_a_parse_error(parser):
    @PROPERTY
    @given(replies(parser.good))
    def check(text: str) -> None:
        parses_or_says_why(parser, text)

    parses_or_says_why(parser, dump(parser.good))
    check()


@pytest.mark.parametrize("parser", PARSERS, ids=repr)
@pytest.mark.parametrize("reply", [
    nested(DEEP, objects=True),
    '{"score": ' + nested(DEEP) + "}",
    '{"score": ' + "9" * 400 + ', "confidence": ' + "9" * 400 + "}",
    '{"score": ' + "9" * 5000 + "}",
    "SCORE: " + "9" * 5000,
], ids=["objects 100,000 deep", "arrays 100,000 deep", "400 digits", "5,000 digits", "SCORE 5,000 digits"])
def test_a_reply_no_parser_can_hold_is_a_parse_error(parser, reply):
    with pytest.raises(parser.errors):
        parser.parse(reply)



# -- the endpoint's HTTP reply ---------------------------------------------------------------

OPENAI_REPLY = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [
    {"index": 0, "finish_reason": "stop", "logprobs": None, "message": {
        "role": "assistant", "content": "SCORE: 4\nREASONING: clear", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": 1}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
ANTHROPIC_REPLY = {"id": "m1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
                   "content": [{"type": "text", "text": "SCORE: 4"},
                               {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": 1}}],
                   "usage": {"input_tokens": 10, "output_tokens": 5}}


@pytest.fixture(scope="module")
def endpoint():
    server = ProviderServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("kind, good", [("openai", OPENAI_REPLY), ("anthropic", ANTHROPIC_REPLY)])
def test_a_generated_endpoint_reply_is_a_completion_or_a_model_error(endpoint, kind, good):
    """What the endpoint sends back (a completion with any field changed, NaN, 5,000 digits, deep
    nesting, bytes) is read, or a ModelError the retries and the breaker understand."""
    settings = Settings(providers={"p": {"type": kind, "base_url": endpoint.base_url, "api_key": "k"}},
                        max_retries=0, breaker_threshold=0)
    request = ChatRequest(messages=[UserMessage(content="Judge this.")])

    async def complete() -> None:
        model = resolve_model("p/m", settings, cache=False)
        try:
            await model.complete(request)
        except ModelError:
            pass
        finally:
            await model.aclose()

    def read(body: bytes) -> None:
        endpoint.default = Reply(body=body, headers={"Content-Type": "application/json"})
        asyncio.run(complete())

    read(dump(good).encode())

    @PROPERTY
    @given(st.one_of(mutated(good).map(lambda v: dump(v).encode()), st.binary(max_size=100),
                     st.sampled_from([nested(DEEP).encode(), dump({**good, "usage": Raw("9" * 5000)}).encode()])))
    def check(body: bytes) -> None:
        read(body)

    check()


CHUNK = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
    {"index": 0, "delta": {"role": "assistant", "content": "Paris", "tool_calls": [
        {"index": 0, "id": "t1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
     "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


def test_a_generated_stream_chunk_is_read_or_a_model_error(endpoint):
    settings = Settings(providers={"p": {"type": "openai", "base_url": endpoint.base_url, "api_key": "k"}},
                        max_retries=0, breaker_threshold=0)
    request = ChatRequest(messages=[UserMessage(content="Answer.")])

    async def stream() -> None:
        model = resolve_model("p/m", settings, cache=False)
        try:
            async for item in model.stream(request):
                assert isinstance(item, (str, ToolCallDelta))
        except ModelError:
            pass
        finally:
            await model.aclose()

    def read(chunk: str) -> None:
        endpoint.default = Reply(body=f"data: {chunk}\n\ndata: [DONE]\n\n".encode(),
                                 headers={"Content-Type": "text/event-stream"})
        asyncio.run(stream())

    read(dump(CHUNK))
    for chunk in ('{"choices": 3}', '{"choices": [{"delta": {"content": {"a": 1}}}]}', '{"choices": [7]}',
                  '{"usage": {"prompt_tokens": "many"}, "choices": []}', '{"choices": [{"delta": "x"}]}'):
        read(chunk)

    @PROPERTY
    @given(st.one_of(mutated(CHUNK).map(dump), json_values.map(dump), st.just(nested(DEEP))))
    def check(chunk: str) -> None:
        read(chunk)

    check()
