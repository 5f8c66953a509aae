"""The circuit breaker per endpoint: fail fast while an endpoint is down, probe it after a cool-down."""

import asyncio
import time

import pytest

from jurist.config import Settings
from jurist.errors import EndpointDown, ModelTimeout, ModelUnavailable, RateLimited
from jurist.models import ChatRequest, resolve_model
from jurist.models.breaker import CircuitBreaker, got_no_answer
from jurist.models.limiter_pool import LimiterPool
from jurist.testing import Reply

REQ = ChatRequest(messages=[{"role": "user", "content": "hi"}])


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def timeout() -> ModelTimeout:
    return ModelTimeout("no answer within 1 s")


def test_it_opens_after_the_threshold_and_fails_calls_at_once():
    clock = Clock()
    b = CircuitBreaker("http://e/v1", threshold=3, cooldown=10, clock=clock)
    for _ in range(2):
        assert b.admit() is False
        b.report(False, timeout())
    assert b.state == "closed"
    b.admit()
    b.report(False, ModelUnavailable("connection refused"))
    assert b.state == "open"
    with pytest.raises(EndpointDown, match=r"http://e/v1 is down: 3 calls in a row.*10\.0 s more") as info:
        b.admit()
    assert isinstance(info.value, ModelUnavailable) and not info.value.retryable
    assert info.value.endpoint == "http://e/v1" and info.value.retry_in == pytest.approx(10)


def test_endpoint_down_survives_pickling():  # as an exception crossing to another process would
    import pickle

    err = pickle.loads(pickle.dumps(EndpointDown("e is down", endpoint="e", retry_in=3.0)))
    assert isinstance(err, EndpointDown) and str(err) == "e is down"


def test_one_probe_after_the_cooldown_closes_it_on_an_answer():
    clock = Clock()
    b = CircuitBreaker("e", threshold=1, cooldown=5, clock=clock)
    b.report(b.admit(), timeout())
    clock.now += 5
    assert b.state == "half-open"
    assert b.admit() is True  # the probe
    with pytest.raises(EndpointDown, match="probe call is in flight"):
        b.admit()  # only one probe at a time
    b.report(True)
    assert b.state == "closed" and b.admit() is False and b.failures == 0


def test_a_failed_probe_opens_it_for_another_cooldown():
    clock = Clock()
    b = CircuitBreaker("e", threshold=2, cooldown=5, clock=clock)
    for _ in range(2):
        b.report(b.admit(), timeout())
    clock.now += 6
    b.report(b.admit(), timeout())
    assert b.state == "open"
    clock.now += 4.9
    with pytest.raises(EndpointDown):
        b.admit()
    clock.now += 0.1
    assert b.admit() is True


def test_a_cancelled_probe_gives_its_turn_to_the_next_call():
    clock = Clock()
    b = CircuitBreaker("e", threshold=1, cooldown=1, clock=clock)
    b.report(b.admit(), timeout())
    clock.now += 1
    b.report(b.admit(), asyncio.CancelledError())
    assert b.state == "half-open" and b.admit() is True


def test_an_answer_with_an_error_status_resets_the_count():
    b = CircuitBreaker("e", threshold=2, cooldown=1)
    b.report(b.admit(), timeout())
    b.report(b.admit(), RateLimited("429", status=429))
    b.report(b.admit(), ModelUnavailable("500", status=500))
    b.report(b.admit(), timeout())
    assert b.state == "closed" and b.failures == 1
    assert not got_no_answer(ModelUnavailable("503", status=503)) and got_no_answer(ModelUnavailable("refused"))


def test_threshold_zero_turns_it_off():
    b = CircuitBreaker("e", threshold=0, cooldown=1)
    for _ in range(50):
        b.report(b.admit(), timeout())
    assert b.admit() is False


