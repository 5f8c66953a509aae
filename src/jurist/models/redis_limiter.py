"""An endpoint limiter whose counts live in Redis, for bounds shared by many processes.

:class:`~jurist.models.limiter.Limiter` bounds one process and the Ray
engine's limiter actor one Ray job. With ``limiter_url: redis://...`` in
``jurist.yaml`` (or ``JURIST_LIMITER_URL``), every process that points at the
same Redis (batch drivers, Ray workers of any job, servers) shares one bound
per endpoint (:func:`~jurist.models.limiter_pool.open_limiter` with a ``redis://``
URL): a :class:`~jurist.models.limiter.RequestLimiter` like the others, so
``Model`` uses it unchanged and concurrency is still bounded in one place.

How it holds:

* The permits in use are a sorted set per endpoint (member: permit id,
  score: when its lease ends). One Lua script, run by Redis atomically, drops
  leases that ended, checks the bounds and adds the new permit, so two
  processes can never both take the last one. Time is Redis's own clock.
* Requests and estimated tokens started in the last window are a second
  sorted set; with ``requests_per_minute`` or ``tokens_per_minute`` the same
  script checks and records them.
* A permit is a short lease (``DEFAULT_LEASE``, 10 s; ``?lease=S`` in the
  URL). A process renews the leases of the permits it holds from a
  background task (every third of the lease), so a long request keeps its
  permit; a process that dies (even by ``kill -9``) stops renewing and its
  permits come back within one lease.
* Waiting requests of one process ask Redis one at a time, in arrival order,
  and poll with a short backoff (2 ms growing to 50 ms) or sleep until the
  rate window has room.
* ``max_held`` optionally caps the permits one process holds at once (a Ray
  worker's ``worker_concurrency``, or ``?max_held=N`` in the URL); requests
  over it wait in the process without asking Redis.
* Each event loop that takes slots (a second one driven by ``run_sync`` in
  another thread, say) has its own Redis connection and renewal task; the
  counts are Redis's, so the bound holds across loops.

``redis`` (redis-py) is an optional extra: ``pip install "jurist[redis]"``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

from jurist.errors import ConfigError, JuristError
from jurist.models.limiter import Limiter, LimiterStats, PermitSlots, RateWindow, check_in_flight

KEY_PREFIX = "jurist:limiter:"
DEFAULT_LEASE = 10.0  # seconds a permit stays taken without renewal (a killed process's permits come back within it)
_POLL_FIRST, _POLL_MAX = 0.002, 0.05

# KEYS: permits, starts. ARGV: permit id, lease ms, max in flight, rpm, tpm, tokens, window ms.
# Returns {1, 0} when granted, else {0, ms to wait} (0: until a permit is released).
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return {0, 0}
end
local rpm, tpm, tokens, window = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
if rpm > 0 or tpm > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  local started = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local count = #started / 2
  if count > 0 then
    local oldest = tonumber(started[2])
    if rpm > 0 and count >= rpm then
      return {0, oldest + window - now}
    end
    if tpm > 0 then
      local used = 0
      for i = 1, #started, 2 do
        used = used + tonumber(string.match(started[i], ':(%d+)$'))
      end
      if used + tokens > tpm then
        return {0, oldest + window - now}
      end
    end
  end
  redis.call('ZADD', KEYS[2], now, ARGV[1] .. ':' .. tokens)
  redis.call('PEXPIRE', KEYS[2], window + 1000)
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return {1, 0}
"""

# KEYS: permits. ARGV: lease ms, permit ids... Pushes the leases of held permits forward.
_RENEW = """
local t = redis.call('TIME')
local until_ = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', until_, ARGV[i])
end
return 0
"""


def import_redis() -> Any:
    """``redis.asyncio``, or a ConfigError that says how to install it."""
    try:
        import redis.asyncio as redis_asyncio
    except ImportError:
        raise ConfigError('limiter_url needs the Redis client: pip install "jurist[redis]"') from None
    return redis_asyncio


@dataclass
class _LoopState:
    """What one event loop uses to talk to Redis: its client, scripts, held permits."""

    client: Any
    acquire: Any
    renew: Any
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    held: set[str] = field(default_factory=set)
    renewer: asyncio.Task[None] | None = None


