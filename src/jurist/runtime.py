"""The runtime: settings, the store and the model registry, built once at the edge.

The CLI, :func:`jurist.server.create_app` and library users (:func:`jurist.open`)
build one :class:`Runtime` and pass it to the capabilities; a capability never
loads settings or opens a store itself. The runtime owns what used to be
process-wide state: whether the "no judge configured" notice was given, the
store opened for it (closed with it), and the pool of endpoint limiters its
models share (by default the process's pool, so that every runtime in a process
keeps one bound per endpoint; give ``limiters=LimiterPool()`` for bounds of
its own, closed by whoever made the pool).

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
from jurist.models.base import CallRecord, MeaningJudge
from jurist.models.limiter_pool import LimiterPool
from jurist.models.model import CallSink, MeaningBackend, Model
from jurist.models.registry import HOW_TO_CONFIGURE, judge_ref, model_for, resolve_model
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
    """

    def __init__(self, settings: Settings | None = None, store: Store | None = None, *,
                 lookup_linger: float = LOOKUP_LINGER, open_store: bool = True,
                 limiters: LimiterPool | None = None) -> None:
        self.settings = settings if settings is not None else Settings.load()
        self.limiters = limiters  # None: the process's pool, shared with every runtime in the process
        self._store = store
        self._own_store = False
        self._open_store = open_store
        self._lookup_linger = lookup_linger
        self._lock = threading.Lock()
        self._announced = False
        self._prompts: PromptRouter | None = None

    # -- building ----------------------------------------------------------------------
    @classmethod
    def load(cls, config_file: str | Path | None = None, *, store: Store | None = None,
             limiters: LimiterPool | None = None, **explicit: Any) -> "Runtime":
        """Settings from explicit values, ``jurist.yaml`` (or ``config_file``) and the environment."""
        return cls(Settings.load(config_file, **explicit), store, limiters=limiters)

    @classmethod
    def of(cls, runtime: "Runtime | None" = None, settings: Settings | None = None,
           store: Store | None = None) -> "Runtime":
        """The runtime a capability was given, else one over the settings and store it was given."""
        if runtime is not None:
            return runtime
        return cls(settings, store)

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

    async def cached_reply(self, request_hash: str) -> dict[str, Any] | None:
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

    def model(self, ref: str, *, max_in_flight: int | None = None, cache: bool | None = None,
              sink: CallSink | None = None) -> Model:
        """A ready :class:`Model` for a reference or alias, recording into ``sink`` (default:
        this runtime's store)."""
        return resolve_model(ref, self.settings, sink=sink if sink is not None else self.sink,
                             max_in_flight=max_in_flight, cache=cache, limiters=self.limiters)

    def judge(self, judge: Judgelike = None, *, default: str | None = None, cache: bool | None = None,
              max_in_flight: int | None = None) -> Model:
        """Whatever a caller gave as a judge, as a :class:`Model`: a ``Model`` as it is, a meaning
        judge object behind :class:`MeaningBackend`, a reference or alias resolved; none: ``default``,
        else the configured judge, else the local judge."""
        if isinstance(judge, Model):
            return judge
        if judge is not None and not isinstance(judge, str):
            return self.wrap(judge)
        ref = self.judge_ref(judge or default)
        return self.model(ref, cache=cache, max_in_flight=max_in_flight)

    def wrap(self, judge: MeaningJudge) -> Model:
        """A user's meaning judge as a backend behind :class:`Model` (its calls on record)."""
        return model_for(MeaningBackend(judge), self.settings, None, sink=self.sink, cache=False, shared=False,
                         limiters=self.limiters)

    # -- closing -----------------------------------------------------------------------
    async def aflush(self) -> None:
        if self._store is not None:
            await self._store.aflush()

    async def aclose(self) -> None:
        """Close the store this runtime opened (a given store stays open, flushed)."""
        store, own = self._store, self._own_store
        if store is None:
            return
        if own:
            self._store, self._own_store = None, False
            await store.aclose()
        else:
            await store.aflush()

    def close(self) -> None:
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


def open(config_file: str | Path | None = None, *, store: Store | None = None,  # noqa: A001
         limiters: LimiterPool | None = None, **settings: Any) -> Runtime:
    """Build the runtime for library use: settings from ``settings`` (any :class:`Settings`
    field, e.g. ``judge=``, ``database_url=``), then ``jurist.yaml`` (or ``config_file``),
    then the environment; ``limiters`` a pool of endpoint limiters of its own (default: the
    process's). Use it as a context manager (sync or async) to close its store."""
    return Runtime.load(config_file, store=store, limiters=limiters, **settings)
