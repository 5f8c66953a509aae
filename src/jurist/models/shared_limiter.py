"""One endpoint limiter for a whole Ray cluster.

:class:`Limiter` bounds one process. On a cluster every worker process needs
the same bounds to hold across all of them, so the counts live in one Ray
actor per endpoint (:class:`LimiterCore`, wrapped by :func:`limiter_actor`)
and every worker talks to it through a :class:`SharedLimiter`, a
:class:`~jurist.models.limiter.RequestLimiter` like the others, so ``Model``
uses it unchanged and concurrency is still bounded in one place. The limiter
URL ``ray://<job id>`` (or ``ray://`` for this process's job) names the job's
actors: :func:`open_shared_limiter`, through
:func:`~jurist.models.limiter_pool.open_limiter`.

How permits move:

* A request asks its process's :class:`SharedLimiter` for a slot. Requests
  waiting in one process go to the actor together, in one call that asks for
  as many permits as there are waiters; the actor grants what the bounds
  allow (first come, first served across processes) and counts them as held
  by that process.
* When a request ends and another one in the same process is waiting, the
  permit passes to it directly, with no call to the actor, unless the permit
  is older than its lease (a second by default): then it goes back to the
  actor, so processes that wait get their turn. Permits nobody waits for go
  back at once, in batches. The cluster-wide in-flight bound holds at every
  moment: a process can only use permits the actor counts as held by it.
* With requests or tokens per minute configured, every request start is
  counted by the actor in its sliding window, so permits are not passed on
  locally.
* A process registers under a client id when it starts. A restarted worker
  registers under its old id, and whatever its dead predecessor held is
  freed.
* Every call a process makes says how many permits it holds, and a process
  that holds any says so at least every ``RESTART_GRACE / 2`` seconds. If
  the actor's own process dies, Ray restarts it (and retries the calls that
  were on their way) with empty counts; the restarted actor grants nothing
  for ``RESTART_GRACE`` seconds while the processes tell it what they still
  hold, so the bound keeps holding.
* The event loop that starts the client (a Ray worker's) batches and passes
  permits on as above. A request from another event loop (a second one that
  ``run_sync`` drives in another thread) asks the actor for its own permit
  and gives it back directly; it counts towards ``held`` and ``max_held``.

Ray is imported only when an actor is created (:func:`limiter_actor`).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from jurist.errors import ConfigError, JuristError
from jurist.models.limiter import LimiterStats, PermitSlots, RateWindow, check_in_flight

ACTOR_NAMESPACE = "jurist"
DEFAULT_LEASE = 1.0  # seconds a permit may be passed on inside one process
RESTART_GRACE = 2 * DEFAULT_LEASE  # a restarted actor waits this long for the holders' reports before granting
_RETURN_LINGER = 0.002  # permits going back are gathered this long into one call


def import_ray() -> Any:
    """``ray``, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError('the Ray engine needs Ray: pip install "jurist[ray]"') from None
    return ray


@dataclass(frozen=True)
class ClusterBounds:
    """The bounds the cluster-wide limiter holds."""

    max_in_flight: int
    requests_per_minute: int | None
    tokens_per_minute: int | None
    window: float  # seconds of the request and token windows


@dataclass(frozen=True)
class ClusterCounts:
    """The cluster-wide limiter's counts, for monitoring and tests."""

    in_flight: int
    peak_in_flight: int
    granted: int
    held: dict[str, int]  # client -> permits it holds
    waiting: int  # permits asked for and not yet granted


