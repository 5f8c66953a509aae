"""Which limiter an endpoint gets: the backend by URL, one per endpoint and URL.

One URL chooses the backend (:func:`open_limiter`):

* ``memory://`` (the default): a :class:`~jurist.models.limiter.Limiter` whose
  counts live in this process;
* ``redis://host:port/db``: a :class:`~jurist.models.redis_limiter.RedisLimiter`
  whose counts live in that Redis, shared by every process that uses it;
* ``ray://`` or ``ray://<job id>``: a
  :class:`~jurist.models.shared_limiter.SharedLimiter` on the limiter actor of
  that Ray job (of this process's job when none is named), shared by every
  process of the job.

Any of them takes ``?max_held=N``: this process holds at most ``N`` of the
endpoint's requests in flight (its share of a shared bound). A ``redis://``
URL also takes ``?lease=S``: seconds a permit stays taken without renewal
(default 10; a killed process's permits come back within that).

A :class:`LimiterPool` keeps one limiter per endpoint and URL, so everything
that uses it shares the bound, and one circuit breaker per endpoint
(:mod:`jurist.models.breaker`; always this process's own, whatever the limiter
URL); :func:`limiter_for` and :func:`breaker_for` use the process's own pool
unless given one.
"""

from __future__ import annotations

import threading
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

from jurist.errors import ConfigError
from jurist.models.breaker import DEFAULT_COOLDOWN, DEFAULT_THRESHOLD, CircuitBreaker
from jurist.models.limiter import DEFAULT_IN_FLIGHT, Limiter, LimiterBounds, RequestLimiter


def _max_held(query: str, url: str) -> int | None:
    """``max_held`` from a limiter URL's query (the only parameter jurist reads there)."""
    values = parse_qs(query).get("max_held")
    if not values:
        return None
    try:
        n = int(values[-1])
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"limiter URL {url!r}: max_held must be a whole number of at least 1")
    return n


def _lease(query: str, url: str) -> float | None:
    """``lease`` from a Redis limiter URL's query: seconds, more than 0."""
    values = parse_qs(query).get("lease")
    if not values:
        return None
    try:
        seconds = float(values[-1])
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigError(f"limiter URL {url!r}: lease must be a number of seconds above 0")
    return seconds


def with_max_held(url: str, max_held: int) -> str:
    """``url`` with ``max_held`` set in its query (this process's share of the bound)."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "max_held"] + [("max_held", str(max_held))]
    return urlunsplit(parts._replace(query=urlencode(query)))


def open_limiter(endpoint: str, bounds: LimiterBounds = LimiterBounds(), url: str | None = None) -> RequestLimiter:
    """A new limiter for ``endpoint``, of the backend ``url`` names (``memory://`` when none)."""
    parts = urlsplit(url or "memory://")
    max_in_flight = bounds.max_in_flight or DEFAULT_IN_FLIGHT
    rpm, tpm = bounds.requests_per_minute, bounds.tokens_per_minute
    max_held = _max_held(parts.query, url or "")
    if parts.scheme == "memory":
        return Limiter(min(max_in_flight, max_held or max_in_flight), rpm, tpm)
    if parts.scheme in ("redis", "rediss", "unix"):
        from jurist.models.redis_limiter import DEFAULT_LEASE, RedisLimiter

        lease = _lease(parts.query, url or "")
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k not in ("max_held", "lease")])
        return RedisLimiter(urlunsplit(parts._replace(query=query)), endpoint, max_in_flight, rpm, tpm,
                            max_held=max_held, lease=lease or DEFAULT_LEASE)
    if parts.scheme == "ray":
        from jurist.models.shared_limiter import open_shared_limiter

        return open_shared_limiter(parts.netloc or None, endpoint, max_in_flight, rpm, tpm, max_held=max_held)
    raise ConfigError(f"limiter URL {url!r}: use memory://, redis://host:port/db or ray:// (ray://<job id>)")


class LimiterPool:
    """One limiter per endpoint and limiter URL, shared by everything that uses the pool.

    ``get`` opens the limiter on first use (:func:`open_limiter`); later calls
    return the same one, and bounds they pass update it, so the latest explicit
    setting (a ``--max-concurrency`` flag, say) holds for every caller.
    Thread-safe.
    """

    def __init__(self) -> None:
        self._limiters: dict[tuple[str | None, str], RequestLimiter] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        self._lock = threading.Lock()

    def get(self, endpoint: str, bounds: LimiterBounds = LimiterBounds(), url: str | None = None) -> RequestLimiter:
        key = (url or None, endpoint)
        with self._lock:
            lim = self._limiters.get(key)
            if lim is None:
                self._limiters[key] = lim = open_limiter(endpoint, bounds, url)
                return lim
        configure = getattr(lim, "configure", None)
        if configure is not None:
            configure(bounds.max_in_flight, bounds.requests_per_minute, bounds.tokens_per_minute)
        return lim

    def breaker(self, endpoint: str, threshold: int | None = None, cooldown: float | None = None) -> CircuitBreaker:
        """The endpoint's circuit breaker, made on first use; like :meth:`get`, later
        calls that pass ``threshold`` or ``cooldown`` update it."""
        with self._lock:
            breaker = self._breakers.get(endpoint)
            if breaker is None:
                self._breakers[endpoint] = breaker = CircuitBreaker(
                    endpoint, DEFAULT_THRESHOLD if threshold is None else threshold,
                    DEFAULT_COOLDOWN if cooldown is None else cooldown)
                return breaker
        breaker.configure(threshold, cooldown)
        return breaker

    async def aclose(self) -> None:
        """Close every limiter of the pool (and forget them and the breakers)."""
        with self._lock:
            limiters, self._limiters = list(self._limiters.values()), {}
            self._breakers = {}
        for lim in limiters:
            await lim.aclose()


_PROCESS_POOL = LimiterPool()


def limiter_for(
    endpoint: str,
    max_in_flight: int | None = None,
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
    *,
    url: str | None = None,
    pool: LimiterPool | None = None,
) -> RequestLimiter:
    """The limiter of an endpoint in ``pool`` (:meth:`LimiterPool.get`), created on
    first use. Without a pool, the process's own pool: one limiter per endpoint
    and URL for every caller in the process."""
    bounds = LimiterBounds(max_in_flight, requests_per_minute, tokens_per_minute)
    return (pool or _PROCESS_POOL).get(endpoint, bounds, url)


def breaker_for(endpoint: str, threshold: int | None = None, cooldown: float | None = None, *,
                pool: LimiterPool | None = None) -> CircuitBreaker:
    """The circuit breaker of an endpoint in ``pool`` (:meth:`LimiterPool.breaker`);
    without a pool, the process's own: one breaker per endpoint for every caller."""
    return (pool or _PROCESS_POOL).breaker(endpoint, threshold, cooldown)