def test_a_pool_keeps_one_breaker_per_endpoint():
    s = Settings.load(providers={"p": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}},
                      breaker_threshold=7, breaker_cooldown=3)
    pool = LimiterPool(s)  # the threshold and cool-down are the pool's, fixed when it is built
    a, b = resolve_model("p/m1", s, limiters=pool), resolve_model("p/m2", s, limiters=pool)
    assert a.breaker is not None and a.breaker is b.breaker
    assert (a.breaker.threshold, a.breaker.cooldown) == (7, 3)
    assert resolve_model("p/m1", s, limiters=LimiterPool(s)).breaker is not a.breaker
    assert resolve_model("scripted/x", s, limiters=pool).breaker is None  # in-process: nothing to go down


def settings_for(server, **kw):
    return Settings.load(providers={"fake": {"type": "openai", "base_url": server.base_url, "api_key": "k"}},
                         backoff_base=0.01, backoff_max=0.02, **kw)


async def test_a_dead_endpoint_fails_fast_then_a_probe_finds_it_up(provider):
    provider.script(*[Reply(hang=True)] * 3)  # then the default reply
    s = settings_for(provider, timeout=0.3, max_retries=0, breaker_threshold=3, breaker_cooldown=1.0)
    model = resolve_model("fake/j", s, limiters=LimiterPool(s))
    for _ in range(3):
        with pytest.raises(ModelTimeout):
            await model.complete(REQ, use_cache=False)
    started = time.monotonic()
    with pytest.raises(EndpointDown, match="is down: 3 calls in a row got no answer"):
        await model.complete(REQ, use_cache=False)
    assert time.monotonic() - started < 0.1 and len(provider.requests) == 3  # nothing sent
    await asyncio.sleep(1.0)
    completion = await model.complete(REQ, use_cache=False)  # the probe: the endpoint answers again
    await model.aclose()
    assert completion.text and model.breaker is not None and model.breaker.state == "closed"
    assert len(provider.requests) == 4


async def test_retries_stop_at_an_open_breaker(provider):
    provider.script(*[Reply(hang=True)] * 10)
    s = settings_for(provider, timeout=0.2, max_retries=8, breaker_threshold=2, breaker_cooldown=30)
    model = resolve_model("fake/j", s, limiters=LimiterPool(s))
    started = time.monotonic()
    with pytest.raises(EndpointDown) as info:
        await model.complete(REQ, use_cache=False)
    await model.aclose()
    assert info.value.attempts == 3 and len(provider.requests) == 2  # two timeouts, then no more calls
    assert time.monotonic() - started < 1.5  # not nine timeouts


async def test_calls_waiting_for_a_slot_fail_at_once_when_the_endpoint_dies(provider):
    provider.script(*[Reply(hang=True)] * 40)
    s = settings_for(provider, timeout=0.4, max_retries=0, breaker_threshold=2, breaker_cooldown=30,
                     max_concurrency=2)
    model = resolve_model("fake/j", s, limiters=LimiterPool(s))
    started = time.monotonic()
    results = await asyncio.gather(*(model.complete(ChatRequest(messages=[{"role": "user", "content": str(i)}]))
                                     for i in range(20)), return_exceptions=True)
    await model.aclose()
    # The two first calls time out (a third may take a freed slot between the two timeouts); then
    # every call that waited for a slot fails at once instead of waiting its own timeout.
    timeouts = sum(isinstance(r, ModelTimeout) and not isinstance(r, EndpointDown) for r in results)
    assert timeouts <= 3 and sum(isinstance(r, EndpointDown) for r in results) == 20 - timeouts
    assert len(provider.requests) == timeouts and time.monotonic() - started < 2  # not ten timeouts in a row


async def test_a_stream_to_a_dead_endpoint_fails_fast(provider):
    provider.script(*[Reply(hang=True)] * 2)
    s = settings_for(provider, timeout=0.3, max_retries=0, breaker_threshold=2, breaker_cooldown=30)
    model = resolve_model("fake/j", s, limiters=LimiterPool(s))
    for _ in range(2):
        with pytest.raises(ModelTimeout):
            await model.complete(REQ, use_cache=False)
    with pytest.raises(EndpointDown):
        async for _ in model.stream(REQ):
            pass
    await model.aclose()
    assert len(provider.requests) == 2
