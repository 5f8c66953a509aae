"""The cluster-wide limiter: its counts (LimiterCore) and the per-process client on a real Ray cluster."""

import asyncio
import time

import pytest

from jurist.models.limiter import LimiterStats
from jurist.models.shared_limiter import LimiterCore, SharedLimiter, limiter_actor

ray = pytest.importorskip("ray")




# -- the counts, in process ------------------------------------------------------


async def test_core_grants_up_to_the_bound_and_queues_the_rest():
    core = LimiterCore(3)
    assert await core.acquire("a", [0, 0]) == 2
    assert await core.acquire("b", [0, 0, 0]) == 1  # one left: granted at once, no waiting for all
    waiting = asyncio.ensure_future(core.acquire("b", [0]))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await core.release("a", 1)
    assert await asyncio.wait_for(waiting, 1) == 1
    stats = await core.stats()
    assert stats.in_flight == 3 and stats.peak_in_flight == 3 and stats.held == {"a": 1, "b": 2}


async def test_core_requests_per_window():
    core = LimiterCore(100, requests_per_minute=4, window=0.5)
    start = time.monotonic()
    got = 0
    while got < 10:
        n = await core.acquire("a", [0] * 10)
        await core.release("a", n)
        got += n
    assert time.monotonic() - start >= 1.0  # 10 requests at 4 per 0.5 s need two more windows


async def test_core_tokens_per_window_lets_a_large_request_into_an_empty_window():
    core = LimiterCore(100, tokens_per_minute=100, window=0.4)
    assert await core.acquire("a", [60, 60]) == 1  # the second would pass the budget
    start = time.monotonic()
    assert await core.acquire("a", [60]) == 1
    assert time.monotonic() - start >= 0.3
    await core.release("a", 2)
    await asyncio.sleep(0.45)  # the window empties
    assert await core.acquire("a", [500]) == 1  # larger than the whole budget, alone in the window
    with pytest.raises(asyncio.TimeoutError):  # ...and nothing else until it leaves the window
        await asyncio.wait_for(core.acquire("a", [1]), 0.2)


async def test_core_register_frees_what_a_dead_predecessor_held():
    core = LimiterCore(2)
    assert await core.acquire("worker-1", [0, 0]) == 2
    blocked = asyncio.ensure_future(core.acquire("worker-2", [0]))
    await asyncio.sleep(0.05)
    assert not blocked.done()
    await core.register("worker-1")  # worker-1 restarted: its old permits are free again
    assert await asyncio.wait_for(blocked, 1) == 1
    await core.release("worker-1", 5)  # a late release from the dead process changes nothing
    assert (await core.stats()).in_flight == 1


async def test_core_cancelled_waiter_takes_nothing():
    core = LimiterCore(1)
    await core.acquire("a", [0])
    waiting = asyncio.ensure_future(core.acquire("b", [0]))
    await asyncio.sleep(0.02)
    waiting.cancel()
    await core.release("a", 1)
    assert (await core.stats()).in_flight == 0
    assert await core.acquire("c", [0]) == 1


# -- the client, across processes of a real cluster ------------------------------


@ray.remote
class Gauge:
    """Counts requests inside their slot, across processes."""

    def __init__(self):
        self.now = 0
        self.peak = 0

    def enter(self):
        self.now += 1
        self.peak = max(self.peak, self.now)

    def exit(self):
        self.now -= 1

    def read(self):
        return self.peak


@ray.remote(num_cpus=0.5)
def hammer(limiter, gauge, client_id, requests, concurrency):
    async def go():
        client = SharedLimiter(limiter, client_id)
        todo = iter(range(requests))

        async def one_at_a_time():
            for _ in todo:
                async with client.slot():
                    await gauge.enter.remote()
                    await asyncio.sleep(0.01)
                    await gauge.exit.remote()

        await asyncio.gather(*(one_at_a_time() for _ in range(concurrency)))
        await client.aclose()
        return client.peak_in_flight

    return asyncio.run(go())


