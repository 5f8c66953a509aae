"""Which text of a shipped prompt a call uses: the active stored version, or an A/B test's arm.

Every judge built by jurist holds a shipped template (``src/jurist/templates/<name>.txt``)
and, through the :class:`~jurist.runtime.Runtime`, a :class:`PromptRouter` over the
runtime's store. Before each call the judge asks the router for the template to use
(:meth:`PromptRouter.resolve`):

* no route for the prompt: the shipped template;
* an active version (set in the prompt lab): that version's text;
* a running A/B test: version B for a ``share`` of the calls, version A for the rest.
  The arm is chosen by hashing the test's id with the call's routing key (the subject or
  the trace, else the call's own variables), so the same call goes to the same arm on a
  rerun (and is answered from the cache), and the call record's template hash says which
  arm it used.

A test that has an end condition in calls (``calls``: that many successful, uncached calls
on each arm) is ended here, without any statistics: further calls use version A, the
control (a significance end condition is checked where the statistics run, see
:mod:`jurist.analysis.prompt_tests`). Routing never fails a call: if the store cannot be
read, the template the judge holds is used and a warning logged.

Only shipped templates are routed; a user's template file, or a version asked for by
``name@version``, is used as given.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable

from jurist.ids import new_id
from jurist.judges.templates import BUILTIN_SOURCE, PromptTemplate
from jurist.store import Store
from jurist.store import prompt_routes as q
from jurist.store.analysis import get_prompt_version

log = logging.getLogger("jurist")

REFRESH_SECONDS = 2.0  # how long a read of the routes is used before it is read again


def bucket(test_id: str, key: str) -> float:
    """A number in [0, 1) fixed by the test and the routing key: below the share is arm B."""
    digest = hashlib.sha256(f"{test_id}\x00{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def arm_of(route: q.TestRoute, key: str) -> str:
    """``"a"`` or ``"b"``: the arm a running test sends the call with routing key ``key`` to."""
    return "b" if bucket(route.id, key) < route.share else "a"


def end_test(conn: Any, test: q.TestRoute | q.StoredTest, reason: str, version: int, calls: int | None = None) -> bool:
    """End the running test ``test`` and make ``version`` the prompt's active one, in one
    transaction (``conn``); False when it had already ended."""
    when = datetime.now(timezone.utc)
    if not q.end_running_tests(conn, test.prompt, when, reason, test_id=test.id, calls=calls):
        return False
    q.insert_route(conn, q.VersionRoute(id=new_id(), created_at=when, prompt=test.prompt, version=version,
                                        after_test=test.id))
    return True


class PromptRouter:
    """The routes of the store's prompts, read at most every :data:`REFRESH_SECONDS`; ``store``
    is the store or a coroutine function that opens it (the runtime's ``astore``)."""

    def __init__(self, store: Store | Callable[[], Awaitable[Store]], *, refresh: float = REFRESH_SECONDS) -> None:
        self._store = store
        self.refresh = refresh
        self._routes: dict[str, q.Route] = {}
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()
        self._texts: dict[tuple[str, int], PromptTemplate | None] = {}

    def forget(self) -> None:
        """Read the routes again on the next call (after a change made in this process)."""
        self._read_at = float("-inf")

    async def resolve(self, template: PromptTemplate, key: str | Callable[[], str]) -> PromptTemplate:
        """The template a call of ``template`` with routing key ``key`` (or ``key()``) uses."""
        if template.source != BUILTIN_SOURCE:
            return template
        try:
            route = (await self._current()).get(template.name)
            if route is None:
                return template
            if isinstance(route, q.VersionRoute):
                version = route.version
            else:
                arm = arm_of(route, key if isinstance(key, str) else key())
                version = route.b if arm == "b" else route.a
            return await self._version(template, version)
        except Exception as exc:  # routing is a nicety: a call never fails over it
            log.warning("prompt routing for %s failed (%s); using the shipped text", template.name, exc)
            return template

    async def versions(self, template: PromptTemplate) -> list[PromptTemplate]:
        """Every text a call of ``template`` may use now: the template itself, the active version,
        or both arms of a running A/B test (what a calibration of the judge has to hold for)."""
        if template.source != BUILTIN_SOURCE:
            return [template]
        try:
            route = (await self._current()).get(template.name)
            if route is None:
                return [template]
            if isinstance(route, q.VersionRoute):
                return [await self._version(template, route.version)]
            return [await self._version(template, route.a), await self._version(template, route.b)]
        except Exception as exc:  # as resolve(): the calls would use the template the judge holds
            log.warning("prompt routing for %s failed (%s); using the shipped text", template.name, exc)
            return [template]

    async def _current(self) -> dict[str, q.Route]:
        if time.monotonic() - self._read_at < self.refresh:
            return self._routes
        async with self._lock:
            if time.monotonic() - self._read_at >= self.refresh:
                store = await self.store()
                routes = await store.aread(q.current_routes)
                for route in list(routes.values()):
                    if isinstance(route, q.TestRoute) and route.calls and await self._reached(store, route):
                        routes = await store.aread(q.current_routes)
                self._routes, self._read_at = routes, time.monotonic()
        return self._routes

    async def store(self) -> Store:
        return self._store if isinstance(self._store, Store) else await self._store()

    async def _reached(self, store: Store, route: q.TestRoute) -> bool:
        """End ``route`` (and go back to version A) when each arm has had its calls."""
        counts = await store.aread(q.arm_call_counts, [route.hash_a, route.hash_b], route.created_at)
        if route.calls is None or min(counts.values()) < route.calls:
            return False
        reason = f"each version had at least {route.calls} calls"
        await store.awrite(end_test, route, reason, route.a, sum(counts.values()))
        log.info("A/B test %s of %s ended: %s; version %s is active", route.id, route.prompt, reason, route.a)
        return True

    async def _version(self, shipped: PromptTemplate, version: int) -> PromptTemplate:
        key = (shipped.name, version)
        if key not in self._texts:
            row = await (await self.store()).aread(get_prompt_version, shipped.name, version)
            self._texts[key] = None if row is None else PromptTemplate(
                name=shipped.name, version=str(version), text=row.text, source=BUILTIN_SOURCE)
        stored = self._texts[key]
        if stored is None:  # version 1 not stored: the shipped text
            return shipped
        return stored
