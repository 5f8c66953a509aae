"""Queries of datasets and experiments (all their SQL), and the lock that keeps one run of an
experiment at a time.

* ``dataset_versions`` / ``dataset_items``: a named dataset's versions (by content hash,
  numbered 1, 2, ... as they were added) and each version's items in file order.
* ``experiments``: one row per experiment name, its :class:`ExperimentRecord` as payload.
* ``experiment_items``: one row per item of an experiment: ``answered`` while the target's
  answer is kept but not yet judged (a rerun judges it without generating it again), then
  ``scored`` or ``failed`` with its :class:`ExperimentItem`.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import JsonValue
from sqlalchemy import case, delete, func, insert, select, text, update
from sqlalchemy.engine import Connection, Engine, RowMapping

from jurist.errors import InputError
from jurist.experiments.records import DatasetItem, DatasetVersion, ExperimentItem, ExperimentRecord
from jurist.store.locks import FileLock
from jurist.store.queries import conflict_insert
from jurist.store.tables import dataset_items, dataset_versions, experiment_items, experiments

MAX_EXPERIMENTS_READ = 1000
DONE = ("scored", "failed")  # an item's statuses once it has its ExperimentItem (before: answered)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version_of(row: RowMapping) -> DatasetVersion:
    return DatasetVersion(dataset=row["dataset"], dataset_version=row["version"], number=row["number"],
                          items=row["items"], source=row["source"], created_at=_iso(row["created_at"]))


# -- datasets ----------------------------------------------------------------------------
def add_dataset_version(conn: Connection, dataset: str, version: str, items: list[DatasetItem],
                        source: str | None) -> tuple[DatasetVersion, bool]:
    """Store a dataset version with its items unless that name already has that version;
    return the version and whether it is new."""
    found = get_dataset_version(conn, dataset, version)
    if found is not None:
        return found, False
    number = conn.execute(select(func.coalesce(func.max(dataset_versions.c.number), 0))
                          .where(dataset_versions.c.dataset == dataset)).scalar_one() + 1
    at = _now()
    conn.execute(insert(dataset_versions).values(dataset=dataset, version=version, number=number, items=len(items),
                                                 source=source, created_at=at))
    if items:
        conn.execute(insert(dataset_items), [
            {"dataset": dataset, "version": version, "seq": i, "item_id": item.id,
             "payload": item.model_dump(mode="json")}
            for i, item in enumerate(items)])
    return DatasetVersion(dataset=dataset, dataset_version=version, number=number, items=len(items), source=source,
                          created_at=_iso(at)), True


def get_dataset_version(conn: Connection, dataset: str, version: str | None = None) -> DatasetVersion | None:
    """A dataset's version: the one named (its hash, or its number), else the latest; None: no such."""
    q = select(dataset_versions).where(dataset_versions.c.dataset == dataset)
    if version is None:
        q = q.order_by(dataset_versions.c.number.desc()).limit(1)
    elif version.isdigit() and len(version) < 9:
        q = q.where(dataset_versions.c.number == int(version))
    else:
        q = q.where(dataset_versions.c.version == version)
    row = conn.execute(q).mappings().first()
    return _version_of(row) if row is not None else None


def list_dataset_versions(conn: Connection, dataset: str | None = None) -> list[DatasetVersion]:
    """Every version of ``dataset`` (None: of every dataset), by name, then oldest first."""
    q = select(dataset_versions).order_by(dataset_versions.c.dataset, dataset_versions.c.number)
    if dataset is not None:
        q = q.where(dataset_versions.c.dataset == dataset)
    return [_version_of(r) for r in conn.execute(q).mappings()]


def get_dataset_items(conn: Connection, dataset: str, version: str) -> list[DatasetItem]:
    """A dataset version's items, in file order."""
    rows = conn.execute(select(dataset_items.c.payload)
                        .where(dataset_items.c.dataset == dataset, dataset_items.c.version == version)
                        .order_by(dataset_items.c.seq)).scalars()
    return [DatasetItem.model_validate(r) for r in rows]


