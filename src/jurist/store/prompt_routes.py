"""Queries for prompt routing: which stored version of a prompt is active, and its A/B tests.

A route is a row of ``analysis_runs`` (no table of its own): its ``params`` hold
the configuration and its ``status`` says what it is:

* ``prompt_active``: ``params = {"prompt", "version"}``, the version every call of that
  prompt uses (the newest route of a prompt wins; version 1 is the shipped text);
* ``prompt_test``: a running A/B test, ``params = {"prompt", "a", "b", "hash_a",
  "hash_b", "share", "calls", "alpha", "better"}``; ``created_at`` is its start;
* ``prompt_test_done``: a test that ended, with ``finished_at``, ``error`` (why it ended)
  and ``evaluations`` (the calls it routed).

The pattern analysis reads only runs with status ``done``, so it never sees these.
Plain functions taking a Connection, like :mod:`jurist.store.queries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import and_, false, func, insert, select, update
from sqlalchemy.engine import Connection

from jurist.store.analysis import pipeline_prompt_scores
from jurist.store.stored import StoredRow
from jurist.store.tables import analysis_runs, evaluations, llm_calls, scores

ACTIVE: Literal["prompt_active"] = "prompt_active"
TEST_RUNNING: Literal["prompt_test"] = "prompt_test"
TEST_DONE = "prompt_test_done"
ROUTE_STATUSES = (ACTIVE, TEST_RUNNING)


class VersionRoute(StoredRow):
    """A ``prompt_active`` route: every call of ``prompt`` uses ``version``."""

    id: str
    status: Literal["prompt_active"] = ACTIVE
    created_at: datetime
    prompt: str
    version: int
    after_test: str | None = None  # the test whose end made it active

    def params(self) -> dict[str, str | int]:
        out: dict[str, str | int] = {"prompt": self.prompt, "version": self.version}
        if self.after_test is not None:
            out["after_test"] = self.after_test
        return out


class TestRoute(StoredRow):
    """A ``prompt_test`` route: a running A/B test of versions ``a`` and ``b`` of ``prompt``."""

    id: str
    status: Literal["prompt_test"] = TEST_RUNNING
    created_at: datetime
    prompt: str
    a: int
    b: int
    hash_a: str
    hash_b: str
    share: float  # the share of calls routed to B
    calls: int | None  # end when each version has had this many calls
    alpha: float | None  # end when the comparison is significant at this level
    better: Literal["higher", "lower"]

    def params(self) -> dict[str, str | int | float | None]:
        return self.model_dump(exclude={"id", "status", "created_at"})


Route = VersionRoute | TestRoute


def _route(row: Any) -> Route:
    params = row.params or {}
    fields = {"id": row.id, "status": row.status, "created_at": row.created_at, **params}
    return VersionRoute.of(fields) if row.status == ACTIVE else TestRoute.of(fields)


def current_routes(conn: Connection) -> dict[str, Route]:
    """prompt name -> its route now: the newest ``prompt_active`` or running ``prompt_test`` row."""
    r = analysis_runs.c
    stmt = select(r.id, r.status, r.params, r.created_at).where(r.status.in_(ROUTE_STATUSES)).order_by(
        r.created_at, r.id)
    out: dict[str, Route] = {}
    for row in conn.execute(stmt):
        if isinstance((row.params or {}).get("prompt"), str):
            route = _route(row)
            out[route.prompt] = route
    return out


def insert_route(conn: Connection, route: Route) -> None:
    conn.execute(insert(analysis_runs), [{"id": route.id, "status": route.status, "evaluations": 0,
                                          "created_at": route.created_at, "params": route.params()}])


# PostgreSQL's advisory lock key of the route changes (any number no other lock of jurist uses).
ROUTES_LOCK = 0x6A75726973740001


def lock_routes(conn: Connection) -> None:
    """Hold the route changes' lock until the transaction ends: changes (a test started, ended, a
    version made active) are made one at a time, each reading what the one before wrote, so
    concurrent starts neither fail ("database is locked") nor leave two tests of one prompt running."""
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(ROUTES_LOCK)))
    else:  # SQLite: a write first takes the database's write lock (waiting for it), before any read
        conn.execute(update(analysis_runs).where(false()).values(status=analysis_runs.c.status))


def end_running_tests(conn: Connection, name: str, when: datetime, reason: str, *,
                      test_id: str | None = None, calls: int | None = None) -> list[str]:
    """Mark the running tests of prompt ``name`` (or only ``test_id``) done; the ids ended (none
    when another writer ended them first). Every route change starts here: it takes the
    routes' lock (:func:`lock_routes`) for the rest of ``conn``'s transaction."""
    lock_routes(conn)
    r = analysis_runs.c
    ended = []
    for row in conn.execute(select(r.id, r.params).where(r.status == TEST_RUNNING)).all():
        if (row.params or {}).get("prompt") != name or (test_id is not None and row.id != test_id):
            continue
        values: dict[str, str | int | datetime] = {"status": TEST_DONE, "finished_at": when, "error": reason}
        if calls is not None:
            values["evaluations"] = calls
        done = conn.execute(update(analysis_runs).where(r.id == row.id, r.status == TEST_RUNNING).values(**values))
        if done.rowcount:
            ended.append(row.id)
    return ended


class StoredTest(StoredRow):
    """An A/B test as stored, running or ended: its configuration and how it ended."""

    prompt: str
    a: int
    b: int
    hash_a: str
    hash_b: str
    share: float
    calls: int | None
    alpha: float | None
    better: Literal["higher", "lower"]
    id: str
    running: bool
    routed_calls: int | None  # the calls routed, counted when the test ended
    ended_because: str | None
    created_at: datetime
    finished_at: datetime | None


def list_tests(conn: Connection, name: str | None = None, limit: int = 200) -> list[StoredTest]:
    """A/B tests, running and ended, newest first."""
    r = analysis_runs.c
    stmt = (select(r.id, r.status, r.params, r.evaluations, r.error, r.created_at, r.finished_at)
            .where(r.status.in_((TEST_RUNNING, TEST_DONE))).order_by(r.created_at.desc(), r.id).limit(limit))
    rows = [_test(row) for row in conn.execute(stmt)]
    return [t for t in rows if name is None or t.prompt == name]


def get_test(conn: Connection, test_id: str) -> StoredTest | None:
    r = analysis_runs.c
    stmt = select(r.id, r.status, r.params, r.evaluations, r.error, r.created_at, r.finished_at).where(
        r.id == test_id, r.status.in_((TEST_RUNNING, TEST_DONE)))
    row = conn.execute(stmt).first()
    return _test(row) if row is not None else None


def _test(row: Any) -> StoredTest:
    return StoredTest.of(row.params or {}, id=row.id, running=row.status == TEST_RUNNING, routed_calls=row.evaluations,
                         ended_because=row.error, created_at=row.created_at, finished_at=row.finished_at)


def arm_call_counts(conn: Connection, hashes: Sequence[str], since: datetime) -> dict[str, int]:
    """hash -> the successful, uncached calls recorded with that template hash since ``since``."""
    c = llm_calls.c
    stmt = (select(c.template_hash, func.count()).where(
        c.created_at >= since, c.template_hash.in_(list(hashes)), c.status == "ok", c.cached == false())
        .group_by(c.template_hash))
    counts = {h: 0 for h in hashes}
    counts.update({h: int(n) for h, n in conn.execute(stmt)})
    return counts


def arm_scores(conn: Connection, hashes: Sequence[str], since: datetime, *, limit: int = 20000
               ) -> list[dict[str, Any]]:
    """What an A/B test compares, as rows ``{template_hash, key, score, max_score, subject_id,
    judge_model}`` (newest first, at most ``limit`` per hash), from evaluations made since ``since``:

    * the per-rubric score rows judged with one of ``hashes`` (every judge's score rows record it);
    * else the overall score of each research evaluation whose run used one of ``hashes`` as a
      pipeline prompt (:func:`jurist.store.analysis.pipeline_prompt_scores`);
    * else the evaluation's percentage (key ``overall``) for each trace whose calls used
      exactly one of ``hashes`` (a trace that used both is left out).
    """
    s, e, c = scores.c, evaluations.c, llm_calls.c
    out: list[dict[str, Any]] = []
    for h in hashes:
        stmt = (select(s.template_hash, s.key, s.score, s.max_score, e.subject_id,
                       func.coalesce(s.judge_model, e.judge_model).label("judge_model"))
                .select_from(scores.join(evaluations, e.id == s.evaluation_id))
                .where(s.template_hash == h, s.status == "scored", s.score.is_not(None), e.created_at >= since)
                .order_by(e.created_at.desc(), s.id.desc()).limit(limit))
        out.extend(dict(r._mapping) for r in conn.execute(stmt))
    if out:
        return out
    out = [{k: v for k, v in row.items() if k != "created_at"}
           for row in pipeline_prompt_scores(conn, hashes, since=since, limit=limit)]
    if out:
        return out
    traces = (select(c.trace_id, func.min(c.template_hash).label("template_hash"))
              .where(c.created_at >= since, c.template_hash.in_(list(hashes)), c.trace_id.is_not(None))
              .group_by(c.trace_id).having(func.count(func.distinct(c.template_hash)) == 1).subquery())
    for h in hashes:
        stmt = (select(e.percentage, e.subject_id, e.judge_model)
                .select_from(evaluations.join(traces, and_(traces.c.trace_id == e.trace_id)))
                .where(traces.c.template_hash == h, e.percentage.is_not(None), e.created_at >= since)
                .order_by(e.created_at.desc(), e.id).limit(limit))
        out.extend({"template_hash": h, "key": "overall", "score": r.percentage, "max_score": 100.0,
                    "subject_id": r.subject_id, "judge_model": r.judge_model} for r in conn.execute(stmt))
    return out


class ArmJudgeCalls(StoredRow):
    """The calls one judge model made with one version's template since a test started."""

    template_hash: str
    judge_model: str
    calls: int


def arm_call_judges(conn: Connection, hashes: Sequence[str], since: datetime) -> list[ArmJudgeCalls]:
    """The judge model of the calls routed since ``since``, by judge (successful, uncached
    calls, as :func:`arm_call_counts` counts them)."""
    c = llm_calls.c
    stmt = (select(c.template_hash, c.model, func.count()).where(
        c.created_at >= since, c.template_hash.in_(list(hashes)), c.status == "ok", c.cached == false())
        .group_by(c.template_hash, c.model).order_by(c.model, c.template_hash))
    return [ArmJudgeCalls(template_hash=h, judge_model=m, calls=int(n)) for h, m, n in conn.execute(stmt)]
