"""continuous checklist: sessions, messages, point states, evaluations, FSRS cards

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "checklist_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("learner", sa.String(200), nullable=False),
        sa.Column("title", sa.String(300), nullable=False),
        sa.Column("points", sa.JSON, nullable=False),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("tutor_model", sa.String(200)),
        sa.Column("judge_model", sa.String(200)),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
        sa.Column("updated_at", _TZ, nullable=False),
        sa.Column("completed_at", _TZ),
    )
    for col in ("learner", "status", "created_at"):
        op.create_index(f"ix_checklist_sessions_{col}", "checklist_sessions", [col])
    op.create_table(
        "checklist_messages",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("session_id", sa.String(64), sa.ForeignKey("checklist_sessions.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
    )
    op.create_index("ix_checklist_messages_session_seq", "checklist_messages", ["session_id", "seq"], unique=True)
    op.create_table(
        "checklist_points",
        sa.Column("session_id", sa.String(64), sa.ForeignKey("checklist_sessions.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("point_id", sa.String(200), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("confidence", sa.Float),
        sa.Column("message_seq", sa.Integer),
        sa.Column("recalled_at", _TZ),
    )
    op.create_table(
        "checklist_evaluations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("session_id", sa.String(64), sa.ForeignKey("checklist_sessions.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("message_seq", sa.Integer, nullable=False),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("judge_model", sa.String(200)),
        sa.Column("unchecked", sa.JSON, nullable=False),
        sa.Column("recalled", sa.JSON, nullable=False),
        sa.Column("observations", sa.JSON, nullable=False),
        sa.Column("feedback", sa.Text, nullable=False),
        sa.Column("dropped_ids", sa.JSON, nullable=False),
        sa.Column("dropped_count", sa.Integer, nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("call_ids", sa.JSON, nullable=False),
        sa.Column("input_tokens", sa.Integer, nullable=False),
        sa.Column("output_tokens", sa.Integer, nullable=False),
        sa.Column("created_at", _TZ, nullable=False),
    )
    op.create_index("ix_checklist_evaluations_session_id", "checklist_evaluations", ["session_id"])
    op.create_table(
        "fsrs_cards",
        sa.Column("learner", sa.String(200), primary_key=True),
        sa.Column("deck", sa.String(300), primary_key=True),
        sa.Column("point_id", sa.String(200), primary_key=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("card", sa.JSON, nullable=False),
        sa.Column("due", _TZ, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reviews", sa.Integer, nullable=False),
        sa.Column("last_rating", sa.String(16)),
        sa.Column("last_review", _TZ),
        sa.Column("updated_at", _TZ, nullable=False),
    )
    op.create_index("ix_fsrs_cards_due", "fsrs_cards", ["due"])


def downgrade() -> None:
    op.drop_table("fsrs_cards")
    op.drop_table("checklist_evaluations")
    op.drop_table("checklist_points")
    op.drop_table("checklist_messages")
    op.drop_table("checklist_sessions")
