"""usage_known: whether the endpoint reported a call's token usage

A stream from a server that sends no usage leaves a call's tokens unknown, not 0.
Rows stored before the column said so with ``"usage": "not reported"`` in their
params; they are filled from it (the params stay as they were).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

NOT_REPORTED = "not reported"  # what params.usage held for such a call before this column


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("usage_known", sa.Boolean, nullable=False, server_default=sa.true()))
    calls = sa.table("llm_calls", sa.column("params", sa.JSON), sa.column("usage_known", sa.Boolean))
    op.get_bind().execute(sa.update(calls).where(calls.c.params["usage"].as_string() == NOT_REPORTED)
                          .values(usage_known=False))


def downgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("usage_known")
