"""The Store: one database (SQLite file or PostgreSQL), migrated on open.

Writes never block the event loop: ``record_call`` and ``save_evaluation``
put rows on a queue that one background thread writes in batches, one
transaction per batch. Reads used on the event loop (the judge-call cache)
run in a worker thread. ``flush()`` waits until everything queued is written;
``asave_evaluation`` and ``aqueue_write`` return once their rows are committed (the
batches write a result file only then). The database takes what PostgreSQL takes, on SQLite
too: JSON columns finite numbers only (no NaN, no infinity) and no value a NUL
character (an InputError before anything is written; a queued record of a call or an
evaluation is kept instead, each NUL stored as U+FFFD, and stderr says so). Connecting to a
PostgreSQL server gives up after ``CONNECT_TIMEOUT_S`` (``?connect_timeout=N``
in the URL sets another). A closed store refuses every call at once.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import sys
import threading
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Concatenate, Iterable, Mapping, ParamSpec, TypeVar

from pydantic import BaseModel
from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Connection, Engine, ExceptionContext, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, SAWarning

from jurist.errors import ConfigError, InputError, StoreError
from jurist.experiments.records import DatasetItem, DatasetVersion, ExperimentItem, ExperimentRecord
from jurist.models.base import CallRecord
from jurist.models.model import CachedReply
from jurist.models.messages import openai_messages
from jurist.store import experiments as experiment_queries
from jurist.store import queries
from jurist.store.experiments import ExperimentLock
from jurist.store.checklist_rows import (ChecklistEvaluationRow, ChecklistMessageRow, ChecklistPointRow,
                                         ChecklistSessionRow, FsrsCardRow)
from jurist.store.migrate import migrate
from jurist.store.rows import EvaluationRow, EvaluationValues, ScoreValues, evaluation_values
from jurist.store.stored import StoredEvaluation, StoredScore

_BATCH = 500
_STOP = object()
# How long the background threads wait for more work before a round trip:
# writes and cache lookups then go to the database many at a time.
_WRITE_LINGER = 0.05
LOOKUP_LINGER = 0.002
# For batch runs: a lookup comes before the request takes a limiter slot, so
# waiting longer costs no throughput, and one query then answers several calls.
BATCH_LOOKUP_LINGER = 0.01

# Seconds to wait for a PostgreSQL server to answer a connection (libpq's connect_timeout):
# a port where nothing speaks PostgreSQL fails in this time, not never.
CONNECT_TIMEOUT_S = 10
NUL_REFUSED = ("a NUL character (\\u0000) cannot be stored (PostgreSQL stores none, and jurist's SQLite store "
               "refuses it too): remove it from the text")

# A NUL in encoded JSON: the escape \u0000 after an even number of backslashes.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")

P = ParamSpec("P")
T = TypeVar("T")
QueuedWrite = Callable[[Connection], None]  # a write run by the writer thread, in its batch's transaction


def normalise_url(url: str) -> str:
    """Accept the URL spellings people use; pick the drivers jurist ships with."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def connect_args(url: str | URL) -> dict[str, Any]:
    """The driver's connection options jurist adds: a connect time-out for PostgreSQL, unless the URL sets one."""
    parsed = make_url(url) if isinstance(url, str) else url
    if parsed.get_backend_name() == "postgresql" and "connect_timeout" not in parsed.query:
        return {"connect_timeout": CONNECT_TIMEOUT_S}
    return {}


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _evaluation_rows(evaluation: EvaluationRow | Mapping[str, Any],
                     score_rows: list[ScoreValues]) -> tuple[EvaluationValues, list[ScoreValues]]:
    values = evaluation_values(evaluation)
    values.setdefault("created_at", _utcnow())
    evaluation_id = values["id"]
    if not isinstance(evaluation_id, str):
        raise TypeError(f"an evaluation's id is a string, not {evaluation_id!r}")
    return values, [dict(r, evaluation_id=evaluation_id) for r in score_rows]


