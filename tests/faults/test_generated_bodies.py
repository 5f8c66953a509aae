"""Every JSON write of the API (the gate proxy's too, and the tutor socket's frames), fed generated
bodies: the answer is a 2xx or a 4xx, in JSON, never a 500. ``tests/server/test_api_schema.py``
sends what the OpenAPI schema describes (schemathesis); these bodies are what it does not send: lone surrogates and NUL in any string, numbers no float
holds (``1e400``, 5,000 digits), NaN and infinities, booleans where numbers go, unknown fields,
deep nesting, invalid UTF-8 and random bytes, each in the place of one field of a valid body.

The app runs on a SQLite store with a judge on 127.0.0.1 that answers every call with a score.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from jurist.config import Settings
from jurist.judges.templates import builtin
from jurist.models import script
from jurist.server import create_app
from jurist.server.tutor_ws import ClientMessage, parse_client
from jurist.testing import ProviderServer, Reply

from tests.faults.generated import (DEEP, PROPERTY, Raw, dump, json_values, mutated, nested, places, replaced,
                                    splice_bytes)

RUBRICS = {"scale": [1, 5], "rubrics": [{"id": "helpful", "name": "Helpful", "scoring_criteria": "5 = very",
                                         "weight": 1}]}
SESSION = [{"role": "system", "content": "Be brief."},
           {"role": "user", "content": "How do I reset my password?"},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"reset\"}"}}]},
           {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "Use the link."},
           {"role": "assistant", "content": [{"type": "text", "text": "Use the 'Forgot password' link."}]}]

#: (method, path, a valid body): every route that reads a JSON body.
WRITES = [
    ("POST", "/api/evaluate", {"rubrics": RUBRICS, "session": SESSION, "session_id": "s-1", "judge": "fake/judge"}),
    ("POST", "/api/evaluation/labels", {"item": "s-1", "rubric": "helpful", "score": 4, "annotator": "ana",
                                        "note": "clear"}),
    ("POST", "/api/evaluation/labels", {"evaluation_id": "0" * 32, "rubric": "helpful", "passed": True,
                                        "annotator": "ben"}),
    ("POST", "/api/evaluation/analyze", {"kind": "rubric", "since": "2026-01-01", "min_count": 5, "alpha": 0.05,
                                         "limit": 100}),
    ("PUT", "/api/prompts/rubric_judge", {"text": builtin("rubric_judge").text + "\nBe strict.", "note": "stricter"}),
    ("PUT", "/api/prompts/rubric_judge/active", {"version": 1}),
    ("POST", "/api/prompt-tests", {"prompt": "rubric_judge", "a": 1, "b": 2, "share": 0.5, "calls": 10,
                                   "alpha": 0.05, "better": "higher"}),
    ("POST", "/api/prompt-tests/nope/stop", {"version": 1}),
    ("POST", "/api/research/evaluate", {"query": "How long does caffeine last?", "decision_timeout": 30,
                                        "decision_default": "proceed"}),
    ("POST", "/api/research/query", {"query": "How long does caffeine last?", "decision_default": "retry"}),
    ("POST", "/api/research/" + "a" * 32 + "/decision", {"decision": 1, "choice": "retry"}),
]


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    judge = ProviderServer().start()
    judge.default = Reply(text='{"score": 4, "reasoning": "clear"}')
    folder = Path(tempfile.mkdtemp(prefix="jurist-bodies-"))
    settings = Settings.load(
        home=str(folder / ".jurist"), database_url=f"sqlite:///{folder / 'jurist.db'}", judge="fake/judge",
        providers={"fake": {"type": "openai", "base_url": judge.base_url, "api_key": "k"}},
        max_retries=0, backoff_base=0.01, backoff_max=0.02)
    try:
        with TestClient(create_app(settings), base_url="http://localhost", raise_server_exceptions=False) as c:
            yield c
    finally:
        judge.stop()


def bodies(valid: dict[str, Any]) -> st.SearchStrategy[bytes]:
    """Bodies modelled on ``valid``: one to three of its values changed (any JSON value, a number no
    float holds, a surrogate), an unknown field, deep nesting; any JSON value; bytes."""
    text = dump(valid).encode()
    return st.one_of(
        mutated(valid).map(lambda v: dump(v).encode()),
        mutated(valid).map(lambda v: dump(v).encode()),
        mutated(valid).map(lambda v: dump(v).encode()),
        json_values.map(lambda v: dump(v).encode()),
        st.binary(max_size=100),
        st.integers(0, 2**32).map(lambda seed: splice_bytes(text, seed)),
    )


def answers_without_a_500(client: TestClient, method: str, path: str, body: bytes) -> None:
    r = client.request(method, path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code < 500, f"{method} {path} {body[:300]!r}: {r.status_code} {r.text[:500]}"
    if r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"):
        return  # the proxy's answer to "stream": true
    r.json()  # every answer is JSON, errors included


@pytest.mark.parametrize("method, path, valid", WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_a_generated_body_is_answered_2xx_or_4xx_in_json(client, method, path, valid):
    @PROPERTY
    @given(bodies(valid))
    def check(body: bytes) -> None:
        answers_without_a_500(client, method, path, body)

    check()


@pytest.mark.parametrize("method, path, valid", WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
@pytest.mark.parametrize("how", ["objects", "arrays", "in a field"])
def test_a_body_nested_100000_deep_is_a_4xx(client, method, path, valid, how):
    if how == "in a field":
        key = next(iter(valid))
        body = dump({**valid, key: "X"}).replace('"X"', nested(DEEP))
    else:
        body = nested(DEEP, objects=how == "objects")
    answers_without_a_500(client, method, path, body.encode())


#: What each field of a body is swapped for, one field at a time.
SWAPS = [Raw("1e400"), Raw("-Infinity"), Raw("NaN"), Raw("9" * 5000), Raw("-" + "9" * 400), "a\ud800b", "\udcff",
         "a\x00b", True, None, {}, [], Raw(nested(5000))]


@pytest.mark.parametrize("method, path, valid", WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_every_field_of_a_body_swapped_for_each_bad_value_is_a_2xx_or_4xx(client, method, path, valid):
    answers_without_a_500(client, method, path, dump(valid).encode())
    for place in places(valid)[1:]:
        for bad in SWAPS:
            answers_without_a_500(client, method, path, dump(replaced(valid, place, bad)).encode())


FRAME = {"type": "message", "content": "Caffeine blocks adenosine."}


@PROPERTY
@given(st.one_of(bodies(FRAME).map(lambda b: b.decode("utf-8", "replace")),
                 st.sampled_from([nested(DEEP), nested(DEEP, objects=True), '{"content": ' + "9" * 5000 + "}"])))
def test_a_generated_tutor_frame_is_read_or_answered_with_what_is_wrong(frame):
    """The socket answers a bad frame with an error frame saying why, and stays open."""
    read = parse_client(frame)
    assert isinstance(read, (ClientMessage, str))


# -- the gate proxy --------------------------------------------------------------------------

GATE_PASS = '{"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": null}'
CHAT = {"model": "gpt-test", "temperature": 0.2, "max_tokens": 50, "stream": False, "messages": [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": [{"type": "text", "text": "What is the capital of France?"}]},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"France\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "Paris"},
]}


@pytest.fixture(scope="module")
def proxy() -> Iterator[TestClient]:
    upstream = ProviderServer().start()
    upstream.default = Reply(text="Paris.")
    folder = Path(tempfile.mkdtemp(prefix="jurist-proxy-bodies-"))
    settings = Settings(home=str(folder / ".jurist"), database_url=f"sqlite:///{folder / 'jurist.db'}",
                        max_retries=0)
    app = create_app(settings, upstream=upstream.base_url, upstream_api_key="k",
                     gate_config={"evaluate_feedback_enabled": True, "judge": "scripted/judge"})
    try:
        with TestClient(app, base_url="http://localhost", raise_server_exceptions=False) as c:
            yield c
    finally:
        upstream.stop()


def test_a_generated_chat_completion_body_is_answered_2xx_or_4xx_in_json(proxy):
    script("judge", default=GATE_PASS)
    answers_without_a_500(proxy, "POST", "/v1/chat/completions", dump(CHAT).encode())
    for place in places(CHAT)[1:]:
        for bad in SWAPS:
            answers_without_a_500(proxy, "POST", "/v1/chat/completions", dump(replaced(CHAT, place, bad)).encode())

    @PROPERTY
    @given(bodies(CHAT))
    def check(body: bytes) -> None:
        answers_without_a_500(proxy, "POST", "/v1/chat/completions", body)

    check()
    proxy.app.state.jurist.store.flush()  # and every request answered was recorded: no write failed