def test_in_flight_bound_holds_across_processes(cluster):
    limiter = limiter_actor("test://bound", 5)
    gauge = Gauge.remote()
    peaks = ray.get([hammer.remote(limiter, gauge, f"w{i}", 60, 8) for i in range(3)])
    assert ray.get(gauge.read.remote()) == 5  # reached, never passed
    assert all(p <= 5 for p in peaks)
    stats = ray.get(limiter.stats.remote())
    assert stats.peak_in_flight == 5 and stats.in_flight == 0


def test_a_waiting_process_gets_permits_from_a_busy_one(cluster):
    limiter = limiter_actor("test://fair", 2)

    async def go():
        busy = SharedLimiter(limiter, "busy", lease=0.2)
        other = SharedLimiter(limiter, "other", lease=0.2)
        stop = False

        async def keep_busy():
            while not stop:
                async with busy.slot():
                    await asyncio.sleep(0.01)

        hogs = [asyncio.ensure_future(keep_busy()) for _ in range(4)]
        await asyncio.sleep(0.1)
        start = time.monotonic()
        async with other.slot():
            waited = time.monotonic() - start
        stop = True
        await asyncio.gather(*hogs)
        await busy.aclose()
        await other.aclose()
        return waited, busy.local_handovers

    waited, handovers = asyncio.run(go())
    assert handovers > 0  # the busy process passed permits on without asking the actor
    assert waited < 1.0  # ...but gave them back when their lease ran out


def test_limiter_actor_is_shared_by_name_and_takes_the_latest_bounds(cluster):
    a = limiter_actor("test://named", 4)
    b = limiter_actor("test://named", 7, requests_per_minute=100)
    config = ray.get(a.config.remote())
    assert config.max_in_flight == 7 and config.requests_per_minute == 100
    assert ray.get(b.config.remote()) == config


def test_client_reports_an_unreachable_limiter(cluster):
    from jurist.errors import JuristError

    limiter = limiter_actor("test://gone", 1)

    async def go():
        client = SharedLimiter(limiter, "c")
        await client.start()
        ray.kill(limiter, no_restart=True)
        await asyncio.sleep(0.2)
        async with client.slot():
            pass

    with pytest.raises(JuristError, match="limiter is unreachable"):
        asyncio.run(go())


async def test_core_forget_frees_a_stopped_clients_permits():
    core = LimiterCore(2)
    assert await core.acquire("gone", [0, 0]) == 2
    await core.forget("gone")
    stats = await core.stats()
    assert stats.in_flight == 0 and "gone" not in stats.held


def test_a_process_holds_at_most_its_own_cap(cluster):
    limiter = limiter_actor("test://cap", 10)

    async def go():
        client = SharedLimiter(limiter, "capped", max_held=3)

        async def one():
            async with client.slot():
                await asyncio.sleep(0.02)

        await asyncio.gather(*(one() for _ in range(30)))
        await client.aclose()
        return client.peak_in_flight

    assert asyncio.run(go()) == 3
    stats = ray.get(limiter.stats.remote())
    assert stats.peak_in_flight == 3 and stats.in_flight == 0


def test_waiters_at_the_cap_get_new_permits_when_leases_run_out(cluster):
    limiter = limiter_actor("test://lease", 10)

    async def go():
        # requests outlast the lease: every freed permit goes back to the actor, none is passed on
        client = SharedLimiter(limiter, "capped", max_held=2, lease=0.05)

        async def one():
            async with client.slot():
                await asyncio.sleep(0.1)

        start = time.monotonic()
        await asyncio.wait_for(asyncio.gather(*(one() for _ in range(10))), 10)
        await client.aclose()
        return time.monotonic() - start, client.peak_in_flight

    elapsed, peak = asyncio.run(go())
    assert peak == 2 and elapsed < 2.0  # 10 requests, 2 at a time, 0.1 s each
    assert ray.get(limiter.stats.remote()).in_flight == 0


