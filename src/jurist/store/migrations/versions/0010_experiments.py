"""datasets and experiments: versioned dataset items, experiment records and their items

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "dataset_versions",
        sa.Column("dataset", sa.String(100), primary_key=True),
        sa.Column("version", sa.String(64), primary_key=True),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("items", sa.Integer, nullable=False),
        sa.Column("source", sa.Text),
        sa.Column("created_at", _TZ, nullable=False),
        sa.UniqueConstraint("dataset", "number", name="uq_dataset_versions_number"),
    )
    op.create_table(
        "dataset_items",
        sa.Column("dataset", sa.String(100), primary_key=True),
        sa.Column("version", sa.String(64), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("item_id", sa.String(300), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
    )
    op.create_table(
        "experiments",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("dataset", sa.String(100), nullable=False),
        sa.Column("dataset_version", sa.String(64), nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("updated_at", _TZ, nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
    )
    op.create_index("ix_experiments_dataset", "experiments", ["dataset", "created_at"])
    op.create_table(
        "experiment_items",
        sa.Column("experiment", sa.String(100), primary_key=True),
        sa.Column("item_id", sa.String(300), primary_key=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("answer", sa.JSON),
        sa.Column("evaluation_id", sa.String(32)),
        sa.Column("cost_usd", sa.Float),
        sa.Column("updated_at", _TZ, nullable=False),
        sa.Column("payload", sa.JSON),
    )


def downgrade() -> None:
    op.drop_table("experiment_items")
    op.drop_index("ix_experiments_dataset", "experiments")
    op.drop_table("experiments")
    op.drop_table("dataset_items")
    op.drop_table("dataset_versions")