# -- experiments -------------------------------------------------------------------------
def save_experiment(conn: Connection, record: ExperimentRecord) -> None:
    """Insert or replace an experiment's record."""
    values: dict[str, Any] = dict(dataset=record.dataset, dataset_version=record.dataset_version,
                                  target=record.target, status=record.status, updated_at=_now(),
                                  payload=record.model_dump(mode="json"))
    done = conn.execute(update(experiments).where(experiments.c.name == record.name).values(**values))
    if done.rowcount == 0:
        conn.execute(insert(experiments).values(name=record.name, created_at=values["updated_at"], **values))


def get_experiment(conn: Connection, name: str) -> ExperimentRecord | None:
    payload = conn.execute(select(experiments.c.payload).where(experiments.c.name == name)).scalar_one_or_none()
    return ExperimentRecord.model_validate(payload) if payload is not None else None


def list_experiments(conn: Connection, dataset: str | None = None,
                     limit: int = MAX_EXPERIMENTS_READ) -> list[ExperimentRecord]:
    """Experiments, newest first (of one dataset when given)."""
    q = select(experiments.c.payload).order_by(experiments.c.created_at.desc(), experiments.c.name).limit(limit)
    if dataset is not None:
        q = q.where(experiments.c.dataset == dataset)
    return [ExperimentRecord.model_validate(p) for p in conn.execute(q).scalars()]


def get_experiment_items(conn: Connection, name: str) -> list[ExperimentItem]:
    """An experiment's finished items (scored or failed), by item id."""
    rows = conn.execute(select(experiment_items.c.payload)
                        .where(experiment_items.c.experiment == name, experiment_items.c.status.in_(DONE))
                        .order_by(experiment_items.c.item_id)).scalars()
    return [ExperimentItem.model_validate(p) for p in rows]


@dataclass(frozen=True)
class ExperimentTally:
    """An experiment's items counted in the store, without reading them: ``items`` every row
    (``answered`` ones included), ``scored`` / ``failed`` the finished ones, ``judged`` those with
    a pass/fail and ``passed`` those that passed, ``cost_usd`` the sum of the finished items' known
    costs (None: none known) and ``cost_unknown`` the finished items whose cost is not known."""

    items: int = 0
    scored: int = 0
    failed: int = 0
    judged: int = 0
    passed: int = 0
    cost_usd: float | None = None
    cost_unknown: int = 0

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None


def experiment_tallies(conn: Connection, names: list[str]) -> dict[str, ExperimentTally]:
    """Each named experiment's :class:`ExperimentTally`, in one grouped query (an experiment
    without items: a tally of zeros)."""
    if not names:
        return {}
    c = experiment_items.c
    passed = c.payload["passed"].as_boolean()
    done = c.status.in_(DONE)

    def count(condition: Any) -> Any:
        return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)

    q = (select(c.experiment, func.count().label("items"), count(c.status == "scored").label("scored"),
                count(c.status == "failed").label("failed"), count(done & passed.is_not(None)).label("judged"),
                count(done & passed.is_(True)).label("passed"),
                func.sum(case((done, c.cost_usd), else_=None)).label("cost_usd"),
                count(done & c.cost_usd.is_(None)).label("cost_unknown"))
         .where(c.experiment.in_(sorted(set(names)))).group_by(c.experiment))
    found = {r.experiment: ExperimentTally(items=int(r.items), scored=int(r.scored), failed=int(r.failed),
                                           judged=int(r.judged), passed=int(r.passed),
                                           cost_usd=float(r.cost_usd) if r.cost_usd is not None else None,
                                           cost_unknown=int(r.cost_unknown))
             for r in conn.execute(q)}
    return {n: found.get(n, ExperimentTally()) for n in names}


def item_states(conn: Connection, name: str) -> dict[str, tuple[str, dict[str, JsonValue] | None]]:
    """Each item of an experiment that has a row: its status (answered | scored | failed) and,
    while it is answered, the kept generation."""
    rows = conn.execute(select(experiment_items.c.item_id, experiment_items.c.status, experiment_items.c.answer)
                        .where(experiment_items.c.experiment == name))
    return {r.item_id: (r.status, r.answer) for r in rows}


_ITEM_VALUES = ("status", "answer", "evaluation_id", "cost_usd", "payload", "updated_at")


