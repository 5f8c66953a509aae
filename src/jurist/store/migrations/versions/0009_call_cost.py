"""cost_usd: what a call cost in US dollars, and why it is unknown when it is

``cost_usd`` is computed from the call's tokens and the provider's published
prices (the genai-prices table) when the call is recorded; it is NULL when the
price is unknown, and ``cost_note`` then says why (a local server, a model the
table does not list, usage the endpoint did not report). Rows stored before
this column have NULL and no note.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("cost_usd", sa.Float, nullable=True))
        batch.add_column(sa.Column("cost_note", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("cost_note")
        batch.drop_column("cost_usd")
