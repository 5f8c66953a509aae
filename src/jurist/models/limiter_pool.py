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

A :class:`LimiterPool` belongs to one runtime: one limiter per endpoint and
URL, shared by every model the runtime resolves, and one circuit breaker per
endpoint (:mod:`jurist.models.breaker`; always this process's own, whatever
the limiter URL). Its bounds are fixed when it is built, from the settings
(``max_concurrency``, the providers' ``max_in_flight``, ``requests_per_minute``
and ``tokens_per_minute``, ``limiter_url``, the breaker's threshold and
cool-down) and an optional ``max_in_flight`` over them all (``--max-concurrency``):
resolving a model never changes them, and two runtimes in one process, each
with its own pool, each keep the bounds they were built with.

The gate proxy's generations are user traffic: a model of the provider
:data:`~jurist.config.UPSTREAM_PROVIDER` gets a limiter of its own for its
endpoint (the generations' lane), bounded by a configured provider's
``max_in_flight`` for that ``base_url``, else ``upstream_max_concurrency``
(512), never by the judges' ``max_concurrency``; so judge calls on the same
endpoint, and the evaluations that run after an answer was sent, never queue
in front of the next generations.
"""

from __future__ import annotations

import threading
from types import MappingProxyType
from typing import Mapping
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

from jurist.config import UPSTREAM_PROVIDER, Settings
from jurist.errors import ConfigError
from jurist.models.breaker import CircuitBreaker
from jurist.models.limiter import DEFAULT_IN_FLIGHT, Limiter, LimiterBounds, RequestLimiter, check_in_flight


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
    """The limiters and circuit breakers of one runtime, their bounds fixed when it is built.

    An endpoint's bounds (:meth:`bounds`): those of the provider that names it in
    ``settings.providers``, else those of a configured provider whose ``base_url`` it is,
    else ``max_concurrency`` requests in flight; ``max_in_flight``, when given, is the
    bound in flight of every endpoint. ``get`` opens an endpoint's limiter on first
    use (:func:`open_limiter`) and hands the same one to every later caller: the first
    provider to use an endpoint decides which provider's bounds it has, should two
    configured providers name one ``base_url`` with different bounds. Thread-safe.

    The provider :data:`~jurist.config.UPSTREAM_PROVIDER` (the gate proxy's generations)
    has a lane of its own per endpoint: another limiter, whose bound in flight is the
    ``max_in_flight`` of a configured provider with that ``base_url``, else
    ``upstream_max_concurrency`` (and ``max_in_flight`` over it, when given).
    """

    def __init__(self, settings: Settings | None = None, *, max_in_flight: int | None = None) -> None:
        s = settings if settings is not None else Settings()
        if max_in_flight is not None:
            check_in_flight(max_in_flight)
        self.url = s.limiter_url
        self.breaker_threshold = s.breaker_threshold
        self.breaker_cooldown = s.breaker_cooldown
        self.default = LimiterBounds(max_in_flight or s.max_concurrency)
        self.providers: Mapping[str, LimiterBounds] = MappingProxyType({
            name: LimiterBounds(max_in_flight or ps.max_in_flight or s.max_concurrency,
                                ps.requests_per_minute, ps.tokens_per_minute)
            for name, ps in s.providers.items()})
        self.endpoints: Mapping[str, LimiterBounds] = MappingProxyType({
            ps.base_url.rstrip("/"): self.providers[name]
            for name, ps in reversed(s.providers.items()) if ps.base_url})  # the first provider named wins
        # The generations' lane (UPSTREAM_PROVIDER): user traffic, sized for a proxy.
        self.upstream_default = LimiterBounds(max_in_flight or s.upstream_max_concurrency)
        self.upstreams: Mapping[str, LimiterBounds] = MappingProxyType({
            ps.base_url.rstrip("/"): LimiterBounds(max_in_flight or ps.max_in_flight or s.upstream_max_concurrency,
                                                   ps.requests_per_minute, ps.tokens_per_minute)
            for ps in reversed(s.providers.values()) if ps.base_url})
        self._limiters: dict[tuple[str | None, str], RequestLimiter] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        self._lock = threading.Lock()

    def bounds(self, endpoint: str, provider: str | None = None) -> LimiterBounds:
        """The bounds ``endpoint`` gets (reached through ``provider``, when known; the
        generations' lane for :data:`~jurist.config.UPSTREAM_PROVIDER`)."""
        if provider == UPSTREAM_PROVIDER:
            return self.upstreams.get(endpoint.rstrip("/"), self.upstream_default)
        if provider is not None and provider in self.providers:
            return self.providers[provider]
        return self.endpoints.get(endpoint.rstrip("/"), self.default)

    def get(self, endpoint: str, provider: str | None = None, *, shared: bool = True) -> RequestLimiter:
        """The endpoint's limiter, opened on first use with its :meth:`bounds`; across processes
        through ``limiter_url`` when ``shared`` (an in-process backend keeps its bound here).
        :data:`~jurist.config.UPSTREAM_PROVIDER` gets the endpoint's generations' lane, a limiter
        apart from the judges' (shared across processes under the name ``generations:<endpoint>``)."""
        url = self.url if shared else None
        name = f"generations:{endpoint}" if provider == UPSTREAM_PROVIDER else endpoint
        key = (url or None, name)
        with self._lock:
            lim = self._limiters.get(key)
            if lim is None:
                self._limiters[key] = lim = open_limiter(name, self.bounds(endpoint, provider), url)
            return lim

    def breaker(self, endpoint: str) -> CircuitBreaker:
        """The endpoint's circuit breaker, made on first use with the pool's threshold and cool-down."""
        with self._lock:
            breaker = self._breakers.get(endpoint)
            if breaker is None:
                self._breakers[endpoint] = breaker = CircuitBreaker(endpoint, self.breaker_threshold,
                                                                    self.breaker_cooldown)
            return breaker

    def _forget(self) -> list[RequestLimiter]:
        with self._lock:
            limiters, self._limiters = list(self._limiters.values()), {}
            self._breakers = {}
        return limiters

    async def aclose(self) -> None:
        """Close every limiter of the pool (and forget them and the breakers)."""
        for lim in self._forget():
            await lim.aclose()

    def close(self) -> None:
        """:meth:`aclose` from sync code: an event loop runs only for limiters that hold
        connections (Redis, Ray); this process's own have nothing to give back."""
        held = [lim for lim in self._forget() if not isinstance(lim, Limiter)]
        if held:
            from jurist.sync import run_sync

            async def close_all() -> None:
                for lim in held:
                    await lim.aclose()

            run_sync(close_all())
