"""The proxy's generations are user traffic: bounded by the upstream's own limit, never by the
judges' ``max_concurrency``, never queued behind judge calls (a stock openai client, a real
uvicorn proxy, a scripted upstream on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from jurist.config import Settings
from jurist.errors import ConfigError
from jurist.models import script
from jurist.models.limiter_pool import LimiterPool
from jurist.server import create_app
from jurist.testing import Reply
from tests.server.live import running

PASS = '{"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": null}'
ASK = [{"role": "user", "content": "What is the capital of France?"}]


async def _ask_all(base: str, n: int) -> list[str]:
    async with openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0, timeout=30) as client:
        replies = await asyncio.gather(*(client.chat.completions.create(model="m", messages=ASK)
                                         for _ in range(n)))
    return [r.choices[0].message.content or "" for r in replies]


def _generations_in_flight(provider, settings: Settings, n: int) -> int:
    """Send ``n`` requests at once through the proxy (judged by scripted/judge, feedback on);
    the most generations the upstream had in flight at once."""
    script("judge", default=PASS)
    provider.default = Reply(text="Paris.", delay=0.6)
    app = create_app(settings, upstream=provider.base_url,
                     gate_config={"evaluate_feedback_enabled": True, "judge": "scripted/judge"})
    with running(app) as base:
        assert asyncio.run(_ask_all(base, n)) == ["Paris."] * n
    return provider.peak_in_flight


def test_generations_are_not_held_to_the_judges_max_concurrency(provider, isolated):
    """Default settings: the judges' max_concurrency is 10; 24 clients at once get 24 generations
    in flight at once, not 10 (the upstream's own default limit is 512)."""
    settings = Settings(home=str(isolated / ".jurist"))
    assert settings.max_concurrency == 10
    assert _generations_in_flight(provider, settings, 24) == 24


def test_upstream_max_concurrency_bounds_the_generations(provider, isolated):
    settings = Settings(home=str(isolated / ".jurist"), upstream_max_concurrency=3)
    assert _generations_in_flight(provider, settings, 8) == 3


def test_a_providers_max_in_flight_for_the_upstream_url_is_its_limit(provider, isolated):
    """A configured provider with the upstream's base_url and max_in_flight: that is the upstream's
    limit (whatever max_concurrency and upstream_max_concurrency say)."""
    settings = Settings(home=str(isolated / ".jurist"), max_concurrency=2,
                        providers={"local": {"base_url": provider.base_url, "api_key": "k", "max_in_flight": 5}})
    assert _generations_in_flight(provider, settings, 9) == 5


def test_judging_after_send_never_delays_the_next_generation(provider, isolated):
    """Feedback off, the judge on the same endpoint as the upstream, the judges' limit 1: each
    answer is sent at once and judged afterwards (1 s per judge call); the next requests'
    generations do not wait for those judge calls."""
    def reply(body):
        if body.get("model") == "judge":
            return Reply(text=PASS, delay=1.0)
        return Reply(text="Paris.")

    provider.default = reply
    settings = Settings(home=str(isolated / ".jurist"), max_concurrency=1,
                        providers={"fake": {"base_url": provider.base_url, "api_key": "k"}})
    app = create_app(settings, upstream=provider.base_url,
                     gate_config={"evaluate_feedback_enabled": False, "judge": "fake/judge"})
    with running(app) as base:
        with openai.OpenAI(base_url=f"{base}/v1", api_key="k", max_retries=0, timeout=30) as client:
            took = []
            for _ in range(4):  # the first one warms the proxy up (the store, the clients)
                started = time.monotonic()
                r = client.chat.completions.create(model="m", messages=ASK)
                took.append(time.monotonic() - started)
                assert r.choices[0].message.content == "Paris."
                assert r.model_extra["jurist"]["evaluation_pending"] is True
    judged = [q for q in provider.requests if q["json"]["model"] == "judge"]
    assert len(judged) >= 2  # the judge was called after the answers were sent
    assert max(took[1:]) < 0.6, took  # not queued behind a 1 s judge call holding the judges' one slot


def test_the_generations_lane_is_a_limiter_of_its_own():
    assert Settings().upstream_max_concurrency == 512
    pool = LimiterPool(Settings(max_concurrency=2, upstream_max_concurrency=7))
    judge, upstream = pool.get("http://h/v1"), pool.get("http://h/v1", "upstream")
    assert judge is not upstream and pool.get("http://h/v1/", "upstream") is not judge
    assert judge.stats().max_in_flight == 2 and upstream.stats().max_in_flight == 7
    # max_in_flight over the whole pool bounds the generations' lane too
    assert LimiterPool(Settings(), max_in_flight=4).get("http://h/v1", "upstream").stats().max_in_flight == 4


def test_no_provider_may_be_named_upstream():
    with pytest.raises(ConfigError, match="gate proxy's own name"):
        Settings.load(providers={"upstream": {"base_url": "http://h/v1"}})


def test_a_proxys_judges_keep_pace_with_its_generations_unless_their_limit_is_set(monkeypatch):
    """The gate makes one judge call per generation: in a proxy, the judges' max_concurrency, unset,
    is the upstream's limit too; set (explicitly, in jurist.yaml or the environment), it stays."""
    from jurist.cli.proxy import proxy_settings

    assert proxy_settings(Settings.load()).max_concurrency == 512
    assert proxy_settings(Settings.load(upstream_max_concurrency=40)).max_concurrency == 40
    assert proxy_settings(Settings.load(max_concurrency=4)).max_concurrency == 4
    monkeypatch.setenv("JURIST_MAX_CONCURRENCY", "3")
    assert proxy_settings(Settings.load()).max_concurrency == 3
    monkeypatch.setenv("JURIST_UPSTREAM_MAX_CONCURRENCY", "64")
    assert Settings.load().upstream_max_concurrency == 64