class RedisLimiter(PermitSlots):
    """``async with limiter.slot(tokens)``: one request slot, bounded across every
    process that uses the same Redis and endpoint.

    Each event loop that takes a slot gets its own Redis client. ``max_held``
    caps this process's permits, across its loops.
    """

    def __init__(
        self,
        url: str,
        endpoint: str,
        max_in_flight: int = 16,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        *,
        window: float = 60.0,
        lease: float = DEFAULT_LEASE,
        max_held: int | None = None,
    ) -> None:
        if lease <= 0:
            raise ValueError("lease must be positive")
        if max_held is not None and max_held < 1:
            raise ValueError("max_held must be at least 1")
        self.max_held = max_held
        self.url = url
        self.endpoint = endpoint
        self.max_in_flight = check_in_flight(max_in_flight)
        self.rates = RateWindow(requests_per_minute, tokens_per_minute, window)  # the bounds; counts live in Redis
        self.lease = lease
        self.in_flight = 0  # this process's requests in flight
        self.peak_in_flight = 0
        self.permits_key = f"{KEY_PREFIX}{endpoint}:permits"
        self.starts_key = f"{KEY_PREFIX}{endpoint}:starts"
        self._redis_asyncio = import_redis()
        self._room = Limiter(max_held) if max_held else None  # this process's cap, across its loops
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = weakref.WeakKeyDictionary()
        self._loops_lock = threading.Lock()

    def configure(self, max_in_flight: int | None = None, requests_per_minute: int | None = None,
                  tokens_per_minute: int | None = None) -> None:
        """Change the bounds (this process's view; every process should configure the same)."""
        if max_in_flight is not None:
            self.max_in_flight = check_in_flight(max_in_flight)
        self.rates.configure(requests_per_minute, tokens_per_minute)

    def stats(self) -> LimiterStats:
        r = self.rates
        return dataclasses.replace(super().stats(), max_in_flight=self.max_in_flight,
                                   requests_per_minute=r.requests_per_minute, tokens_per_minute=r.tokens_per_minute,
                                   max_held=self.max_held)

    def _state(self) -> _LoopState:
        """The running loop's client and scripts, made on its first slot."""
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            client = self._redis_asyncio.from_url(self.url)
            state = _LoopState(client, client.register_script(_ACQUIRE), client.register_script(_RENEW))
            with self._loops_lock:
                self._loops[loop] = state
        return state

    @property
    def _held(self) -> set[str]:
        """The permits the running loop holds (tests stop a "dead" holder's renewals through it)."""
        return self._state().held

    async def _acquire(self, tokens: int) -> str:
        state = self._state()
        permit = uuid.uuid4().hex
        r = self.rates
        args = [permit, int(self.lease * 1000), self.max_in_flight, r.requests_per_minute or 0,
                r.tokens_per_minute or 0, max(0, int(tokens)), int(r.window * 1000)]
        room = self._room
        if room is not None:
            await room._acquire()
        try:
            async with state.turn:  # one request of this loop asks at a time, in arrival order
                pause = _POLL_FIRST
                while True:
                    args[2] = self.max_in_flight
                    granted, wait_ms = await self._redis(state.acquire, [self.permits_key, self.starts_key], args)
                    if int(granted):
                        break
                    if int(wait_ms) > 0:
                        await asyncio.sleep(int(wait_ms) / 1000)
                    else:
                        await asyncio.sleep(pause)
                        pause = min(pause * 2, _POLL_MAX)
        except BaseException:
            if room is not None:
                room._release()
            raise
        state.held.add(permit)
        if state.renewer is None or state.renewer.done():
            state.renewer = asyncio.create_task(self._renew(state))
        return permit

    async def _release(self, permit: str) -> None:
        state = self._state()
        state.held.discard(permit)
        if self._room is not None:
            self._room._release()
        try:
            await asyncio.shield(state.client.zrem(self.permits_key, permit))
        except Exception:  # Redis gone: the lease ends by itself
            pass

    async def _renew(self, state: _LoopState) -> None:
        """Push forward the leases of this loop's permits while it holds any."""
        while state.held:
            await asyncio.sleep(self.lease / 3)
            if state.held:
                try:
                    await state.renew(keys=[self.permits_key], args=[int(self.lease * 1000), *sorted(state.held)])
                except Exception:  # tried again at the next turn; the lease covers two misses
                    pass

    async def _redis(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return await script(keys=keys, args=args)
        except Exception as exc:
            raise JuristError(
                f"the shared limiter at {self.url} is unreachable ({type(exc).__name__}: {exc}); "
                "check that Redis is running, or remove limiter_url to limit each process on its own"
            ) from exc

    async def aclose(self) -> None:
        """Close the running loop's Redis connection (the leases of permits still held end by themselves)."""
        loop = asyncio.get_running_loop()
        with self._loops_lock:
            state = self._loops.pop(loop, None)
        if state is not None:
            if state.renewer is not None:
                state.renewer.cancel()
            await state.client.aclose()
