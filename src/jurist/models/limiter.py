"""The one place where concurrency towards a model endpoint is bounded.

One :class:`Limiter` per endpoint, shared by everything in the process
(:func:`limiter_for`): at most ``max_in_flight`` requests at once, and
optionally at most ``requests_per_minute`` requests and ``tokens_per_minute``
estimated tokens in any sliding 60-second window. Capabilities never make
their own semaphores; they go through ``Model``, which goes through here.
"""

from __future__ import annotations

import asyncio
import collections
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator


class Limiter:
    """Bounds requests in flight, requests per minute and tokens per minute."""

    def __init__(
        self,
        max_in_flight: int = 16,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        window: float = 60.0,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.max_in_flight = max_in_flight
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.window = window
        self.in_flight = 0
        self.peak_in_flight = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._requests: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, int]] = collections.deque()

    def configure(
        self,
        max_in_flight: int | None = None,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
    ) -> None:
        """Change the bounds; waiting requests see the new bound at once."""
        if max_in_flight is not None:
            if max_in_flight < 1:
                raise ValueError("max_in_flight must be at least 1")
            self.max_in_flight = max_in_flight
        if requests_per_minute is not None:
            self.requests_per_minute = requests_per_minute
        if tokens_per_minute is not None:
            self.tokens_per_minute = tokens_per_minute
        self._wake()

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one request slot for the duration of the block."""
        await self._acquire()
        try:
            await self._respect_rates(tokens)
            yield
        finally:
            self._release()

    async def _acquire(self) -> None:
        loop = asyncio.get_running_loop()
        while self.in_flight >= self.max_in_flight:
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut in self._waiters:
                    self._waiters.remove(fut)
                elif fut.done() and not fut.cancelled():
                    self._wake()  # pass the wake-up on
                raise
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        free = self.max_in_flight - self.in_flight
        while free > 0 and self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                free -= 1

    async def _respect_rates(self, tokens: int) -> None:
        while True:
            now = time.monotonic()
            horizon = now - self.window
            while self._requests and self._requests[0] <= horizon:
                self._requests.popleft()
            while self._tokens and self._tokens[0][0] <= horizon:
                self._tokens.popleft()
            wait = 0.0
            if self.requests_per_minute and len(self._requests) >= self.requests_per_minute:
                wait = max(wait, self._requests[0] - horizon)
            if self.tokens_per_minute and self._tokens:
                used = sum(t for _, t in self._tokens)
                if used + tokens > self.tokens_per_minute:
                    wait = max(wait, self._tokens[0][0] - horizon)
            if wait <= 0:
                self._requests.append(now)
                if self.tokens_per_minute:
                    self._tokens.append((now, tokens))
                return
            await asyncio.sleep(wait)


_LIMITERS: dict[str, Limiter] = {}


def limiter_for(
    endpoint: str,
    max_in_flight: int | None = None,
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
) -> Limiter:
    """The process-wide limiter of an endpoint, created on first use.

    Bounds passed here update the shared limiter, so the latest explicit
    setting (a ``--max-concurrency`` flag, say) holds for every caller.
    """
    lim = _LIMITERS.get(endpoint)
    if lim is None:
        lim = Limiter(max_in_flight or 16, requests_per_minute, tokens_per_minute)
        _LIMITERS[endpoint] = lim
    else:
        lim.configure(max_in_flight, requests_per_minute, tokens_per_minute)
    return lim
