"""The offline judge (local/minilm) on any text: each public method gives a result of
its type or a typed failure (a JuristError, such as Uncertain), never another exception.

Loads the models (marked ``slow``); the property test keeps to a few dozen examples.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Coroutine

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jurist.errors import JuristError
from jurist.models.base import CoverageResult, RelevanceScore, StatementCheck, SupportResult
from jurist.models.local import LocalJudge, get_local_judge

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    judge = get_local_judge()
    asyncio.run(judge.load())
    return judge


def _check(result: Any, kind: type, items: list[str] | None = None) -> None:
    """``result`` is ``kind`` (or, with ``items``, a list of one ``kind`` per item)."""
    if items is None:
        assert isinstance(result, kind), result
        return
    assert isinstance(result, list) and len(result) == len(items), result
    assert all(isinstance(r, kind) for r in result), result


def _verdict_or_typed_failure(call: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """The call's result, or None when it raised a JuristError; any other exception fails the test."""
    try:
        return asyncio.run(call())
    except JuristError:
        return None


# --- the crash of texts with no clause: ValueError: max() arg is an empty sequence ------------


@pytest.mark.parametrize(
    ("text", "other"),
    [
        ("?", "..."), ("because", "so"), ("...", "but"), ("but", "?"), ("!?!", "because"),
        # a text with no clause against a statement with content words: the old crash
        ("so", "The cat sat on the mat."), ("because", "The parcel arrived on Friday."),
        ("?", "Refunds take five days."), ("...", "The assistant apologises for the delay."), ("but", "but not now"),
    ],
)
def test_texts_of_punctuation_or_one_word_get_a_verdict(judge: LocalJudge, text: str, other: str) -> None:
    checks = _verdict_or_typed_failure(lambda: judge.expresses(text, [other]))
    if checks is not None:
        _check(checks, StatementCheck, [other])
        assert checks[0].statement == other
    support = _verdict_or_typed_failure(lambda: judge.support(other, [text]))
    if support is not None:
        _check(support, SupportResult)
        assert set(support.supported) | set(support.unsupported) == {other}
    coverage = _verdict_or_typed_failure(lambda: judge.coverage(text, other))
    if coverage is not None:
        _check(coverage, CoverageResult)
        assert coverage.covered + coverage.uncovered  # a non-blank question has a part
    scores = _verdict_or_typed_failure(lambda: judge.relevance(text, [other, text]))
    if scores is not None:
        _check(scores, RelevanceScore, [other, text])
        assert all(0.0 <= s.score <= 1.0 for s in scores)


# --- any text --------------------------------------------------------------------------------

_FRAGMENTS = st.sampled_from(
    ["What", "why", "and", "Explain", "The assistant", "not", "?", ".", "...", ";", "1.", "(", '"', "e.g.",
     " ", "\n", "\x00", "\ud800", "😀", "这是什么", "？", "。", "ما هذا؟", "Что это?", "because", "so", "but"]
)
_ANY_CHAR = st.characters(exclude_categories=())  # every category, lone surrogates included
TEXT = st.one_of(
    st.text(_ANY_CHAR, max_size=60),
    st.lists(st.one_of(_FRAGMENTS, st.text(_ANY_CHAR, max_size=4)), max_size=20).map(" ".join),
)
TEXTS = st.lists(TEXT, min_size=0, max_size=3)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=TEXT, other=TEXT, many=TEXTS)
def test_any_text_gets_a_result_or_a_typed_failure(judge: LocalJudge, text: str, other: str, many: list[str]) -> None:
    checks = _verdict_or_typed_failure(lambda: judge.expresses(text, many))
    if checks is not None:
        _check(checks, StatementCheck, many)
    coverage = _verdict_or_typed_failure(lambda: judge.coverage(text, other))
    if coverage is not None:
        _check(coverage, CoverageResult)
    coverage = _verdict_or_typed_failure(lambda: judge.coverage(text, other, parts=many))
    if coverage is not None:
        _check(coverage, CoverageResult)
        assert sorted(coverage.covered + coverage.uncovered) == sorted(many)
    scores = _verdict_or_typed_failure(lambda: judge.relevance(text, many))
    if scores is not None:
        _check(scores, RelevanceScore, many)
    support = _verdict_or_typed_failure(lambda: judge.support(text, many))
    if support is not None:
        _check(support, SupportResult)


ODD = ["", " ", "\x00\x07", "\ud800", "\udfff half", "😀😀😀", "这是什么？", "ما هذا؟", "Что это? Объясни.",
       "\u200b", "e.g.", "1."]


@pytest.mark.parametrize("odd", ODD)
def test_odd_texts_in_every_place(judge: LocalJudge, odd: str) -> None:
    plain = "The refund was sent on Monday."
    for call, kind, items in [
        (lambda: judge.expresses(odd, [plain]), StatementCheck, [plain]),
        (lambda: judge.expresses(plain, [odd]), StatementCheck, [odd]),
        (lambda: judge.coverage(odd, plain), CoverageResult, None),
        (lambda: judge.coverage(plain, odd), CoverageResult, None),
        (lambda: judge.coverage(plain, plain, parts=[odd]), CoverageResult, None),
        (lambda: judge.relevance(odd, [plain]), RelevanceScore, [plain]),
        (lambda: judge.relevance(plain, [odd]), RelevanceScore, [odd]),
        (lambda: judge.support(odd, [plain]), SupportResult, None),
        (lambda: judge.support(plain, [odd]), SupportResult, None),
    ]:
        result = _verdict_or_typed_failure(call)
        if result is not None:
            _check(result, kind, items)


def test_100_kb_of_text_is_judged_in_bounded_time(judge: LocalJudge) -> None:
    # The windows are capped (jurist.models.texts.MAX_WINDOW_SENTENCES); sentences differ, so no cache helps.
    text = " ".join(f"Parcel {i} left depot {i % 97} on day {i % 31} and reached customer {i * 7 % 1000} later."
                    for i in range(2000))[:100_000]
    claim = "The parcel arrived on Friday."
    started = time.perf_counter()
    checks = _verdict_or_typed_failure(lambda: judge.expresses(text, [claim]))
    support = _verdict_or_typed_failure(lambda: judge.support(claim, [text]))
    coverage = _verdict_or_typed_failure(lambda: judge.coverage("When did parcel 5 arrive?", text))
    assert time.perf_counter() - started < 120.0
    if checks is not None:
        _check(checks, StatementCheck, [claim])
    if support is not None:
        _check(support, SupportResult)
    if coverage is not None:
        _check(coverage, CoverageResult)
