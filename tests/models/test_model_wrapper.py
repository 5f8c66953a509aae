"""The Model wrapper: retries, timeouts, the limiter, the cache, the record."""

import asyncio
import time

import pytest

from jurist.config import Settings
from jurist.errors import AuthFailed, ModelTimeout, ModelUnavailable, RateLimited
from jurist.models import ChatRequest, Limiter, resolve_model, script
from jurist.models.model import Model, RetryPolicy
from jurist.models.messages import openai_messages
from jurist.store import Store
from tests.quoting import prompt_text

REQ = ChatRequest(messages=[{"role": "user", "content": "hi"}])


def model(name="m", store=None, **kw):
    s = Settings.load(backoff_base=0.01, backoff_max=0.05, **kw)
    return resolve_model(f"scripted/{name}", s, sink=store)


async def test_retries_retryable_errors_then_succeeds():
    script("m", ModelUnavailable("500"), RateLimited("429"), "fine")
    c = await model().complete(REQ)
    assert c.text == "fine" and c.attempts == 3


async def test_gives_up_after_max_retries_with_a_typed_error():
    script("m", *[ModelUnavailable("500")] * 5)
    with pytest.raises(ModelUnavailable) as info:
        await model(max_retries=2).complete(REQ)
    assert info.value.attempts == 3


async def test_auth_errors_are_not_retried():
    adapter = script("m", AuthFailed("bad key"), "never")
    with pytest.raises(AuthFailed):
        await model().complete(REQ)
    assert len(adapter.requests) == 1


async def test_per_call_timeout():
    adapter = script("m", default="late")
    adapter.delay = 1.0
    with pytest.raises(ModelTimeout, match="within 0.1 s"):
        await model(timeout=0.1, max_retries=0).complete(REQ)


def test_retry_delay_honours_retry_after_and_caps_backoff():
    p = RetryPolicy(max_retries=5, backoff_base=1, backoff_max=4)
    assert p.delay(1, RateLimited("x", retry_after=3)) >= 3
    assert all(p.delay(n, ModelUnavailable("x")) <= 4 for n in range(1, 10))
    assert 0.5 <= p.delay(1, ModelUnavailable("x")) <= 1.0


async def test_limiter_bounds_requests_in_flight():
    lim = Limiter(max_in_flight=3)
    active = peak = 0

    async def job():
        nonlocal active, peak
        async with lim.slot():
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1

    await asyncio.gather(*(job() for _ in range(40)))
    assert peak == 3 and lim.peak_in_flight == 3 and lim.in_flight == 0


async def test_limiter_cancelled_waiter_does_not_leak_a_slot():
    lim = Limiter(max_in_flight=1)
    async with lim.slot():
        waiter = asyncio.create_task(lim._acquire())
        await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    async with lim.slot():
        assert lim.in_flight == 1
    assert lim.in_flight == 0


async def test_requests_per_minute_window():
    lim = Limiter(max_in_flight=10, requests_per_minute=3, window=0.3)
    start = time.monotonic()
    for _ in range(4):
        async with lim.slot():
            pass
    assert time.monotonic() - start >= 0.25


async def test_tokens_per_minute_window():
    lim = Limiter(max_in_flight=10, tokens_per_minute=100, window=0.3)
    start = time.monotonic()
    for _ in range(2):
        async with lim.slot(tokens=80):
            pass
    assert time.monotonic() - start >= 0.25


