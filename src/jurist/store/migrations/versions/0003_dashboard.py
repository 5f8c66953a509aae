"""dashboard: evaluation facets and covering indexes, prompts, analysis runs, patterns

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("passed", sa.Boolean))
        batch.add_column(sa.Column("escalated", sa.Boolean, nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("iterations", sa.Integer, nullable=False, server_default="1"))
        batch.add_column(sa.Column("failure", sa.String(200)))
    op.create_index("ix_evaluations_overview", "evaluations",
                    ["created_at", "kind", "status", "percentage", "passed", "escalated", "iterations", "failure"])
    op.drop_index("ix_evaluations_kind", "evaluations")  # the overview index serves kind and status filters
    op.drop_index("ix_evaluations_status", "evaluations")
    op.create_index("ix_evaluations_failure_created", "evaluations", ["failure", "created_at"])
    op.create_index("ix_llm_calls_usage", "llm_calls",
                    ["created_at", "input_tokens", "output_tokens", "latency_ms", "status"])
    op.create_index("ix_scores_template_key", "scores", ["template_hash", "key"])

    op.create_table(
        "prompts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("note", sa.Text),
        sa.Column("created_at", _TZ, nullable=False),
        sa.UniqueConstraint("name", "version", name="uq_prompts_name_version"),
    )
    op.create_index("ix_prompts_hash", "prompts", ["hash"])
    op.create_table(
        "analysis_runs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("evaluations", sa.Integer, nullable=False),
        sa.Column("writer_model", sa.String(200)),
        sa.Column("error", sa.Text),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("finished_at", _TZ),
    )
    op.create_index("ix_analysis_runs_created_at", "analysis_runs", ["created_at"])
    op.create_table(
        "patterns",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("run_id", sa.String(32), sa.ForeignKey("analysis_runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("impact", sa.String(16), nullable=False),
        sa.Column("feature_type", sa.String(32), nullable=False),
        sa.Column("feature", sa.String(300), nullable=False),
        sa.Column("dimension", sa.String(200), nullable=False),
        sa.Column("affected_count", sa.Integer, nullable=False),
        sa.Column("mean_affected", sa.Float),
        sa.Column("mean_rest", sa.Float),
        sa.Column("effect_size", sa.Float),
        sa.Column("p_value", sa.Float),
        sa.Column("test", sa.String(64)),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("suggested_fix", sa.Text),
        sa.Column("writer", sa.String(200)),
        sa.Column("created_at", _TZ, nullable=False),
    )
    op.create_index("ix_patterns_run_id", "patterns", ["run_id"])
    op.create_table(
        "pattern_evaluations",
        sa.Column("pattern_id", sa.String(32), sa.ForeignKey("patterns.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("evaluation_id", sa.String(32), primary_key=True),
    )
    op.create_index("ix_pattern_evaluations_evaluation", "pattern_evaluations", ["evaluation_id"])


def downgrade() -> None:
    op.drop_table("pattern_evaluations")
    op.drop_table("patterns")
    op.drop_table("analysis_runs")
    op.drop_table("prompts")
    op.drop_index("ix_scores_template_key", "scores")
    op.drop_index("ix_llm_calls_usage", "llm_calls")
    for name in ("ix_evaluations_failure_created", "ix_evaluations_overview"):
        op.drop_index(name, "evaluations")
    op.create_index("ix_evaluations_kind", "evaluations", ["kind"])
    op.create_index("ix_evaluations_status", "evaluations", ["status"])
    with op.batch_alter_table("evaluations") as batch:
        for col in ("failure", "iterations", "escalated", "passed"):
            batch.drop_column(col)
