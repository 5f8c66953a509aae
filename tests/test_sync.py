"""jurist.sync.gather_bounded: every job run, at most `parallel` at once, results in order."""

import asyncio

import pytest

from jurist.sync import gather_bounded


async def test_results_in_order_with_at_most_parallel_under_way():
    running, peak = 0, 0

    async def job(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01 * (n % 3))
        running -= 1
        return n * n

    assert await gather_bounded(job, range(12), 3) == [n * n for n in range(12)]
    assert peak == 3
    assert await gather_bounded(job, [], 3) == []
    assert await gather_bounded(job, [2], 0) == [4]  # a bound below 1 still runs the jobs, one at a time


async def test_a_failing_job_fails_the_gather():
    async def job(n: int) -> int:
        if n == 2:
            raise ValueError("two")
        return n

    with pytest.raises(ValueError, match="two"):
        await gather_bounded(job, range(4), 2)
