"""The one place where concurrency towards a model endpoint is bounded.

Every limiter is a :class:`RequestLimiter`: ``async with limiter.slot(tokens)``
around one request, ``stats()`` for monitoring, ``aclose()`` at the end. This
module holds the protocol, :class:`Limiter` (the counts live in this process)
and what the backends share (:class:`RateWindow`, :class:`PermitSlots`);
:mod:`jurist.models.redis_limiter` and :mod:`jurist.models.shared_limiter`
hold the counts in Redis and on a Ray actor. One URL chooses the backend, and a
pool keeps one limiter per endpoint: :mod:`jurist.models.limiter_pool`.

The bounds are at most ``max_in_flight`` requests at once, and optionally at
most ``requests_per_minute`` requests and ``tokens_per_minute`` estimated
tokens in any sliding 60-second window, fixed when the limiter is made (a
runtime's pool makes it from the settings). ``Model`` is given its limiter when
it is built. Capabilities never make their own semaphores.

A limiter may be used from several event loops at once (``jurist.sync.run_sync``
runs a coroutine on a second loop in another thread): the bound holds across
them.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import threading
import time
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Protocol, runtime_checkable



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


@dataclass(frozen=True)
class LimiterStats:
    """A limiter's figures as this process sees them. ``None``: this backend does not
    know or count it (the Ray limiter's bounds live on its actor; only the Redis and
    Ray limiters hold permits; only the local one queues waiters here)."""

    in_flight: int
    peak_in_flight: int
    waiting: int | None = None
    max_in_flight: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    max_held: int | None = None
    held: int | None = None
    actor_calls: int | None = None
    local_handovers: int | None = None


@runtime_checkable
class RequestLimiter(Protocol):
    """What ``Model`` needs from a limiter, whatever holds the counts."""

    def slot(self, tokens: int = 0) -> AbstractAsyncContextManager[None]:
        """Hold one request slot (for a request of ``tokens`` estimated tokens) for the block."""
        ...

    def stats(self) -> LimiterStats:
        """This process's view: requests in flight now, the peak, and the bounds it knows."""
        ...

    async def aclose(self) -> None:
        """Give back whatever is held and close connections."""
        ...


@dataclass(frozen=True)
class LimiterBounds:
    """Bounds of one endpoint; ``None``: no bound per minute (in flight: :data:`DEFAULT_IN_FLIGHT`)."""

    max_in_flight: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None


DEFAULT_IN_FLIGHT = 16


class _Waiter:
    """A request waiting for a slot of a :class:`Limiter`, on its own event loop."""

    __slots__ = ("loop", "fut", "granted")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.fut: asyncio.Future[None] = loop.create_future()
        self.granted = False


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Limiter:
    """Bounds requests in flight, requests per minute and tokens per minute in this process.

    Waiting requests get their slot in arrival order, whichever event loop (and
    thread) they wait on: a freed slot is handed to the next waiter under a
    thread lock and its loop is woken thread-safely.
    """

    def __init__(
        self,
        max_in_flight: int = DEFAULT_IN_FLIGHT,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        window: float = 60.0,
    ) -> None:
        self.max_in_flight = check_in_flight(max_in_flight)
        self.rates = RateWindow(requests_per_minute, tokens_per_minute, window)
        self.in_flight = 0
        self.peak_in_flight = 0
        self._lock = threading.Lock()
        self._waiters: collections.deque[_Waiter] = collections.deque()

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one request slot for the duration of the block."""
        await self._acquire()
        try:
            await self._respect_rates(tokens)
            yield
        finally:
            self._release()

    def stats(self) -> LimiterStats:
        return LimiterStats(in_flight=self.in_flight, peak_in_flight=self.peak_in_flight, waiting=len(self._waiters),
                            max_in_flight=self.max_in_flight, requests_per_minute=self.rates.requests_per_minute,
                            tokens_per_minute=self.rates.tokens_per_minute)

    async def aclose(self) -> None:
        """Nothing to give back: the counts live in this object."""

    async def _acquire(self) -> None:
        with self._lock:
            if self.in_flight < self.max_in_flight:  # a free slot means nobody waits (slots are handed over)
                self._take()
                return
            waiter = _Waiter(asyncio.get_running_loop())
            self._waiters.append(waiter)
        try:
            await waiter.fut
        except asyncio.CancelledError:
            with self._lock:
                if not waiter.granted:
                    self._waiters.remove(waiter)
                    owned = False
                else:  # handed a slot just as the caller gave up: it goes on (unless _wake_one gives it back)
                    owned = waiter.fut.done() and not waiter.fut.cancelled()
            if owned:
                self._release()
            raise

    def _take(self) -> None:
        self.in_flight += 1
        if self.in_flight > self.peak_in_flight:
            self.peak_in_flight = self.in_flight

    def _release(self) -> None:
        with self._lock:
            self.in_flight -= 1
            woken = self._grant()
        self._deliver(woken)

    def _grant(self) -> list[_Waiter]:
        """Hand free slots to waiters in arrival order (call with the lock held)."""
        woken: list[_Waiter] = []
        while self._waiters and self.in_flight < self.max_in_flight:
            waiter = self._waiters.popleft()
            waiter.granted = True
            self._take()
            woken.append(waiter)
        return woken

    def _deliver(self, woken: list[_Waiter]) -> None:
        if not woken:
            return
        here = _running_loop()
        for waiter in woken:
            if waiter.loop is here:
                self._wake_one(waiter)
            else:
                try:
                    waiter.loop.call_soon_threadsafe(self._wake_one, waiter)
                except RuntimeError:  # its loop is closed: nobody will use the slot
                    self._release()

    def _wake_one(self, waiter: _Waiter) -> None:
        """On the waiter's loop: give it its slot, or take the slot back if it gave up."""
        if waiter.fut.cancelled():
            self._release()
        elif not waiter.fut.done():
            waiter.fut.set_result(None)

    async def _respect_rates(self, tokens: int) -> None:
        while True:
            with self._lock:
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
    in flight around them (from any thread)."""

    in_flight = 0
    peak_in_flight = 0
    _count_lock = threading.Lock()  # counts only: held for a few instructions

    @abc.abstractmethod
    async def _acquire(self, tokens: int) -> Any:
        """Wait for a permit for a request of ``tokens`` estimated tokens; return it."""

    @abc.abstractmethod
    async def _release(self, permit: Any) -> None:
        """Give back a permit ``_acquire`` returned."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Give back what is held; close connections."""

    @asynccontextmanager
    async def slot(self, tokens: int = 0) -> AsyncIterator[None]:
        """Hold one request slot for the duration of the block."""
        permit = await self._acquire(tokens)
        with self._count_lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            yield
        finally:
            with self._count_lock:
                self.in_flight -= 1
            await self._release(permit)

    def stats(self) -> LimiterStats:
        return LimiterStats(in_flight=self.in_flight, peak_in_flight=self.peak_in_flight)
