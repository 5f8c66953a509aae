"""Persistence: tables, queries (all SQL) and Alembic migrations."""

from jurist.store.rows import EvaluationRow, StoredPayload, evaluation_values
from jurist.store.store import Store, normalise_url

__all__ = ["EvaluationRow", "Store", "StoredPayload", "evaluation_values", "normalise_url"]
