"""checklist_evaluations.undecided: the points the judge could not decide in a turn

A judge that cannot decide some points of a turn (the offline judge's band of
uncertainty) keeps its verdicts on the others; the points it could not decide
are listed here (the turn's reason says why). Rows stored before the column
decided every point or none: they get an empty list.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("checklist_evaluations") as batch:
        batch.add_column(sa.Column("undecided", sa.JSON, nullable=False, server_default="[]"))


def downgrade() -> None:
    with op.batch_alter_table("checklist_evaluations") as batch:
        batch.drop_column("undecided")
