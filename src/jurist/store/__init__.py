"""Persistence: tables, queries (all SQL) and Alembic migrations."""

from jurist.store.store import Store, normalise_url

__all__ = ["Store", "normalise_url"]