async def test_core_a_stopped_or_restarted_clients_pending_request_gets_nothing():
    core = LimiterCore(1)
    assert await core.acquire("live", [0]) == 1
    dead_wait = asyncio.ensure_future(core.acquire("stopped", [0]))
    restarted_wait = asyncio.ensure_future(core.acquire("restarted", [0]))
    await asyncio.sleep(0.02)
    await core.forget("stopped")
    await core.register("restarted")  # its new process asks afresh; the old request is void
    assert await asyncio.wait_for(dead_wait, 1) == 0 and await asyncio.wait_for(restarted_wait, 1) == 0
    assert await core.acquire("stopped", [0]) == 0  # a request still on its way from the stopped one
    await core.release("live", 1)
    stats = await core.stats()
    assert stats.in_flight == 0 and stats.held == {"live": 0, "restarted": 0}


# -- a restarted limiter actor -------------------------------------------------------


async def test_core_counts_what_a_client_holds_from_its_first_word_after_a_restart():
    core = LimiterCore(4)  # a restarted actor: empty counts, nobody registered
    await core.release("a", 1, holding=3)  # gives one back (unknown here) and still holds 3
    assert (await core.stats()).held == {"a": 3}
    assert await core.acquire("b", [0, 0, 0], holding=0) == 1  # 3 of the 4 are a's
    await core.release("a", 1, holding=99)  # later words are counted as usual, not taken as a report
    stats = await core.stats()
    assert stats.in_flight == 3 and stats.held == {"a": 2, "b": 1}


async def test_core_a_registered_client_is_never_taken_by_its_report():
    core = LimiterCore(4)
    await core.register("a")
    assert await core.acquire("a", [0], holding=5) == 1  # a fresh client's count starts at its register
    assert (await core.stats()).in_flight == 1


async def test_core_grants_nothing_while_paused():
    core = LimiterCore(4)
    core.pause(0.3)
    start = time.monotonic()
    assert await asyncio.wait_for(core.acquire("a", [0, 0]), 2) == 2
    assert time.monotonic() - start >= 0.25


def test_the_bound_holds_when_the_limiter_actor_is_restarted(cluster):
    from jurist.models.shared_limiter import RESTART_GRACE

    limiter = limiter_actor("test://restart", 4)

    async def go():
        meter = {"now": 0, "peak": 0, "after_restart": 0}
        # the first process keeps its permits, passing them on to its own requests (a long lease):
        # only its reports tell the restarted actor that it holds them
        first = SharedLimiter(limiter, "first", lease=30)
        second = SharedLimiter(limiter, "second", lease=0.2)
        stop = asyncio.Event()

        async def keep_busy(client):
            while not stop.is_set():
                async with client.slot():
                    meter["now"] += 1
                    meter["peak"] = max(meter["peak"], meter["now"])
                    await asyncio.sleep(0.02)
                    meter["now"] -= 1

        busy = [asyncio.ensure_future(keep_busy(first)) for _ in range(6)]
        await asyncio.sleep(0.3)
        await asyncio.to_thread(ray.kill, limiter, no_restart=False)  # its process dies; Ray starts a new one
        await second.start()  # a worker starting now registers with the restarted actor
        busy += [asyncio.ensure_future(keep_busy(second)) for _ in range(6)]
        await asyncio.sleep(RESTART_GRACE + 1.5)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*busy), 10)  # no request failed
        await first.aclose()
        await second.aclose()
        return meter, first.peak_in_flight, second.peak_in_flight

    meter, first_peak, second_peak = asyncio.run(go())
    assert meter["peak"] == 4 and meter["now"] == 0  # never more than the bound, before or after the restart
    assert first_peak > 0 and second_peak > 0
    stats = ray.get(limiter.stats.remote())
    assert stats.in_flight == 0 and stats.peak_in_flight <= 4


def test_client_stats_are_a_record_without_the_bounds_its_actor_holds():
    client = SharedLimiter(None, "c", max_held=2)
    client.held, client.actor_calls, client.local_handovers = 1, 3, 2
    assert client.stats() == LimiterStats(in_flight=0, peak_in_flight=0, max_held=2, held=1, actor_calls=3,
                                          local_handovers=2)
