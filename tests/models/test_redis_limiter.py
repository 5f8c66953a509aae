"""The Redis-backed limiter against the machine's Redis: bounds shared by separate clients."""

from __future__ import annotations

import asyncio
import time

import pytest

from jurist.config import Settings
from jurist.errors import JuristError
from jurist.models.limiter import Limiter, LimiterStats
from jurist.models.limiter_pool import LimiterPool
from jurist.models.redis_limiter import RedisLimiter
from jurist.models.registry import resolve_model


class Meter:
    """Counts requests inside their slot across every limiter of a test."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.starts: list[float] = []

    async def request(self, limiter: RedisLimiter, hold: float, tokens: int = 0) -> None:
        async with limiter.slot(tokens):
            self.starts.append(time.monotonic())
            self.now += 1
            self.peak = max(self.peak, self.now)
            await asyncio.sleep(hold)
            self.now -= 1


async def test_the_in_flight_bound_holds_across_separate_clients(redis_url):
    # Two limiters with their own Redis connections stand for two processes.
    a = RedisLimiter(redis_url, "e1", max_in_flight=3)
    b = RedisLimiter(redis_url, "e1", max_in_flight=3)
    meter = Meter()
    try:
        await asyncio.gather(*(meter.request(lim, 0.05) for lim in [a, b] * 8))
    finally:
        await a.aclose()
        await b.aclose()
    assert meter.peak == 3 and meter.now == 0  # reached, never passed
    assert a.peak_in_flight >= 1 and b.peak_in_flight >= 1 and a.in_flight == b.in_flight == 0


async def test_max_held_caps_one_process_below_the_shared_bound(redis_url):
    capped = RedisLimiter(redis_url, "e1", max_in_flight=4, max_held=1)
    other = RedisLimiter(redis_url, "e1", max_in_flight=4)
    meter = Meter()
    try:
        await asyncio.gather(*(meter.request(capped, 0.05) for _ in range(6)),
                             *(meter.request(other, 0.05) for _ in range(6)))
    finally:
        await capped.aclose()
        await other.aclose()
    assert capped.peak_in_flight == 1  # the capped process never held two
    assert other.peak_in_flight >= 2 and meter.peak <= 4 and meter.now == 0
    # its figures, as a record: the bounds it knows; what only other backends count stays None
    assert capped.stats() == LimiterStats(in_flight=0, peak_in_flight=1, max_in_flight=4, max_held=1)


async def test_a_cancelled_wait_gives_back_its_room(redis_url):
    a = RedisLimiter(redis_url, "e1", max_in_flight=1, max_held=1)
    try:
        async with a.slot():
            waiter = asyncio.create_task(Meter().request(a, 0))
            await asyncio.sleep(0.05)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        await asyncio.wait_for(Meter().request(a, 0), 2)  # the room came back: no deadlock
    finally:
        await a.aclose()


async def test_endpoints_are_bounded_apart(redis_url):
    a = RedisLimiter(redis_url, "e1", max_in_flight=1)
    b = RedisLimiter(redis_url, "e2", max_in_flight=1)
    meter = Meter()
    try:
        await asyncio.gather(meter.request(a, 0.2), meter.request(b, 0.2))
    finally:
        await a.aclose()
        await b.aclose()
    assert meter.peak == 2


async def test_a_dead_holders_permit_comes_back_when_its_lease_ends(redis_url):
    dead = RedisLimiter(redis_url, "e1", max_in_flight=1, lease=0.6)
    await dead._acquire(0)  # taken and never released: its process "died"
    dead._held.clear()  # and stopped renewing
    alive = RedisLimiter(redis_url, "e1", max_in_flight=1)
    started = time.monotonic()
    try:
        async with alive.slot():
            waited = time.monotonic() - started
    finally:
        await dead.aclose()
        await alive.aclose()
    assert 0.3 < waited < 3


async def test_a_held_permit_is_renewed_past_its_lease(redis_url):
    holder = RedisLimiter(redis_url, "e1", max_in_flight=1, lease=0.3)
    other = RedisLimiter(redis_url, "e1", max_in_flight=1, lease=0.3)
    meter = Meter()
    try:
        await asyncio.gather(meter.request(holder, 1.0), meter.request(other, 0.01))
    finally:
        await holder.aclose()
        await other.aclose()
    assert meter.peak == 1  # the long request kept its permit for three leases


async def test_requests_per_window_are_shared(redis_url):
    a = RedisLimiter(redis_url, "e1", max_in_flight=50, requests_per_minute=4, window=0.5)
    b = RedisLimiter(redis_url, "e1", max_in_flight=50, requests_per_minute=4, window=0.5)
    meter = Meter()
    started = time.monotonic()
    try:
        await asyncio.gather(*(meter.request(lim, 0) for lim in [a, b] * 4))
    finally:
        await a.aclose()
        await b.aclose()
    assert time.monotonic() - started >= 0.45
    first = sorted(meter.starts)
    assert first[4] - first[0] >= 0.45  # the fifth start waited for the window


async def test_tokens_per_window_are_shared(redis_url):
    a = RedisLimiter(redis_url, "e1", max_in_flight=50, tokens_per_minute=100, window=0.5)
    meter = Meter()
    try:
        await asyncio.gather(meter.request(a, 0, tokens=60), meter.request(a, 0, tokens=60))
    finally:
        await a.aclose()
    assert meter.starts[1] - meter.starts[0] >= 0.45


async def test_an_unreachable_redis_is_a_clear_error():
    lim = RedisLimiter("redis://127.0.0.1:1/0", "e1")
    try:
        with pytest.raises(JuristError, match="unreachable.*limiter_url"):
            async with lim.slot():
                pass
    finally:
        await lim.aclose()


def test_a_limiter_url_sets_the_lease(redis_url):
    from jurist.errors import ConfigError
    from jurist.models.limiter_pool import open_limiter
    from jurist.models.redis_limiter import DEFAULT_LEASE

    assert open_limiter("e", url=redis_url).lease == DEFAULT_LEASE == 10
    lim = open_limiter("e", url=f"{redis_url}?lease=2.5&max_held=3")
    assert isinstance(lim, RedisLimiter) and lim.lease == 2.5 and lim.max_held == 3 and lim.url == redis_url
    for bad in ("0", "-1", "soon", "nan"):
        with pytest.raises(ConfigError, match="lease must be a number of seconds"):
            open_limiter("e", url=f"{redis_url}?lease={bad}")


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError):
        RedisLimiter("redis://127.0.0.1:6379/15", "e", max_in_flight=0)
    with pytest.raises(ValueError):
        RedisLimiter("redis://127.0.0.1:6379/15", "e", lease=0)
    with pytest.raises(ValueError):
        RedisLimiter("redis://127.0.0.1:6379/15", "e", max_held=0)


def test_limiter_url_gives_models_the_redis_limiter(redis_url, tmp_path):
    settings = Settings.load(home=str(tmp_path), limiter_url=redis_url,
                             providers={"p": {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "k",
                                              "max_in_flight": 7, "requests_per_minute": 100}})
    pool = LimiterPool(settings)
    model = resolve_model("p/m", settings, limiters=pool)
    assert isinstance(model.limiter, RedisLimiter)
    assert model.limiter is pool.get(model.endpoint, "p")  # one per endpoint in the pool
    assert (model.limiter.max_in_flight, model.limiter.rates.requests_per_minute) == (7, 100)
    assert isinstance(resolve_model("scripted/x", settings, limiters=pool).limiter, Limiter)  # in-process: local


HOLDER = """
import asyncio, sys
from jurist.models.redis_limiter import RedisLimiter

async def main():
    lim = RedisLimiter(sys.argv[1], "e1", max_in_flight=2)  # the default lease
    await lim._acquire(0)
    await lim._acquire(0)
    print("held", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_the_permits_of_a_killed_process_come_back_within_seconds(redis_url):
    import os
    import signal
    import subprocess
    import sys

    from jurist.models.redis_limiter import DEFAULT_LEASE

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, redis_url], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    alive = RedisLimiter(redis_url, "e1", max_in_flight=2)
    try:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            with pytest.raises(TimeoutError):  # the holder has both permits: none for another process now
                async with asyncio.timeout(0.5):
                    async with alive.slot():
                        pass
        finally:
            holder.send_signal(signal.SIGKILL)  # no cleanup: its permits stay in Redis until their leases end
            holder.wait()
        started = time.monotonic()
        async with asyncio.timeout(15):  # with the old 120 s lease, this gave up
            async with alive.slot():
                waited = time.monotonic() - started
    finally:
        await alive.aclose()
    # back when the killed holder's leases ended (how long after the kill depends on when it last renewed
    # them, and on how long the machine took to get here): seconds, not the old 120 s
    assert waited < DEFAULT_LEASE + 1
