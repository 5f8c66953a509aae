"""The store's schema: Alembic migrations that complete or leave nothing, one process at a time.

* All migrations up to the head run in one transaction. PostgreSQL's DDL is
  transactional as it comes; Python's sqlite3 driver would commit each
  ``CREATE`` on its own, so on SQLite the migration runs on a connection where
  jurist opens the transaction itself (``BEGIN IMMEDIATE``). A process killed
  halfway leaves the database as it was.
* Processes opening a new store at once take turns: a lock file next to a
  SQLite database (``<file>.lock``, removed when done), a transaction-scoped
  advisory lock on PostgreSQL. Whoever comes second finds the schema up to
  date and migrates nothing.
* jurist migrates only a database that is empty or already its own (its
  ``alembic_version`` table names one of jurist's migrations). Another
  application's database, or a database shared with one, is refused
  (ConfigError, naming the tables found) before anything is created or dropped.
* A SQLite store that an earlier jurist left half-migrated on its first run
  (some of jurist's tables, with jurist's columns, no schema version, no rows)
  is cleared and migrated again.
* An up-to-date store costs one query: the lock and Alembic are for the rest.
"""

from __future__ import annotations

from importlib.resources import files
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, inspect, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError

from jurist.errors import ConfigError
from jurist.store.locks import FileLock, pg_transaction_lock
from jurist.store.tables import metadata

# The newest migration in migrations/versions (a test keeps the two in step).
SCHEMA_HEAD = "0011"
# jurist's migrations: a schema version that is none of these is another application's.
REVISIONS = frozenset(p.name[:4] for p in (files("jurist.store") / "migrations" / "versions").iterdir()
                      if p.name[:4].isdigit())
# Columns migrations added to a table after creating it: a table left by a first
# migration of an earlier version may lack them.
_ADDED_LATER = {"evaluations": {"passed", "escalated", "iterations", "failure", "max_attempts_hit"},
                "llm_calls": {"usage_known", "cost_usd", "cost_note"},
                "checklist_evaluations": {"undecided"}}
MIGRATIONS = str(files("jurist.store") / "migrations")

_PG_LOCK_KEY = 0x6A75726973740001  # "jurist" + 1: the advisory lock that serialises migrations
_LOCK_WAIT = 120.0  # seconds to wait for another process's migration
_SQLITE_TRIES = 3  # a SQLite lock conflict while two processes open a new store is tried again


def migrate(engine: Engine) -> None:
    """Bring the database's schema to :data:`SCHEMA_HEAD`; a ConfigError says why it could not."""
    if schema_version(engine) == SCHEMA_HEAD:
        return
    try:
        if engine.dialect.name == "sqlite":
            for attempt in range(_SQLITE_TRIES):
                try:
                    _migrate_sqlite(engine)
                    break
                except OperationalError:  # "database is locked": another process opening the new file
                    if schema_version(engine) == SCHEMA_HEAD:  # ... has migrated it meanwhile
                        break
                    if attempt == _SQLITE_TRIES - 1:
                        raise
                    engine.dispose()  # a fresh connection (its pragmas again) for the next try
                    time.sleep(0.2 * (attempt + 1))
        else:
            with engine.begin() as conn:
                if engine.dialect.name == "postgresql":
                    pg_transaction_lock(conn, _PG_LOCK_KEY)
                _check_ours(conn)
                _upgrade(conn)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"cannot open the database {engine.url.render_as_string(hide_password=True)}: {exc}. "
            "Check --db, JURIST_DATABASE_URL or database_url in jurist.yaml."
        ) from None


def schema_version(engine: Engine) -> str | None:
    """The migration the database is at; None if it has none yet (or cannot be read)."""
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    except Exception:  # no table yet, or no database: the migration (and its errors) will speak
        return None


def _migrate_sqlite(engine: Engine) -> None:
    database = engine.url.database
    lock = None
    if database and database != ":memory:" and not database.startswith("file:"):
        lock = FileLock(Path(database).with_name(Path(database).name + ".lock"))
        if not lock.acquire(timeout=_LOCK_WAIT):
            raise ConfigError(f"the store {database} has been migrated by {lock.holder()} for over "
                              f"{_LOCK_WAIT:g} s; if that process is stuck, stop it and try again")
    try:
        with engine.connect() as conn:
            raw: Any = conn.connection.dbapi_connection
            level = raw.isolation_level
            raw.isolation_level = None  # the driver leaves every statement, DDL too, to our transaction
            try:
                with conn.begin():
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                    _check_ours(conn)
                    _clear_partial_first_migration(conn)
                    _upgrade(conn)
            finally:
                raw.isolation_level = level
    finally:
        if lock is not None:
            lock.release()


def _version(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def _upgrade(conn: Connection) -> None:
    """Run the migrations missing on ``conn``, in the caller's transaction."""
    if _version(conn) == SCHEMA_HEAD:
        return  # another process migrated while this one waited for the lock
    from alembic import command
    from alembic.config import Config as AlembicConfig

    cfg = AlembicConfig()
    cfg.set_main_option("script_location", MIGRATIONS)
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")


def _check_ours(conn: Connection) -> None:
    """Refuse a database that is neither empty nor jurist's, before anything is changed."""
    version = _version(conn)
    if version is not None:
        if version not in REVISIONS:
            raise ConfigError(
                f"the database's schema version (table alembic_version) is {version!r}, not one of jurist's "
                f"(0001 to {SCHEMA_HEAD}): it belongs to another application, or to a newer jurist. jurist changes "
                "nothing in it: give jurist a database of its own (--db), or upgrade jurist")
        return
    inspector = inspect(conn)
    present = sorted(set(inspector.get_table_names()) - {"alembic_version"})
    foreign = [name for name in present if not _left_by_jurist(inspector, name)]
    if foreign:
        shown = ", ".join(present[:20]) + (f" and {len(present) - 20} more" if len(present) > 20 else "")
        raise ConfigError(
            f"the database is not jurist's: it has no jurist schema version and holds the tables {shown}. "
            "jurist creates its tables only in an empty database or its own store, and changes nothing here: "
            "give it a database of its own (--db, JURIST_DATABASE_URL or database_url in jurist.yaml)")


def _left_by_jurist(inspector: Any, name: str) -> bool:
    """A table with a name and columns of jurist's (an earlier first migration's, stopped halfway)."""
    table = metadata.tables.get(name)
    if table is None:
        return False
    columns = {c["name"] for c in inspector.get_columns(name)}
    ours = {c.name for c in table.columns}
    return columns <= ours and ours - columns <= _ADDED_LATER.get(name, set())


def _clear_partial_first_migration(conn: Connection) -> None:
    """Drop what a first migration killed halfway left behind (earlier versions ran SQLite's DDL
    outside a transaction): jurist's tables with no schema version and no rows."""
    if _version(conn) is not None:
        return
    present = set(inspect(conn).get_table_names())
    left = [t for t in reversed(metadata.sorted_tables) if t.name in present]
    if not left:
        return
    holding = [t.name for t in left if conn.execute(select(func.count()).select_from(t)).scalar()]
    if holding:
        raise ConfigError(f"the database has jurist's tables with rows ({', '.join(holding)}) but no schema "
                          "version (table alembic_version); restore it from a backup, or give jurist a new "
                          "database")
    for table in left:
        conn.exec_driver_sql(f'DROP TABLE "{table.name}"')
