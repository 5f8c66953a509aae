"""One limiter interface: the three backends behind RequestLimiter, chosen by one URL,
kept per endpoint by a LimiterPool, and safe across event loops."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jurist.config import Settings
from jurist.errors import ConfigError
from jurist.models.limiter import Limiter, LimiterBounds, RequestLimiter
from jurist.models.limiter_pool import LimiterPool, open_limiter, with_max_held
from jurist.models.redis_limiter import RedisLimiter
from jurist.models.registry import resolve_model
from jurist.sync import run_sync


class Meter:
    """Requests inside their slot, counted across threads."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self.by_thread: dict[str, int] = {}
        self._lock = threading.Lock()

    async def request(self, limiter: RequestLimiter, hold: float = 0.01) -> None:
        async with limiter.slot():
            with self._lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
                name = threading.current_thread().name
                self.by_thread[name] = self.by_thread.get(name, 0) + 1
            await asyncio.sleep(hold)
            with self._lock:
                self.now -= 1


async def behaves(limiter: RequestLimiter, bound: int) -> None:
    """The protocol, and the bound reached and never passed."""
    assert isinstance(limiter, RequestLimiter)
    meter = Meter()
    await asyncio.gather(*(meter.request(limiter) for _ in range(4 * bound)))
    assert meter.peak == bound and meter.now == 0
    stats = limiter.stats()
    assert stats.in_flight == 0 and stats.peak_in_flight == bound


async def from_two_loops(limiter: RequestLimiter, bound: int, n: int = 12) -> Meter:
    """Requests from this loop and, at the same time, from a second loop that run_sync drives in a thread."""
    meter = Meter()

    async def many() -> None:
        await asyncio.gather(*(meter.request(limiter, 0.02) for _ in range(n)))

    def in_thread() -> None:
        threading.current_thread().name = "second-loop"
        run_sync(many())

    await asyncio.wait_for(asyncio.gather(many(), asyncio.to_thread(in_thread)), 30)
    assert meter.peak == bound and meter.now == 0  # the bound held across both loops
    assert meter.by_thread["second-loop"] == n and sum(meter.by_thread.values()) == 2 * n
    return meter


# -- the in-process backend ---------------------------------------------------------


async def test_the_memory_limiter_is_a_request_limiter():
    lim = open_limiter("e", LimiterBounds(3))
    assert type(lim) is Limiter and open_limiter("e", url="memory://").stats().max_in_flight == 16
    await behaves(lim, 3)
    await lim.aclose()


async def test_the_memory_limiter_holds_its_bound_across_event_loops():
    await from_two_loops(Limiter(3), 3)


async def test_a_waiter_on_another_loop_that_gives_up_leaves_no_slot_behind():
    lim = Limiter(1)
    got_in = threading.Event()

    async def give_up() -> None:
        task = asyncio.ensure_future(lim._acquire())
        await asyncio.sleep(0.05)
        got_in.set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async with lim.slot():
        await asyncio.to_thread(lambda: run_sync(give_up()))
    assert got_in.is_set()
    await asyncio.wait_for(Meter().request(lim), 2)
    assert lim.in_flight == 0


# -- Redis and Ray -------------------------------------------------------------------


async def test_the_redis_limiter_is_a_request_limiter(redis_url):
    lim = open_limiter("e1", LimiterBounds(3), with_max_held(redis_url, 2))
    assert isinstance(lim, RedisLimiter) and lim.url == redis_url and lim.max_held == 2  # jurist's parameter stays out
    try:
        await behaves(lim, 2)
    finally:
        await lim.aclose()


async def test_the_redis_limiter_holds_its_bound_across_event_loops(redis_url):
    lim = RedisLimiter(redis_url, "e1", max_in_flight=3)
    try:
        await from_two_loops(lim, 3)
    finally:
        await lim.aclose()


ray = pytest.importorskip("ray")




async def test_the_ray_limiter_is_a_request_limiter_on_the_jobs_actor(cluster):
    from jurist.models.shared_limiter import SharedLimiter, actor_name

    lim = open_limiter("test://protocol", LimiterBounds(3), f"ray://{cluster}")
    assert isinstance(lim, SharedLimiter)
    actor = ray.get_actor(actor_name(cluster, "test://protocol"), namespace="jurist")
    assert lim.actor._actor_id == actor._actor_id
    try:
        await behaves(lim, 3)
    finally:
        await lim.aclose()
    assert (await actor.stats.remote()).in_flight == 0
    assert type(open_limiter("test://protocol", url="ray://")) is SharedLimiter  # ray://: this process's job


