"""The one place where concurrency towards a model endpoint is bounded.

One :class:`Limiter` per endpoint, shared by everything in the process
(:func:`limiter_for`): at most ``max_in_flight`` requests at once, and
optionally at most ``requests_per_minute`` requests and ``tokens_per_minute``
estimated tokens in any sliding 60-second window. Capabilities never make
their own semaphores; they go through ``Model``, which goes through here.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator


def check_in_flight(max_in_flight: int) -> int:
    if max_in_flight < 1:
        raise ValueError("max_in_flight must be at least 1")
    return max_in_flight


class RateWindow:
    """Requests and estimated tokens started in the last ``window`` seconds, against
    optional per-minute bounds. Shared by :class:`Limiter` and the cluster-wide
    limiter (``shared_limiter.LimiterCore``)."""

    def __init__(self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None,
                 window: float = 60.0) -> None:
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.window = window
        self._requests: collections.deque[float] = collections.deque()
        self._tokens: collections.deque[tuple[float, int]] = collections.deque()

    def configure(self, requests_per_minute: int | None = None, tokens_per_minute: int | None = None) -> None:
        if requests_per_minute is not None:
            self.requests_per_minute = requests_per_minute
        if tokens_per_minute is not None:
            self.tokens_per_minute = tokens_per_minute

    def room(self, tokens: list[int], now: float) -> tuple[int, float]:
        """How many of the requests (their estimated ``tokens``, in order) may start at
        ``now``, and, when none may, how long until one may."""
        horizon = now - self.window
        while self._requests and self._requests[0] <= horizon:
            self._requests.popleft()
        while self._tokens and self._tokens[0][0] <= horizon:
            self._tokens.popleft()
        room = len(tokens)
        if self.requests_per_minute:
            free = self.requests_per_minute - len(self._requests)
            if free <= 0:
                return 0, self._requests[0] - horizon
            room = min(room, free)
        if self.tokens_per_minute:
            used = sum(t for _, t in self._tokens)
            n = 0
            for t in tokens[:room]:
                # a request larger than the whole budget may start when the window is empty
                if used + t > self.tokens_per_minute and (self._tokens or n > 0):
                    break
                used += t
                n += 1
            if n == 0:
                return 0, max(self._tokens[0][0] - horizon if self._tokens else 0.0, 0.001)
            room = n
        return room, 0.0

    def record(self, tokens: list[int], now: float) -> None:
        """Count requests (with their estimated tokens) as started at ``now``."""
        for t in tokens:
            if self.requests_per_minute:
                self._requests.append(now)
            if self.tokens_per_minute:
                self._tokens.append((now, t))


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
        self.max_in_flight = check_in_flight(max_in_flight)
        self.rates = RateWindow(requests_per_minute, tokens_per_minute, window)
        self.in_flight = 0
        self.peak_in_flight = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def configure(
        self,
        max_in_flight: int | None = None,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
    ) -> None:
        """Change the bounds; waiting requests see the new bound at once."""
        if max_in_flight is not None:
            self.max_in_flight = check_in_flight(max_in_flight)
        self.rates.configure(requests_per_minute, tokens_per_minute)
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
            n, wait = self.rates.room([tokens], now)
            if n:
                self.rates.record([tokens], now)
                return
            await asyncio.sleep(wait)


class PermitSlots(abc.ABC):
    """``slot()`` for a limiter that hands out permits from elsewhere (the Ray
    limiter actor, Redis): a subclass's ``_acquire(tokens)`` returns a permit,
    its ``_release(permit)`` gives it back; this counts the process's requests
    in flight around them."""

    in_flight = 0
    peak_in_flight = 0

    @abc.abstractmethod
    async def _acquire(self, tokens: int) -> Any:
        """Wait for a permit for a request of ``tokens`` estimated tokens; return it."""

    @abc.abstractmethod
    async def _release(self, permit: Any) -> None:
        """Give back a permit ``_acquire`` returned."""

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one request slot for the duration of the block."""
        permit = await self._acquire(tokens)
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1
            await self._release(permit)


_LIMITERS: dict[tuple[str | None, str], Any] = {}


def limiter_for(
    endpoint: str,
    max_in_flight: int | None = None,
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
    *,
    url: str | None = None,
) -> Any:
    """The process-wide limiter of an endpoint, created on first use: a
    :class:`Limiter`, or with ``url`` (``redis://...``, the ``limiter_url``
    setting) a :class:`~jurist.models.redis_limiter.RedisLimiter` whose counts
    live in that Redis, shared by every process that uses it.

    Bounds passed here update the shared limiter, so the latest explicit
    setting (a ``--max-concurrency`` flag, say) holds for every caller.
    """
    lim = _LIMITERS.get((url, endpoint))
    if lim is None:
        if url:
            from jurist.models.redis_limiter import RedisLimiter

            lim = RedisLimiter(url, endpoint, max_in_flight or 16, requests_per_minute, tokens_per_minute)
        else:
            lim = Limiter(max_in_flight or 16, requests_per_minute, tokens_per_minute)
        _LIMITERS[(url, endpoint)] = lim
    else:
        lim.configure(max_in_flight, requests_per_minute, tokens_per_minute)
    return lim
