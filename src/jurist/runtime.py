"""The runtime: settings, the store and the model registry, built once at the edge.

The CLI, :func:`jurist.server.create_app` and library users (:func:`jurist.open`)
build one :class:`Runtime` and pass it to the capabilities; a capability never
loads settings or opens a store itself. A capability called without one (``Gate()``,
``Panel(...)``, ``evaluate(...)``) gets it from :func:`runtime_for`, the one place
a runtime is built for it. The runtime owns what would otherwise be process-wide
state: whether the "no judge configured" notice was given, the store opened for it
(closed with it), the pool of endpoint limiters and circuit breakers its models
share, and the structured-output modes found per endpoint. Building one starts reading
the price table (``genai-prices``) in a thread, once per process, so the first recorded
call does not read it on the event loop (:func:`jurist.models.cost.preload_prices`).

An endpoint's bounds (max in flight, requests and tokens per minute) are fixed
when the runtime is built, from its settings and providers and an optional
``max_in_flight`` over them all (``--max-concurrency``): resolving a model never
changes them, and two runtimes in one process each keep their own. Give several
runtimes one ``limiters=LimiterPool(settings)`` for one bound between them.

::

    import jurist

    with jurist.open(judge="openai/gpt-4o-mini") as rt:      # or: async with jurist.open(...)
        gate = jurist.Gate(runtime=rt)
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

from jurist.config import Settings
from jurist.errors import UsageError
from jurist.models.base import CallRecord, MeaningJudge
from jurist.models.cost import preload_prices
from jurist.models.limiter_pool import LimiterPool
from jurist.models.model import CachedReply, CallSink, MeaningBackend, Model
from jurist.models.registry import HOW_TO_CONFIGURE, judge_ref, model_for, resolve_model
from jurist.models.structured import ModeMemory
from jurist.prompt_router import PromptRouter
from jurist.store import Store
from jurist.store.store import LOOKUP_LINGER

logger = logging.getLogger("jurist")

NO_JUDGE_NOTICE = (
    "no judge configured; using the offline local judge (local/minilm), which can only "
    "match meaning (item-based rubrics, checklist points, relevance, support).\n" + HOW_TO_CONFIGURE
)

Judgelike = str | Model | MeaningJudge | None


class Runtime:
    """Settings + store + model registry, shared by everything one program runs.

    ``store`` is the store given, or one opened on first use from
    ``settings.database`` (and closed by :meth:`aclose`). The runtime is also a
    call sink: models resolved through it record their calls in its store.
    ``limiters`` is its pool of endpoint limiters: the one given (shared with whoever
    else holds it), else one of its own built here from the settings, every endpoint
    at most ``max_in_flight`` requests in flight when that is given.
    """

    def __init__(self, settings: Settings | None = None, store: Store | None = None, *,
                 lookup_linger: float = LOOKUP_LINGER, open_store: bool = True,
                 limiters: LimiterPool | None = None, max_in_flight: int | None = None) -> None:
        self.settings = settings if settings is not None else Settings.load()
        if limiters is not None and max_in_flight is not None:
            raise UsageError("max_in_flight is a bound of the limiter pool: give it to LimiterPool(settings, "
                             "max_in_flight=...), or no pool")
        self._own_limiters = limiters is None
        self.limiters = limiters if limiters is not None else LimiterPool(self.settings, max_in_flight=max_in_flight)
        self.modes = ModeMemory()  # the structured-output mode found per endpoint
        self._store = store
        self._own_store = False
        self._open_store = open_store
        self._lookup_linger = lookup_linger
        self._lock = threading.Lock()
        self._announced = False
        self._prompts: PromptRouter | None = None
        preload_prices()  # the price table, read in a thread once per process (never blocks this)

    # -- building ----------------------------------------------------------------------
    @classmethod
    def load(cls, config_file: str | Path | None = None, *, store: Store | None = None,
             limiters: LimiterPool | None = None, max_in_flight: int | None = None,
             **explicit: Any) -> "Runtime":
        """Settings from explicit values, ``jurist.yaml`` (or ``config_file``) and the environment."""
        return cls(Settings.load(config_file, **explicit), store, limiters=limiters, max_in_flight=max_in_flight)

    # -- the store ---------------------------------------------------------------------
    @property
    def has_store(self) -> bool:
        return self._store is not None or self._open_store

    @property
    def store(self) -> Store:
        """The store; opened (and migrated) on first use if none was given. Blocking:
        call :meth:`astore` from async code."""
        if self._store is None:
            with self._lock:
                if self._store is None:
                    self._store = Store(self.settings.database, lookup_linger=self._lookup_linger)
                    self._own_store = True
        return self._store

    async def astore(self) -> Store:
        """The store, opened off the event loop on first use."""
        if self._store is None:
            await asyncio.to_thread(lambda: self.store)
        assert self._store is not None
        return self._store

    @property
    def sink(self) -> "Runtime | None":
        """Where models record their calls: this runtime's store (None: nowhere)."""
        return self if self.has_store else None

    def record_call(self, record: CallRecord) -> None:
        self.store.record_call(record)

    async def cached_reply(self, request_hash: str) -> CachedReply | None:
        return await (await self.astore()).cached_reply(request_hash)

    @property
    def prompts(self) -> PromptRouter | None:
        """The prompt lab's routes over this runtime's store (active versions, A/B tests), which
        every judge a capability builds asks before each call; None without a store. The store
        is opened (off the event loop) on the first call that asks."""
        if not self.has_store:
            return None
        with self._lock:
            if self._prompts is None:
                self._prompts = PromptRouter(self.astore)
        return self._prompts

    # -- models ------------------------------------------------------------------------
    def judge_ref(self, explicit: str | None = None, *, announce: bool = True) -> str:
        """The judge to use: explicit, else the settings' judge, else the offline local
        judge (with a notice, once per runtime, saying how to configure an LLM)."""
        if announce and not (explicit or self.settings.judge) and not self._announced:
            self._announced = True
            logger.warning(NO_JUDGE_NOTICE)
        return judge_ref(self.settings, explicit)

    def model(self, ref: str, *, cache: bool | None = None, sink: CallSink | None = None) -> Model:
        """A ready :class:`Model` for a reference or alias, recording into ``sink`` (default:
        this runtime's store), behind its endpoint's limiter in this runtime's pool."""
        return resolve_model(ref, self.settings, sink=sink if sink is not None else self.sink,
                             cache=cache, limiters=self.limiters, modes=self.modes)

    def judge(self, judge: Judgelike = None, *, default: str | None = None, cache: bool | None = None) -> Model:
        """Whatever a caller gave as a judge, as a :class:`Model`: a ``Model`` as it is, a meaning
        judge object behind :class:`MeaningBackend`, a reference or alias resolved; none: ``default``,
        else the configured judge, else the local judge."""
        if isinstance(judge, Model):
            return judge
        if judge is not None and not isinstance(judge, str):
            return self.wrap(judge)
        ref = self.judge_ref(judge or default)
        return self.model(ref, cache=cache)

    def wrap(self, judge: MeaningJudge) -> Model:
        """A user's meaning judge as a backend behind :class:`Model` (its calls on record)."""
        return model_for(MeaningBackend(judge), self.settings, self.limiters, sink=self.sink, cache=False,
                         shared=False)

    # -- closing -----------------------------------------------------------------------
    async def aflush(self) -> None:
        if self._store is not None:
            await self._store.aflush()

    async def aclose(self) -> None:
        """Close the store this runtime opened (a given store stays open, flushed) and the
        limiters of its own pool."""
        if self._own_limiters:
            await self.limiters.aclose()
        store, own = self._store, self._own_store
        if store is None:
            return
        if own:
            self._store, self._own_store = None, False
            await store.aclose()
        else:
            await store.aflush()

    def close(self) -> None:
        if self._own_limiters:
            self.limiters.close()
        store, own = self._store, self._own_store
        if store is None:
            return
        if own:
            self._store, self._own_store = None, False
            store.close()
        else:
            store.flush()

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "Runtime":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def runtime_for(runtime: Runtime | None = None, settings: Settings | None = None, store: Store | None = None, *,
                max_in_flight: int | None = None, open_store: bool = True,
                lookup_linger: float = LOOKUP_LINGER) -> Runtime:
    """The runtime a public entry point runs in: ``runtime`` when one is given, else one built
    here, the one place a capability called without a runtime gets one (``Gate()``,
    ``Panel(...)``, ``evaluate(...)``): over ``settings`` (none: loaded once, from
    ``jurist.yaml`` and the environment) and ``store`` (none: opened on first use, unless
    ``open_store`` is false), its endpoints' bounds fixed now, ``max_in_flight`` over them all.
    A runtime given keeps its bounds: ``max_in_flight`` with it is a :class:`UsageError`."""
    if runtime is not None:
        if max_in_flight is not None:
            raise UsageError("max_concurrency is fixed when the runtime is built: give it to the runtime "
                             "(jurist.open(max_in_flight=...)), not to a call that is given the runtime")
        return runtime
    return Runtime(settings, store, open_store=open_store, lookup_linger=lookup_linger, max_in_flight=max_in_flight)


def open(config_file: str | Path | None = None, *, store: Store | None = None,  # noqa: A001
         limiters: LimiterPool | None = None, max_in_flight: int | None = None, **settings: Any) -> Runtime:
    """Build the runtime for library use: settings from ``settings`` (any :class:`Settings`
    field, e.g. ``judge=``, ``database_url=``), then ``jurist.yaml`` (or ``config_file``),
    then the environment. Its endpoints' bounds are fixed now, from those settings, with
    every endpoint at most ``max_in_flight`` requests in flight when it is given;
    ``limiters``: a pool of endpoint limiters to share with other runtimes instead of one
    of its own. Use it as a context manager (sync or async) to close its store."""
    return Runtime.load(config_file, store=store, limiters=limiters, max_in_flight=max_in_flight, **settings)
