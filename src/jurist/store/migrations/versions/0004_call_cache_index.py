"""call cache: one index on (request_hash, status) for cached-reply lookups

Without it SQLite answered ``request_hash IN (...) AND status = 'ok'`` through
the status index, reading every successful call for each lookup.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21
"""
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_llm_calls_request_hash_status", "llm_calls", ["request_hash", "status"])
    op.drop_index("ix_llm_calls_request_hash", "llm_calls")  # the new index starts with request_hash


def downgrade() -> None:
    op.create_index("ix_llm_calls_request_hash", "llm_calls", ["request_hash"])
    op.drop_index("ix_llm_calls_request_hash_status", "llm_calls")