class LimiterCore:
    """The cluster-wide counts: permits held per client, request and token windows.

    Runs inside the limiter actor (its methods are the actor's methods), on
    the actor's event loop.
    """

    def __init__(
        self,
        max_in_flight: int,
        requests_per_minute: int | None = None,
        tokens_per_minute: int | None = None,
        window: float = 60.0,
    ) -> None:
        self.max_in_flight = check_in_flight(max_in_flight)
        self.rates = RateWindow(requests_per_minute, tokens_per_minute, window)
        self.held: dict[str, int] = {}
        self.in_flight = 0
        self.peak_in_flight = 0
        self.granted = 0
        self._waiters: collections.deque[tuple[str, list[int], asyncio.Future[int]]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._gone: set[str] = set()  # clients forgotten: their late requests get nothing
        self._paused_until = 0.0  # monotonic time before which nothing is granted (after a restart)
        self._heard: set[str] = set()  # clients that registered or reported what they hold

    def pause(self, seconds: float) -> None:
        """Grant nothing for ``seconds`` (a restarted actor learning what its clients hold)."""
        self._paused_until = time.monotonic() + seconds

    async def configure(self, max_in_flight: int | None = None, requests_per_minute: int | None = None,
                        tokens_per_minute: int | None = None) -> ClusterBounds:
        """Change the bounds (the latest explicit setting holds); returns them."""
        if max_in_flight is not None:
            self.max_in_flight = check_in_flight(max_in_flight)
        self.rates.configure(requests_per_minute, tokens_per_minute)
        self._pump()
        return await self.config()

    async def config(self) -> ClusterBounds:
        r = self.rates
        return ClusterBounds(max_in_flight=self.max_in_flight, requests_per_minute=r.requests_per_minute,
                             tokens_per_minute=r.tokens_per_minute, window=r.window)

    async def stats(self) -> ClusterCounts:
        """Counts for monitoring and tests."""
        return ClusterCounts(in_flight=self.in_flight, peak_in_flight=self.peak_in_flight, granted=self.granted,
                             held=dict(self.held), waiting=sum(len(t) for _, t, f in self._waiters if not f.done()))

    async def register(self, client: str) -> None:
        """A client (re)starts: free whatever an earlier process with its id still held
        or still waited for."""
        self._gone.discard(client)
        self._heard.add(client)
        self._drop(client)
        self.held[client] = 0
        self._pump()

    async def forget(self, client: str) -> None:
        """A client is gone for good (its worker was stopped): free what it held; a
        request from it still on its way gets nothing."""
        self._gone.add(client)
        self._heard.add(client)
        self._drop(client)
        self.held.pop(client, None)
        self._pump()

    def _drop(self, client: str) -> None:
        self._give_back(client, self.held.get(client, 0))
        for c, _, fut in self._waiters:
            if c == client and not fut.done():
                fut.set_result(0)

    def _holding(self, client: str, holding: int | None) -> None:
        """The first word from a client this actor has not heard from (it was restarted
        with empty counts; a client starting afresh registers first): count the permits
        the client says it holds besides those it gives back."""
        if client in self._heard:
            return
        self._heard.add(client)
        if holding and client not in self._gone:
            self.held[client] = self.held.get(client, 0) + holding
            self.in_flight += holding
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    async def acquire(self, client: str, tokens: list[int], give_back: int = 0, holding: int | None = None) -> int:
        """Wait until at least one permit can be granted; grant up to ``len(tokens)``.
        ``holding``: the permits the client holds besides ``give_back``."""
        self._give_back(client, give_back)
        self._holding(client, holding)
        if not tokens or client in self._gone:
            self._pump()
            return 0
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((client, tokens, fut))
        self._pump()
        try:
            return await fut
        except asyncio.CancelledError:  # the caller went away: what it was granted goes back
            if fut.done() and not fut.cancelled():
                self._give_back(client, fut.result())
                self._pump()
            raise

    async def release(self, client: str, n: int, holding: int | None = None) -> None:
        self._give_back(client, n)
        self._holding(client, holding)
        self._pump()

    def _give_back(self, client: str, n: int) -> None:
        n = min(n, self.held.get(client, 0))  # never below zero (a restarted actor knows nothing)
        if n > 0:
            self.held[client] -= n
            self.in_flight -= n

    def _pump(self) -> None:
        """Grant permits to waiting clients in arrival order while the bounds allow."""
        paused = self._paused_until - time.monotonic()
        if paused > 0:
            if self._waiters and self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(paused, self._on_timer)
            return
        while self._waiters:
            client, tokens, fut = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
                continue
            n, wait = self._grantable(tokens)
            if n == 0:
                if wait > 0 and self._timer is None:
                    self._timer = asyncio.get_running_loop().call_later(wait, self._on_timer)
                return
            self._waiters.popleft()
            self.rates.record(tokens[:n], time.monotonic())
            self.held[client] = self.held.get(client, 0) + n
            self.in_flight += n
            self.granted += n
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            fut.set_result(n)

    def _on_timer(self) -> None:
        self._timer = None
        self._pump()

    def _grantable(self, tokens: list[int]) -> tuple[int, float]:
        """How many of ``tokens`` may start now, and if none, how long until one may."""
        room = min(len(tokens), self.max_in_flight - self.in_flight)
        if room <= 0:
            return 0, 0.0  # a release wakes the queue
        return self.rates.room(tokens[:room], time.monotonic())


def actor_name(job: str, endpoint: str) -> str:
    """The name of the limiter actor of ``endpoint`` in Ray job ``job`` (namespace ``jurist``)."""
    return f"jurist-limiter:{job}:{endpoint}"


def limiter_actor(
    endpoint: str,
    max_in_flight: int,
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
    *,
    window: float = 60.0,
    wait: bool = True,
    job: str | None = None,
) -> Any:
    """The limiter actor for ``endpoint`` of this driver's Ray job, created on first use.

    A named actor in the ``jurist`` namespace, one per endpoint and job: every
    batch the driver runs against the endpoint (and every worker of those
    batches, on any node) shares it, and the bounds passed here update it. It
    ends with the driver. Call from a connected driver (``ray.init``) or one of
    its workers; ``job`` names another job's (default: this process's job).

    With ``wait=False`` the handle comes back at once, while the actor's
    process may still be starting (the bounds are sent ahead of any later
    call from this driver, so ``ray.get(actor.config.remote())`` returns once
    they hold).
    """
    import ray

    cls = ray.remote(_LimiterActor)
    job = job or ray.get_runtime_context().get_job_id()
    # Untyped handle: Ray types an actor's methods as remote calls only when they carry
    # @ray.method, and LimiterCore's methods also run in-process without Ray.
    actor: Any = cls.options(
        name=actor_name(job, endpoint), namespace=ACTOR_NAMESPACE, get_if_exists=True,
        num_cpus=0, max_restarts=-1, max_task_retries=-1, max_concurrency=100_000,
    ).remote(max_in_flight, requests_per_minute, tokens_per_minute, window)
    configured = actor.configure.remote(max_in_flight, requests_per_minute, tokens_per_minute)
    if wait:
        ray.get(configured)
    return actor


def open_shared_limiter(
    job: str | None,
    endpoint: str,
    max_in_flight: int,
    requests_per_minute: int | None = None,
    tokens_per_minute: int | None = None,
    *,
    max_held: int | None = None,
) -> "SharedLimiter":
    """This process's client of the limiter actor of ``endpoint`` in Ray job ``job``
    (this process's job when ``None``), the actor created if it does not exist yet
    and given these bounds. The client id is this process's actor id when it is a
    Ray actor (a restarted worker frees what its predecessor held), else a new id.
    Needs a connected Ray (``ray.init``, or a Ray worker)."""
    ray = import_ray()
    if not ray.is_initialized():
        raise JuristError("the limiter URL ray:// needs a connected Ray: call ray.init() first, or run on a worker")
    actor = limiter_actor(endpoint, max_in_flight, requests_per_minute, tokens_per_minute, wait=False, job=job)
    client_id = ray.get_runtime_context().get_actor_id() or uuid.uuid4().hex
    return SharedLimiter(actor, client_id, max_held=max_held)


class _LimiterActor(LimiterCore):
    """:class:`LimiterCore` as the Ray actor: after a restart it first pauses for ``RESTART_GRACE``."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        import ray

        if ray.get_runtime_context().was_current_actor_reconstructed:
            self.pause(RESTART_GRACE)


@dataclass
class _Permit:
    granted_at: float
    direct: bool = False  # asked for by a request from another loop than the home loop


class SharedLimiter(PermitSlots):
    """A process's side of the cluster-wide limiter: ``async with limiter.slot(tokens)``.

    ``max_held`` optionally caps the permits this process holds at once (its
    share of the cluster bound). The event loop of the first request (or of
    :meth:`start`, which registers the client with the actor) is its home
    loop; requests from other loops take the direct way (see the module).
    """

    def __init__(self, actor: Any, client_id: str, *, max_held: int | None = None,
                 lease: float = DEFAULT_LEASE) -> None:
        if max_held is not None and max_held < 1:
            raise ValueError("max_held must be at least 1")
        self.actor = actor
        self.client_id = client_id
        self.max_held = max_held
        self.lease = lease
        self.held = 0  # permits this process owns (in use or being passed on)
        self.in_flight = 0
        self.peak_in_flight = 0
        self.local_handovers = 0
        self.actor_calls = 0
        self._rates = False
        self._started: asyncio.Future[None] | None = None
        self._waiters: collections.deque[tuple[asyncio.Future[_Permit], int]] = collections.deque()
        self._pump_task: asyncio.Task[None] | None = None
        self._returns = 0
        self._return_task: asyncio.Task[None] | None = None
        self._report_task: asyncio.Task[None] | None = None
        self._home: asyncio.AbstractEventLoop | None = None
        self._held_lock = threading.Lock()  # held, for requests from other loops
        self._asking = 0  # permits the home loop's pump is asking the actor for

    def stats(self) -> LimiterStats:
        return dataclasses.replace(super().stats(), held=self.held, max_held=self.max_held,
                                   actor_calls=self.actor_calls, local_handovers=self.local_handovers)

    def configure(self, max_in_flight: int | None = None, requests_per_minute: int | None = None,
                  tokens_per_minute: int | None = None) -> None:
        """Send new bounds to the actor (the latest explicit setting holds for the job)."""
        if max_in_flight is not None or requests_per_minute is not None or tokens_per_minute is not None:
            self.actor.configure.remote(max_in_flight, requests_per_minute, tokens_per_minute)

    def _at_home(self) -> bool:
        """Whether the running loop is the home loop (the first loop to use this client
        becomes it; so does a new one once the old is closed)."""
        loop = asyncio.get_running_loop()
        if self._home is loop:
            return True
        if self._home is None or self._home.is_closed():
            self._home = loop
            self._waiters.clear()
            self._pump_task = self._return_task = self._report_task = None
            if self._started is not None and not self._started.done():
                self._started = None
            return True
        return False

    async def start(self) -> None:
        """Register with the actor (freeing what a dead predecessor held); read its bounds."""
        if not self._at_home():
            if self._started is None or not self._started.done() or self._started.exception():
                raise JuristError("start the cluster-wide limiter's client on its home event loop first")
            return
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            try:
                await self._call(self.actor.register.remote(self.client_id))
                bounds: ClusterBounds = await self._call(self.actor.config.remote())
                self._rates = bool(bounds.requests_per_minute or bounds.tokens_per_minute)
                self._report_task = asyncio.create_task(self._report())
                self._started.set_result(None)
            except BaseException as exc:
                started, self._started = self._started, None  # the next request tries again
                if isinstance(exc, Exception):
                    started.set_exception(exc)
                    started.exception()  # retrieved here; raised below and to concurrent callers
                else:
                    started.cancel()
                raise
        else:
            await asyncio.shield(self._started)

    async def _acquire(self, tokens: int) -> _Permit:
        if not self._at_home():
            return await self._acquire_direct(tokens)
        await self.start()
        fut: asyncio.Future[_Permit] = asyncio.get_running_loop().create_future()
        self._waiters.append((fut, tokens))
        self._ensure_pump()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._pass_on(fut.result())  # granted just as the caller gave up
            raise

    async def _release(self, permit: _Permit) -> None:
        if permit.direct:
            with self._held_lock:
                self.held -= 1
                holding = self.held
            await self._call(self.actor.release.remote(self.client_id, 1, holding))
            home = self._home
            if home is not None and not home.is_closed():  # requests waiting at max_held at home may ask now
                home.call_soon_threadsafe(self._wake_pump)
            return
        self._pass_on(permit)

    async def _acquire_direct(self, tokens: int) -> _Permit:
        """A permit for a request from another loop than the home loop: asked for alone."""
        pause = 0.002
        while True:  # a place under max_held is reserved first
            with self._held_lock:
                if self.max_held is None or self.held + self._asking < self.max_held:
                    self.held += 1
                    holding = self.held - 1
                    break
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)
        try:
            granted = await self._call(self.actor.acquire.remote(self.client_id, [tokens], 0, holding))
            if not granted:
                raise JuristError("the cluster-wide limiter no longer serves this process (its job ended)")
        except BaseException as exc:
            with self._held_lock:
                self.held -= 1
            if isinstance(exc, JuristError) or not isinstance(exc, Exception):
                raise
            raise JuristError(f"the cluster-wide limiter is unreachable ({type(exc).__name__}: {exc}); "
                              "check that the Ray cluster is up") from exc
        return _Permit(time.monotonic(), direct=True)

    def _pass_on(self, permit: _Permit) -> None:
        """A permit a request is done with: to a waiter here, or back to the actor."""
        if not self._rates and time.monotonic() - permit.granted_at < self.lease:
            while self._waiters:
                fut, _ = self._waiters.popleft()
                if not fut.done():
                    self.local_handovers += 1
                    fut.set_result(permit)
                    return
        self._give_back_one()

    def _give_back_one(self) -> None:
        """A permit goes back to the actor; waiters (if any) ask it for new ones."""
        with self._held_lock:
            self.held -= 1
        self._returns += 1
        if self._return_task is None or self._return_task.done():
            self._return_task = asyncio.create_task(self._send_returns())
        if self._waiters:
            self._ensure_pump()

    def _wake_pump(self) -> None:
        if self._waiters:
            self._ensure_pump()

    def _ensure_pump(self) -> None:
        if self._pump_task is None or self._pump_task.done():
            self._pump_task = asyncio.create_task(self._pump())

    async def _send_returns(self) -> None:
        await asyncio.sleep(_RETURN_LINGER)
        n, self._returns = self._returns, 0
        if n:
            await self._call(self.actor.release.remote(self.client_id, n, self.held))

    async def _report(self) -> None:
        """While this process holds permits, tell the actor how many (a restarted actor
        learns them within its grace; a running one already knows and ignores this)."""
        while True:
            await asyncio.sleep(RESTART_GRACE / 2)
            if self.held > 0:
                try:
                    await self._call(self.actor.release.remote(self.client_id, 0, self.held))
                except Exception:  # the next request reports the actor's loss
                    pass

    async def _pump(self) -> None:
        """Ask the actor for permits for the waiters, in one call at a time."""
        try:
            while True:
                live = [(f, t) for f, t in self._waiters if not f.done()]
                self._waiters = collections.deque(live)
                with self._held_lock:  # what is asked for counts against max_held until answered
                    room = len(live) if self.max_held is None else min(len(live), self.max_held - self.held)
                    self._asking = max(room, 0)
                if room <= 0:
                    return  # nobody waits, or this process is at its cap: releases pass permits on
                give_back, self._returns = self._returns, 0
                granted = 0
                try:
                    granted = await self._call(
                        self.actor.acquire.remote(self.client_id, [t for _, t in live[:room]], give_back, self.held))
                finally:
                    with self._held_lock:
                        self._asking = 0
                        self.held += granted
                now = time.monotonic()
                for _ in range(granted):
                    self._hand_out(_Permit(now))
        except BaseException as exc:
            error = exc if isinstance(exc, JuristError) else JuristError(
                f"the cluster-wide limiter is unreachable ({type(exc).__name__}: {exc}); "
                "check that the Ray cluster is up")
            for fut, _ in self._waiters:
                if not fut.done():
                    fut.set_exception(error)
            self._waiters.clear()
            if isinstance(exc, asyncio.CancelledError):
                raise

    def _hand_out(self, permit: _Permit) -> None:
        while self._waiters:
            fut, _ = self._waiters.popleft()
            if not fut.done():
                fut.set_result(permit)
                return
        self._give_back_one()  # the waiter went away meanwhile: the permit goes back

    async def _call(self, ref: Any) -> Any:
        self.actor_calls += 1
        return await ref

    async def aclose(self) -> None:
        """Give back everything this process holds, once no request is waiting.

        A request for permits still on its way to the actor is waited for (its
        grant comes back and is returned at once), so nothing stays counted.
        """
        if self._report_task is not None:
            self._report_task.cancel()
        await self._flush_returns()
        if self._pump_task is not None and not self._pump_task.done():
            await asyncio.shield(self._pump_task)
        await self._flush_returns()
        if self._return_task is not None and not self._return_task.done():
            await asyncio.shield(self._return_task)  # a release already on its way is answered

    async def _flush_returns(self) -> None:
        with self._held_lock:
            idle = self.held - self.in_flight
            self.held -= idle
        n, self._returns = self._returns + idle, 0
        if n > 0:
            await self._call(self.actor.release.remote(self.client_id, n, self.held))
