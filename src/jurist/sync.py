"""Running coroutines: from synchronous code (also inside a running event loop), and a list of
jobs a few at a time."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Coroutine, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code.

    Outside an event loop this is ``asyncio.run``. Inside one (Jupyter, a
    FastAPI handler, pytest-asyncio) the coroutine runs on a fresh loop in a
    worker thread, so there is no "event loop is already running" error.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="jurist-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


async def gather_bounded(fn: Callable[[T], Awaitable[R]], items: Iterable[T], parallel: int) -> list[R]:
    """``fn(item)`` for every item, at most ``parallel`` running at once; the results in the
    items' order. This bounds how many jobs (sessions, pairs, items) are under way; the model
    calls they make wait for their endpoint's limiter as every call does."""
    limit = asyncio.Semaphore(max(1, parallel))

    async def one(item: T) -> R:
        async with limit:
            return await fn(item)

    return list(await asyncio.gather(*(one(item) for item in items)))