async def test_cache_answers_identical_requests_and_marks_them(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    adapter = script("m", "first answer", "second answer")
    m = model(store=store)
    a = await m.complete(REQ, purpose="rubric_judge")
    store.flush()
    b = await m.complete(REQ, purpose="rubric_judge")
    c = await m.complete(REQ, purpose="rubric_judge", use_cache=False)
    store.flush()
    calls = store.calls(limit=None)
    store.close()
    assert (a.text, b.text, c.text) == ("first answer", "first answer", "second answer")
    assert b.cached and not a.cached and len(adapter.requests) == 2
    assert sorted(x["cached"] for x in calls) == [False, False, True]


async def test_failed_call_is_recorded_and_not_cached(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/c.db")
    script("m", ModelUnavailable("down"), "ok now")
    m = model(store=store, max_retries=0)
    with pytest.raises(ModelUnavailable):
        await m.complete(REQ, purpose="p", trace_id="t")
    store.flush()
    assert (await m.complete(REQ)).text == "ok now"
    store.flush()
    rows = store.calls(limit=None, status="error")
    store.close()
    assert rows[0]["error"] == "ModelUnavailable: down" and rows[0]["trace_id"] == "t"


async def test_streamed_calls_are_recorded(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/s.db")
    script("m", "one two three", ModelUnavailable("gone"))
    m = model(store=store)
    chunks = [c async for c in m.stream(REQ, purpose="generation", trace_id="t1")]
    assert "".join(chunks).strip() == "one two three"
    with pytest.raises(ModelUnavailable):
        async for _ in m.stream(REQ, trace_id="t2"):
            pass
    store.flush()
    ok, = store.calls(trace_id="t1")
    bad, = store.calls(trace_id="t2")
    store.close()
    assert ok["status"] == "ok" and ok["response_text"].strip() == "one two three" and ok["params"]["stream"]
    assert bad["status"] == "error" and "gone" in bad["error"]


async def test_meaning_judge_work_is_recorded_like_a_call(tmp_path):
    """A meaning question asked through Model is one call record, failed ones too."""
    from jurist.errors import ConfigError
    from jurist.models.base import StatementCheck
    from jurist.models.model import MeaningBackend

    check = StatementCheck("a point", True, 0.8, "local/minilm", evidence="said it")

    class Meaning:
        name = "local/minilm"

        async def expresses(self, text, statements):
            if not statements:
                raise ConfigError("x")
            return [check]

    store = Store(f"sqlite:///{tmp_path}/m.db")
    model = Model(MeaningBackend(Meaning()), Limiter(4), sink=store, cache=False)
    calls = model.meaning("checklist_batch", trace_id="t")
    assert await calls.expresses("said it", ["a point"]) == [check]
    call_id, = calls.call_ids
    with pytest.raises(ConfigError):
        await calls.expresses("said it", [])
    store.flush()
    rows = {r["id"]: r for r in store.calls(limit=None, trace_id="t")}
    store.close()
    ok = rows[call_id]
    assert ok["status"] == "ok" and ok["params"] == {"question": "expresses"} and ok["endpoint"] == "local"
    assert '"expressed": true' in ok["response_text"] and "a point" in prompt_text(ok["messages"])
    assert [r["status"] for r in rows.values() if r["id"] != call_id] == ["error"]


def test_cache_key_is_the_hash_of_the_sorted_request_json() -> None:
    """The key is the hash of the request with the model and the endpoint it goes to."""
    import hashlib
    import json

    from jurist.models.base import ChatRequest

    for req in (
        ChatRequest(messages=[{"role": "user", "content": "héllo {x}"}]),
        ChatRequest(messages=[{"role": "system", "content": "a"}, {"role": "user", "content": "b\n\"c\""}],
                    temperature=None, max_tokens=None, seed=7,
                    response_schema={"type": "object", "properties": {"score": {"type": "number"}}}),
    ):
        blob = json.dumps({"endpoint": "http://e/v1", "model": "m/x", "messages": openai_messages(req.messages),
                           "temperature": req.temperature,
                           "max_tokens": req.max_tokens, "seed": req.seed, "schema": req.response_schema},
                          sort_keys=True, ensure_ascii=False)
        assert req.cache_key("m/x", "http://e/v1") == hashlib.sha256(blob.encode()).hexdigest()
    assert ChatRequest(messages=[{"role": "user", "content": "a"}]).cache_key("m/x", "http://e/v1") != \
        ChatRequest(messages=[{"role": "user", "content": "b"}]).cache_key("m/x", "http://e/v1")
    one = ChatRequest(messages=[{"role": "user", "content": "a"}])
    assert one.cache_key("m/x", "http://e/v1") != one.cache_key("m/x", "http://f/v1")  # another endpoint
    assert one.cache_key("m/x", "http://e/v1") != one.cache_key("n/x", "http://e/v1")  # another provider


async def test_a_logprobs_request_skips_the_cache_and_its_record_says_whether_they_came(tmp_path, server):
    from jurist.models.openai import OpenAIChat
    from jurist.testing import Reply
    from jurist.testing.replies import token_logprobs

    store = Store(f"sqlite:///{tmp_path}/l.db")
    m = Model(OpenAIChat("m", base_url=server.base_url, api_key="k"), Limiter(4), sink=store)
    asking = ChatRequest(messages=REQ.messages, top_logprobs=5)
    server.script(Reply(text="4"), Reply(text="4", logprobs=token_logprobs(["4"])), Reply(text="4"))
    await m.complete(REQ)
    store.flush()
    returned = await m.complete(asking)
    missing = await m.complete(asking)
    store.flush()
    calls = store.calls(limit=None)
    store.close()
    await m.aclose()
    assert len(server.requests) == 3 and not returned.cached and not missing.cached
    assert returned.logprobs is not None and missing.logprobs is None
    assert sum("logprobs" not in c["params"] for c in calls) == 1
    assert sorted((c["params"]["logprobs"], c["params"]["top_logprobs"], c["params"]["logprobs_returned"])
                  for c in calls if "logprobs" in c["params"]) == [(True, 5, False), (True, 5, True)]


def test_a_samples_index_is_in_its_cache_key_and_record_but_sample_0_is_the_ordinary_request() -> None:
    import hashlib
    import json

    from jurist.models.base import ChatRequest

    messages = [{"role": "user", "content": "a"}]
    plain = ChatRequest(messages=messages, seed=3)
    second = ChatRequest(messages=messages, seed=3, sample=1)
    blob = json.dumps({"endpoint": "http://e/v1", "model": "m/x", "messages": messages, "temperature": 0.0,
                       "max_tokens": 1024, "seed": 3, "schema": None, "sample": 1}, sort_keys=True, ensure_ascii=False)
    assert second.cache_key("m/x", "http://e/v1") == hashlib.sha256(blob.encode()).hexdigest() \
        != plain.cache_key("m/x", "http://e/v1")
    assert second.params()["sample"] == 1 and "sample" not in plain.params()


async def test_a_judges_samples_are_calls_of_their_own_with_their_own_seeds(tmp_path) -> None:
    from jurist.judges import Judge, builtin, parse_score
    from jurist.models import resolve_model, script
    from jurist.store import Store

    adapter = script("sampled", *(["SCORE: 3"] * 3))
    store = Store(f"sqlite:///{tmp_path}/s.db")
    judge = Judge(resolve_model("scripted/sampled", Settings.load(), sink=store), builtin("rubric_judge"),
                  purpose="rubric_judge", format_hint="SCORE: <n>", temperature=0.7, seed=5)
    variables = dict(rubric_name="R", rubric_description="D", scoring_criteria="C", rubric_items="",
                     chat_session="S", score_min="1", score_max="5")
    for sample in (0, 1, 2):
        assert (await judge.verdict(variables, lambda t: parse_score(t, (1, 5)), sample=sample)).ok
    store.flush()
    again = await judge.verdict(variables, lambda t: parse_score(t, (1, 5)), sample=1)
    assert again.ok and again.cached  # answered from the cache: no fourth request
    store.close()
    assert [(r.seed, r.sample, r.temperature) for r in adapter.requests] == [(5, None, 0.7), (6, 1, 0.7),
                                                                            (7, 2, 0.7)]
