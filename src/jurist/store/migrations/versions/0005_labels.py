"""labels: human labels of evaluated items (per rubric, per annotator), added on the dashboard

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "labels",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("item", sa.String(300), nullable=False),
        sa.Column("rubric", sa.String(200), nullable=False),
        sa.Column("score", sa.Float),
        sa.Column("passed", sa.Boolean),
        sa.Column("annotator", sa.String(200), nullable=False),
        sa.Column("note", sa.Text),
        sa.Column("evaluation_id", sa.String(32)),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("updated_at", _TZ, nullable=False),
        sa.UniqueConstraint("item", "rubric", "annotator", name="uq_labels_item_rubric_annotator"),
    )
    op.create_index("ix_labels_rubric", "labels", ["rubric"])


def downgrade() -> None:
    op.drop_index("ix_labels_rubric", "labels")
    op.drop_table("labels")