@functools.cache
def _item_upsert(dialect: str) -> Any:
    """``INSERT ... ON CONFLICT (experiment, item_id) DO UPDATE`` of an item's row, built once (each
    item is written two or three times a run); None for a database without it."""
    dialect_insert = conflict_insert(dialect)
    if dialect_insert is None:  # pragma: no cover - jurist ships SQLite and PostgreSQL drivers only
        return None
    stmt = dialect_insert(experiment_items)
    return stmt.on_conflict_do_update(index_elements=[experiment_items.c.experiment, experiment_items.c.item_id],
                                      set_={k: stmt.excluded[k] for k in _ITEM_VALUES})


def _put_item(conn: Connection, name: str, item_id: str, values: dict[str, Any]) -> None:
    values["updated_at"] = _now()
    upsert = _item_upsert(conn.dialect.name)
    if upsert is not None:
        conn.execute(upsert, {"experiment": name, "item_id": item_id, **values})
        return
    done = conn.execute(update(experiment_items).where(experiment_items.c.experiment == name,  # pragma: no cover
                                                       experiment_items.c.item_id == item_id).values(**values))
    if done.rowcount == 0:  # pragma: no cover
        conn.execute(insert(experiment_items).values(experiment=name, item_id=item_id, **values))


def save_answer(conn: Connection, name: str, item_id: str, answer: dict[str, JsonValue]) -> None:
    """Keep an item's generation (status ``answered``) until it is judged."""
    _put_item(conn, name, item_id, {"status": "answered", "answer": answer, "evaluation_id": None,
                                    "cost_usd": None, "payload": None})


def save_item(conn: Connection, item: ExperimentItem) -> None:
    """An item's result (scored or failed), replacing what the item had."""
    _put_item(conn, item.experiment, item.item_id, {"status": item.status, "answer": None,
                                                    "evaluation_id": item.evaluation_id, "cost_usd": item.cost_usd,
                                                    "payload": item.model_dump(mode="json")})


def delete_experiment(conn: Connection, name: str) -> bool:
    """Remove an experiment and its items; False if there was none."""
    conn.execute(delete(experiment_items).where(experiment_items.c.experiment == name))
    return conn.execute(delete(experiments).where(experiments.c.name == name)).rowcount > 0


# -- one run of an experiment at a time --------------------------------------------------
def _pg_key(name: str) -> int:
    """The advisory lock key of an experiment name (a signed 64-bit integer)."""
    digest = hashlib.sha256(f"jurist-experiment\0{name}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class ExperimentLock:
    """Held while an experiment runs, so a second run of the same name is refused.

    On a SQLite file, an OS lock on a file beside the database (``<db>.experiment-<name>.lock``);
    on PostgreSQL, a session advisory lock on a connection held for the run. Both end with the
    process that holds them, ``kill -9`` included: a later run takes the lock over. An
    in-memory SQLite store is one process's: the lock is within the process.
    """

    _memory: set[tuple[int, str]] = set()

    def __init__(self, engine: Engine, name: str) -> None:
        self.engine = engine
        self.name = name
        self._file: FileLock | None = None
        self._conn: Connection | None = None
        self._memory_key: tuple[int, str] | None = None

    def acquire(self) -> None:
        """Take the lock at once or raise an InputError saying who holds it."""
        dialect = self.engine.dialect.name
        busy = f"the experiment {self.name!r} is being run by {{}}; wait until that run ends (a rerun then " \
               "resumes it), or give another --name"
        if dialect == "postgresql":
            conn = self.engine.connect()
            try:
                taken = conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": _pg_key(self.name)}).scalar()
                conn.commit()
            except BaseException:
                conn.close()
                raise
            if not taken:
                conn.close()
                raise InputError(busy.format("another process (it holds the experiment's lock in PostgreSQL)"))
            self._conn = conn
            return
        database = self.engine.url.database
        if dialect != "sqlite" or not database or database == ":memory:":
            key = (id(self.engine), self.name)
            if key in self._memory:
                raise InputError(busy.format("this process"))
            self._memory.add(key)
            self._memory_key = key
            return
        lock = FileLock(Path(f"{database}.experiment-{self.name}.lock"))
        if not lock.acquire(timeout=0):
            raise InputError(busy.format(lock.holder()))
        self._file = lock

    def release(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            try:
                conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _pg_key(self.name)})
                conn.commit()
            finally:
                conn.close()
        if self._file is not None:
            lock, self._file = self._file, None
            lock.release()
        if self._memory_key is not None:
            self._memory.discard(self._memory_key)
            self._memory_key = None

