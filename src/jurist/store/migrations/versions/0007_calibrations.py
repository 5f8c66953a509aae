"""calibrations: stored agreement of a judge (model, template, rubric) with human labels

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "calibrations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("judge_model", sa.String(200), nullable=False),
        sa.Column("template_name", sa.String(200), nullable=False),
        sa.Column("template_hash", sa.String(64), nullable=False),
        sa.Column("rubric", sa.String(200), nullable=False),
        sa.Column("rubric_hash", sa.String(64)),
        sa.Column("scale", sa.String(64), nullable=False),
        sa.Column("items", sa.Integer, nullable=False),
        sa.Column("n", sa.Integer, nullable=False),
        sa.Column("kappa", sa.Float),
        sa.Column("kappa_low", sa.Float),
        sa.Column("kappa_high", sa.Float),
        sa.Column("agreement", sa.Float),
        sa.Column("agreement_low", sa.Float),
        sa.Column("agreement_high", sa.Float),
        sa.Column("pass_at", sa.Float),
        sa.Column("threshold", sa.Float),
        sa.Column("threshold_fit", sa.String(16)),
        sa.Column("threshold_agreement", sa.Float),
        sa.Column("threshold_agreement_low", sa.Float),
        sa.Column("threshold_agreement_high", sa.Float),
        sa.Column("labels", sa.String(500), nullable=False),
        sa.Column("figures", sa.JSON, nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
    )
    op.create_index("ix_calibrations_judge", "calibrations", ["judge_model", "template_hash", "rubric", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_calibrations_judge", "calibrations")
    op.drop_table("calibrations")