async def test_the_ray_limiter_holds_its_bound_across_event_loops(cluster):
    lim = open_limiter("test://loops", LimiterBounds(3), f"ray://{cluster}?max_held=2")
    try:
        await from_two_loops(lim, 2, n=8)  # max_held, this process's share, holds for both loops
    finally:
        await lim.aclose()


def test_a_model_built_with_a_ray_url_has_the_jobs_limiter_from_the_start(cluster, tmp_path):
    from jurist.models.shared_limiter import SharedLimiter

    settings = Settings.load(home=str(tmp_path), limiter_url=f"ray://{cluster}?max_held=4",
                             providers={"p": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}})
    model = resolve_model("p/m", settings, limiters=LimiterPool(settings, max_in_flight=6))
    assert isinstance(model.limiter, SharedLimiter) and model.limiter.max_held == 4
    assert ray.get(model.limiter.actor.config.remote()).max_in_flight == 6


# -- one URL, one pool ----------------------------------------------------------------


def test_an_unknown_limiter_url_or_a_bad_share_is_a_config_error():
    with pytest.raises(ConfigError, match="memory://, redis://"):
        open_limiter("e", url="http://127.0.0.1/")
    with pytest.raises(ConfigError, match="max_held"):
        open_limiter("e", url="memory://?max_held=0")


async def test_a_pool_keeps_one_limiter_per_endpoint_and_url():
    pool, other = LimiterPool(Settings(max_concurrency=4)), LimiterPool()
    a = pool.get("e")
    assert pool.get("e") is a and a.stats().max_in_flight == 4
    assert pool.get("f") is not a and pool.get("e", shared=False) is a  # no limiter URL: one limiter either way
    assert other.get("e") is not a and other.get("e").stats().max_in_flight == 10  # pools share nothing
    await pool.aclose()
    assert pool.get("e") is not a  # closed and forgotten


def test_a_pool_gives_each_endpoint_the_bounds_of_its_provider_fixed_when_it_is_built():
    settings = Settings(max_concurrency=3, providers={
        "p": {"base_url": "http://127.0.0.1:9/v1/", "max_in_flight": 7, "requests_per_minute": 50},
        "q": {"base_url": "http://127.0.0.1:9/v1", "max_in_flight": 2},  # the same server, named second
        "r": {"base_url": "http://127.0.0.1:8/v1", "tokens_per_minute": 900}})
    pool = LimiterPool(settings)
    assert pool.bounds("http://127.0.0.1:9/v1", "p") == LimiterBounds(7, 50, None)
    assert pool.bounds("http://127.0.0.1:9/v1", "q") == LimiterBounds(2, None, None)
    assert pool.bounds("http://127.0.0.1:9/v1") == LimiterBounds(7, 50, None)  # a provider of another name: p's
    assert pool.bounds("http://127.0.0.1:8/v1", "ollama") == LimiterBounds(3, None, 900)
    assert pool.bounds("http://elsewhere/v1", "openai") == LimiterBounds(3)  # not configured: max_concurrency
    over = LimiterPool(settings, max_in_flight=20)  # --max-concurrency: over every endpoint's own
    assert over.bounds("http://127.0.0.1:9/v1", "p") == LimiterBounds(20, 50, None)
    assert over.bounds("http://elsewhere/v1") == LimiterBounds(20)
    lim = pool.get("http://127.0.0.1:9/v1", "p")
    assert pool.get("http://127.0.0.1:9/v1", "q") is lim and lim.stats().max_in_flight == 7  # the first use's


def test_models_of_one_endpoint_share_its_limiter(tmp_path):
    settings = Settings.load(home=str(tmp_path))
    pool = LimiterPool(settings)
    model = resolve_model("scripted/x", settings, limiters=pool)
    assert isinstance(model.limiter, RequestLimiter)
    assert model.limiter is resolve_model("scripted/x", settings, limiters=pool).limiter  # one per endpoint
    assert model.limiter is not resolve_model("scripted/x", settings).limiter  # no pool given: one of its own
