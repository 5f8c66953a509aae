"""llm_calls, evaluations and scores

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "llm_calls",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("trace_id", sa.String(64)),
        sa.Column("purpose", sa.String(64), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("endpoint", sa.String(300), nullable=False),
        sa.Column("template_name", sa.String(200)),
        sa.Column("template_hash", sa.String(64)),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("messages", sa.JSON, nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("response_text", sa.Text),
        sa.Column("parsed", sa.JSON),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("cached", sa.Boolean, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    for col in ("trace_id", "purpose", "request_hash", "status", "created_at"):
        op.create_index(f"ix_llm_calls_{col}", "llm_calls", [col])
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject_id", sa.String(300), nullable=False),
        sa.Column("trace_id", sa.String(64)),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("score", sa.Float),
        sa.Column("max_score", sa.Float),
        sa.Column("percentage", sa.Float),
        sa.Column("judge_model", sa.String(200)),
        sa.Column("rubrics_version", sa.String(64)),
        sa.Column("source", sa.Text),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    for col in ("kind", "subject_id", "trace_id", "status", "created_at"):
        op.create_index(f"ix_evaluations_{col}", "evaluations", [col])
    op.create_table(
        "scores",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "evaluation_id", sa.String(32), sa.ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("name", sa.String(300)),
        sa.Column("score", sa.Float),
        sa.Column("max_score", sa.Float),
        sa.Column("weight", sa.Float),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("judge_model", sa.String(200)),
        sa.Column("template_hash", sa.String(64)),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("call_id", sa.String(32)),
    )
    op.create_index("ix_scores_evaluation_key", "scores", ["evaluation_id", "key"])


def downgrade() -> None:
    op.drop_table("scores")
    op.drop_table("evaluations")
    op.drop_table("llm_calls")