class Store:
    """Persistence for calls, evaluations and scores."""

    def __init__(self, url: str, *, lookup_linger: float = LOOKUP_LINGER) -> None:
        """Open (and migrate) the database at ``url``. Cache lookups are gathered
        for ``lookup_linger`` seconds into one query (``BATCH_LOOKUP_LINGER``
        suits batch runs; the default, interactive calls), except that an interactive
        lookup in a SQLite file is read at once (:meth:`cached_reply`)."""
        self.url = normalise_url(url)
        try:
            self.url.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(f"cannot use database {self.url!a}: the URL holds a lone surrogate, half of a "
                              "character, not text") from None
        if self.url.startswith("sqlite:///") and self.url != "sqlite:///:memory:":
            folder = Path(self.url[len("sqlite:///") :]).parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise ConfigError(f"cannot use database {self.url!r}: cannot make its folder {folder}: "
                                  f"{reason}") from None
        try:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always", SAWarning)
                self.engine: Engine = create_engine(self.url, future=True, json_serializer=_strict_json,
                                                    connect_args=connect_args(self.url))
        except Exception as exc:  # bad URL or missing driver
            raise ConfigError(f"cannot use database {self.url!r}: {exc}") from None
        ignored = [str(w.message).split(" and are being ignored")[0] for w in said
                   if "are not accepted" in str(w.message)]
        if ignored:  # an option the driver would ignore (SQLite: ?connect_timeout=) is not taken silently
            self.engine.dispose()
            raise ConfigError(f"cannot use database {self.url!r}: {ignored[0]}; remove it from the URL")
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        event.listen(self.engine, "before_cursor_execute", _refuse_nul)
        event.listen(self.engine, "handle_error", _input_errors_as_raised)
        self._closed = False
        try:
            if self.engine.dialect.name != "sqlite":
                _connect(self.engine)
            migrate(self.engine)
        except BaseException:
            self.engine.dispose()
            raise
        self._queue = WorkQueue(_WRITE_LINGER)
        self._errors: list[str] = []
        self._writer = threading.Thread(target=self._write_loop, name="jurist-store-writer", daemon=True)
        self._writer.start()
        self._lookups = WorkQueue(lookup_linger)
        # A SQLite file answers an indexed read in well under a millisecond, and its readers never
        # wait for its writer (WAL): less than a hand-over to the reader thread and back costs the
        # event loop (two turns of the loop, and the thread's wait for the interpreter, while the
        # loop is busy: 5 to 20 ms a lookup under load, on the path of every judged answer).
        self._inline_lookups = (lookup_linger <= LOOKUP_LINGER and self.url.startswith("sqlite:///")
                                and self.url != "sqlite:///:memory:")
        self._reader = threading.Thread(target=self._read_loop, name="jurist-store-reader", daemon=True)
        self._reader.start()

    def _check_open(self) -> None:
        """A closed store's threads have stopped: what is queued now would wait for ever."""
        if self._closed:
            from jurist.config import shown_url

            raise StoreError(f"the store {shown_url(self.url)} is closed: nothing more can be written to it or "
                             "read from it (open a new Store, or close it after the work that uses it)")

    # -- writes (queued) ---------------------------------------------------
    def record_call(self, record: CallRecord) -> None:
        """Queue one LLM call for writing; returns at once."""
        self._check_open()
        row = dict(vars(record))  # shallow: the params are not copied
        row["messages"] = openai_messages(record.messages)
        row["created_at"] = row["created_at"] or _utcnow()
        self._queue.put(("call", row))

    def save_evaluation(self, evaluation: EvaluationRow | Mapping[str, Any],
                        score_rows: list[ScoreValues]) -> None:
        """Queue one evaluation (a typed row, or its columns) with its per-item scores; returns at once."""
        self._check_open()
        self._queue.put(("evaluation", *_evaluation_rows(evaluation, score_rows)))

    def save_evaluation_once(self, evaluation: EvaluationRow | Mapping[str, Any],
                             score_rows: list[ScoreValues]) -> None:
        """Like :meth:`save_evaluation`, for an evaluation whose id is derived from
        what it evaluates: if a row with that id exists, nothing is written."""
        self._check_open()
        self._queue.put(("evaluation_once", *_evaluation_rows(evaluation, score_rows), None, None))

    async def asave_evaluation(self, evaluation: EvaluationRow | Mapping[str, Any],
                               score_rows: list[ScoreValues], *, then: QueuedWrite | None = None,
                               urgent: bool = True) -> None:
        """Write one evaluation with its scores, unless a row with its id exists (as
        :meth:`save_evaluation_once`), and return once it is committed, with what else
        was queued before it (the calls behind it). Evaluations saved at once share one
        transaction. ``then(conn)``, if given, runs in the same transaction after the
        evaluation is written (a row that must not exist without it). ``urgent``: wake the
        writer at once; otherwise the write waits for the writer's linger, so that the saves
        of many items share a transaction (saves made in the background). Raises StoreError
        if it could not be written."""
        self._check_open()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queue.put(("evaluation_once", *_evaluation_rows(evaluation, score_rows), (loop, done), then),
                        urgent=urgent)
        await done

    async def aqueue_write(self, fn: QueuedWrite, *, urgent: bool = False) -> None:
        """Run ``fn(conn)`` in the writer's next transaction, after the calls and evaluations queued
        with it and after the writes queued before it, and return once it is committed (durable).
        Many writes queued at once share one transaction (``urgent``: wake the writer at once rather
        than after its linger). Raises StoreError if it could not be written (one failing write does
        not fail the others)."""
        self._check_open()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queue.put(("write", fn, (loop, done)), urgent=urgent)
        await done

    def flush(self) -> None:
        """Block until everything queued so far is written; raise if a write failed (StoreError
        at once on a closed store: its writer has stopped)."""
        self._check_open()
        self._flush()

    def _flush(self) -> None:
        done = threading.Event()
        self._queue.put(("flush", done), urgent=True)
        done.wait()
        if self._errors:
            errors, self._errors = self._errors, []
            raise StoreError("could not write to the store: " + "; ".join(errors[:3]))

    async def aflush(self) -> None:
        await asyncio.to_thread(self.flush)

    async def aclose(self) -> None:
        """:meth:`close` from async code: the last writes finish off the event loop."""
        await asyncio.to_thread(self.close)

    @classmethod
    async def aopen(cls, url: str, **options: Any) -> "Store":
        """Open (and migrate) off the event loop; ``options`` as for the constructor."""
        return await asyncio.to_thread(lambda: cls(url, **options))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._flush()
        finally:
            self._queue.put(_STOP, urgent=True)
            self._lookups.put(_STOP, urgent=True)
            self._writer.join(timeout=30)
            self._reader.join(timeout=30)
            self.engine.dispose()

    def _write_loop(self) -> None:
        while True:
            batch = self._queue.take()
            stop = False
            pending: list[Any] = []
            waiters: list[threading.Event] = []
            for it in batch:
                if it is _STOP:
                    stop = True
                elif it[0] == "flush":
                    waiters.append(it[1])
                else:
                    pending.append(it)
            if pending:
                self._write(pending)
            for w in waiters:
                w.set()
            if stop:
                return

    def _write(self, items: list[Any]) -> None:
        try:
            self._insert(items)
        except Exception:
            # One bad row must not cost the rest of the batch: write one by one.
            for item in items:
                try:
                    try:
                        self._insert([item])
                    except InputError as exc:
                        if str(exc) != NUL_REFUSED or item[0] == "write":  # a write's values are its own
                            raise
                        # A record of what happened (a call, an evaluation) is kept: each NUL in it,
                        # from a model's reply or a client's message, is stored as U+FFFD, and said.
                        self._insert([_nul_replaced(item)])
                        print(f"jurist: a NUL character in a {item[0]} record was stored as U+FFFD",
                              file=sys.stderr)
                except Exception as exc:  # keep the process alive; report to its waiter, or on flush
                    message = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                    if not _notify(item, StoreError(f"could not write to the store: {message}")):
                        self._errors.append(message)
                        print(f"jurist: store write failed: {message}", file=sys.stderr)
                else:
                    _notify(item, None)
        else:
            for item in items:
                _notify(item, None)

    def _insert(self, items: list[Any]) -> None:
        calls = [it[1] for it in items if it[0] == "call"]
        evals = [it[1] for it in items if it[0] == "evaluation"]
        score_rows = [r for it in items if it[0] == "evaluation" for r in it[2]]
        with self.engine.begin() as conn:
            queries.insert_history(conn, evals, score_rows, calls)
            once = [(it[1], it[2]) for it in items if it[0] == "evaluation_once"]
            if once:
                queries.insert_evaluations_once(conn, once)
            for it in items:  # in the order queued, after the rows they may follow
                if it[0] == "write":
                    it[1](conn)
                elif it[0] == "evaluation_once" and it[4] is not None:
                    it[4](conn)

    # -- reads -------------------------------------------------------------
    async def cached_reply(self, request_hash: str) -> CachedReply | None:
        """The latest successful answer to an identical request, if any.

        Lookups are answered by one reader thread, many per query, so a batch
        with thousands of calls in flight pays one round trip per group; an
        interactive lookup in a SQLite file is read at once, in the caller's thread.
        A lookup that fails is a cache miss, said on stderr.
        """
        self._check_open()
        if self._inline_lookups:
            return self._found(queries.cached_reply, request_hash).get(request_hash)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[CachedReply | None] = loop.create_future()
        self._lookups.put((request_hash, fut, loop))
        return await fut

    def _read_loop(self) -> None:
        while True:
            batch = self._lookups.take()
            if _STOP in batch:
                _answer_all([b for b in batch if b is not _STOP], {})
                return
            _answer_all(batch, self._found(queries.cached_replies, {h for h, _, _ in batch}))

    def _found(self, query: Callable[[Connection, T], dict[str, CachedReply]], hashes: T) -> dict[str, CachedReply]:
        """The cached replies ``query`` finds for ``hashes``; none when the lookup fails (a cache
        miss, said once)."""
        try:
            return self.read(query, hashes)
        except Exception as exc:
            print(f"jurist: cache lookup failed, calling the model instead: {exc}", file=sys.stderr)
            return {}

    def calls(self, **filters: Any) -> list[dict[str, Any]]:
        """Recorded LLM calls, newest first (see :func:`queries.list_calls`)."""
        return self.read(queries.list_calls, **filters)

    def evaluations(self, **filters: Any) -> list[dict[str, Any]]:
        return self.read(queries.list_evaluations, **filters)

    def evaluation_ids(self, ids: Iterable[str]) -> set[str]:
        """Which of these evaluation ids are stored."""
        return self.read(queries.existing_evaluation_ids, ids)

    def evaluation(self, evaluation_id: str, kind: str | None = None) -> StoredEvaluation | None:
        """One evaluation row by id (and kind), or None."""
        row = self.read(queries.get_evaluation, evaluation_id, kind)
        return StoredEvaluation.of(row) if row is not None else None

    def scores_of(self, evaluation_id: str) -> list[StoredScore]:
        """An evaluation's score rows, in the order written."""
        return [StoredScore.of(r) for r in self.read(queries.scores_of, evaluation_id)]

    def write(self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one write query function (``fn(conn, *args, **kwargs)``) in its own transaction, now."""
        with self.engine.begin() as conn:
            return fn(conn, *args, **kwargs)

    async def awrite(self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """:meth:`write` off the event loop; durable when it returns."""
        return await asyncio.to_thread(lambda: self.write(fn, *args, **kwargs))

    def read(self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run one read query function (``fn(conn, *args, **kwargs)``) on a connection."""
        with self.engine.connect() as conn:
            return fn(conn, *args, **kwargs)

    async def aread(self, fn: Callable[Concatenate[Connection, P], T], *args: P.args, **kwargs: P.kwargs) -> T:
        """:meth:`read` off the event loop (the server's and the analysis' reads)."""
        return await asyncio.to_thread(lambda: self.read(fn, *args, **kwargs))

    # -- continuous checklist (durable when the coroutine returns) -----------
    async def create_checklist_session(self, session: ChecklistSessionRow, points: list[ChecklistPointRow]) -> None:
        await self.awrite(queries.insert_checklist_session, session, points)

    async def add_checklist_message(self, message: ChecklistMessageRow) -> None:
        await self.awrite(queries.insert_checklist_message, message)

    async def record_checklist_evaluation(
        self, evaluation: ChecklistEvaluationRow, recalled: dict[str, float], at: datetime,
        summary: EvaluationRow | Mapping[str, Any] | None = None,
    ) -> None:
        """The evaluation of one user message and the points it recalled, in one transaction;
        ``summary`` is its ``evaluations`` row (kind ``checklist``), written in the same one."""
        await self.awrite(queries.record_checklist_evaluation, evaluation, recalled, at, summary)

    async def set_checklist_status(self, session_id: str, status: str, at: datetime) -> None:
        await self.awrite(queries.set_checklist_status, session_id, status, at)

    async def checklist_session(self, session_id: str) -> ChecklistSessionRow | None:
        return await self.awrite(queries.get_checklist_session, session_id)

    async def checklist_sessions(self, **filters: Any) -> list[ChecklistSessionRow]:
        return await self.aread(queries.list_checklist_sessions, **filters)

    async def checklist_points(self, session_id: str) -> list[ChecklistPointRow]:
        return await self.awrite(queries.checklist_point_states, session_id)

    async def checklist_messages(self, session_id: str) -> list[ChecklistMessageRow]:
        return await self.awrite(queries.list_checklist_messages, session_id)

    async def checklist_evaluations(self, session_id: str) -> list[ChecklistEvaluationRow]:
        return await self.awrite(queries.list_checklist_evaluations, session_id)

    async def fsrs_card(self, learner: str, deck: str, point_id: str) -> FsrsCardRow | None:
        return await self.awrite(queries.get_fsrs_card, learner, deck, point_id)

    async def save_fsrs_card(self, **card: Any) -> None:
        card.setdefault("updated_at", _utcnow())
        await self.awrite(queries.upsert_fsrs_card, FsrsCardRow.model_validate(card))

    async def fsrs_cards(
        self, learner: str, *, due_before: datetime | None = None, deck: str | None = None
    ) -> list[FsrsCardRow]:
        return await self.aread(queries.list_fsrs_cards, learner, due_before=due_before, deck=deck)

    # -- datasets and experiments (jurist.store.experiments) ------------------
    def add_dataset_version(self, dataset: str, version: str, items: list[DatasetItem],
                            source: str | None = None) -> tuple[DatasetVersion, bool]:
        """Store a dataset version (its items' content hash) unless the dataset has it; return it
        and whether it is new. Two processes adding versions of one dataset at once: the one that
        lost the race for the next number tries again once."""
        try:
            return self.write(experiment_queries.add_dataset_version, dataset, version, items, source)
        except IntegrityError:
            return self.write(experiment_queries.add_dataset_version, dataset, version, items, source)

    def dataset_version(self, dataset: str, version: str | None = None) -> DatasetVersion | None:
        """A dataset's version by hash or number (None: the latest); None if there is none."""
        return self.read(experiment_queries.get_dataset_version, dataset, version)

    def dataset_versions(self, dataset: str | None = None) -> list[DatasetVersion]:
        return self.read(experiment_queries.list_dataset_versions, dataset)

    def dataset_items(self, dataset: str, version: str) -> list[DatasetItem]:
        return self.read(experiment_queries.get_dataset_items, dataset, version)

    def experiment(self, name: str) -> ExperimentRecord | None:
        return self.read(experiment_queries.get_experiment, name)

    def experiments(self, dataset: str | None = None) -> list[ExperimentRecord]:
        """Experiments, newest first."""
        return self.read(experiment_queries.list_experiments, dataset)

    def experiment_items(self, name: str) -> list[ExperimentItem]:
        """An experiment's finished items (scored or failed), by item id."""
        return self.read(experiment_queries.get_experiment_items, name)

    def experiment_lock(self, name: str) -> ExperimentLock:
        """The lock that keeps one run of experiment ``name`` at a time (not yet taken)."""
        return experiment_queries.ExperimentLock(self.engine, name)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class WorkQueue:
    """Work for one background thread, taken in batches.

    After the first item the thread sleeps for the linger (items put meanwhile
    do not wake it: waking a thread per item costs more than the work when
    thousands arrive a second), then takes everything queued, at most
    ``_BATCH`` at a time. An urgent item (a flush or stop request) ends the
    sleep at once.
    """

    def __init__(self, linger: float) -> None:
        self.linger = linger
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()  # in C: no lock or condition in Python per put
        self._urgent = threading.Event()

    def put(self, item: Any, *, urgent: bool = False) -> None:
        self._queue.put(item)
        if urgent:
            self._urgent.set()

    def take(self) -> list[Any]:
        """Block for one item; return it with what else is queued after the linger."""
        batch = [self._queue.get()]
        if not self._urgent.is_set():
            self._urgent.wait(self.linger)
        self._urgent.clear()  # an urgent item put after this is taken now or by the next call
        while len(batch) < _BATCH:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch


def _notify(item: Any, error: BaseException | None) -> bool:
    """Tell whoever waits for a written item (:meth:`Store.asave_evaluation`,
    :meth:`Store.aqueue_write`) how it went; False if nobody waits for it."""
    waiter = item[3] if item[0] == "evaluation_once" else item[2] if item[0] == "write" else None
    if waiter is None:
        return False
    loop, done = waiter
    try:
        loop.call_soon_threadsafe(_settle, done, error)
    except RuntimeError:  # that event loop has closed; nobody is waiting
        pass
    return True


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():  # the waiter was cancelled: the row is written (or not) all the same
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


def _nul_replaced(value: Any) -> Any:
    """``value`` (a queued record: rows of strings, lists, mappings, models) with each NUL
    character replaced by U+FFFD, the replacement character."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, BaseModel):
        return _nul_replaced(value.model_dump(mode="json"))
    if isinstance(value, Mapping):
        return {k: _nul_replaced(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not (isinstance(value, tuple) and value and callable(
            getattr(value[-1], "set_result", None))):
        out = [_nul_replaced(v) for v in value]
        return tuple(out) if isinstance(value, tuple) else out
    return value


def _strict_json(value: Any) -> str:
    """JSON columns' encoder: what PostgreSQL takes, on every database (no NaN, no infinity, no NUL)."""
    text = json.dumps(value, allow_nan=False)
    if "\\u0000" in text and _JSON_NUL.search(text):
        raise InputError(NUL_REFUSED)
    return text


def _answer_all(batch: list[Any], found: Mapping[str, CachedReply]) -> None:
    """Resolve every waiting lookup of a batch with one wake-up per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
    for h, fut, loop in batch:
        by_loop.setdefault(loop, []).append((fut, found.get(h)))
    for loop, pairs in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve_all, pairs)
        except RuntimeError:  # that event loop has closed; nobody is waiting
            pass


def _resolve_all(pairs: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for fut, value in pairs:
        if not fut.done():
            fut.set_result(value)


def _connect(engine: Engine) -> None:
    """Connect once (the connection stays in the pool): a server that does not answer is a
    ConfigError naming it and the fix (a setting to correct: exit 2), after the connect
    time-out, not a hang."""
    from jurist.config import shown_url

    try:
        with engine.connect():
            pass
    except DBAPIError as exc:  # no answer, a refusal, or an option the driver refuses (connect_timeout=abc)
        shown = shown_url(engine.url.render_as_string(hide_password=False))
        reason = " ".join(str(exc.orig or exc).split()) or type(exc.orig or exc).__name__
        raise ConfigError(
            f"cannot connect to the database {shown}: {reason}. Check --db, JURIST_DATABASE_URL or database_url "
            "in jurist.yaml: it must name a running PostgreSQL server (host, port, database); a server slower to "
            f"answer than {CONNECT_TIMEOUT_S} s is given longer with ?connect_timeout=SECONDS in the URL"
        ) from None


def _refuse_nul(_conn: Any, _cursor: Any, _statement: str, parameters: Any, _context: Any,
                executemany: bool) -> None:
    """Every statement's text parameters, before the driver: a NUL is an InputError on every
    database (JSON values are checked as they are encoded, by :func:`_strict_json`). Many rows
    inserted by one statement (``INSERT ... VALUES (...), (...) RETURNING``) come as one flat
    sequence of values, with ``executemany`` set."""
    rows = parameters if executemany else [parameters]
    for row in rows:
        values = row.values() if isinstance(row, Mapping) else row if isinstance(row, (list, tuple)) else (row,)
        if any(isinstance(v, str) and "\x00" in v for v in values or ()):
            raise InputError(NUL_REFUSED)


def _input_errors_as_raised(context: ExceptionContext) -> BaseException | None:
    """An InputError raised while a statement was prepared (a JSON value's NUL) is raised as
    it is, not wrapped in SQLAlchemy's StatementError."""
    if isinstance(context.original_exception, InputError):
        return context.original_exception
    return None


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA busy_timeout=10000")  # first: switching to WAL waits for other processes too
    # WAL stays with the file: only for a new database or jurist's own (another application's
    # file is refused by the migration and left as it was).
    cur.execute("SELECT count(*), sum(name = 'alembic_version') FROM sqlite_master WHERE type = 'table'")
    tables, versioned = cur.fetchone()
    if not tables or versioned:
        cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
