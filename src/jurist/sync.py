"""Synchronous conveniences that also work inside a running event loop."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


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
