"""max_attempts_hit: an evaluation whose loop used every attempt it was allowed and still did not pass

The column joins the overview's covering index. Rows stored before it are
filled from their payloads: a gate record that stopped at ``max_regenerations``
after more than one attempt, a research record whose plan loop made its last
allowed attempt (of more than one) and that attempt did not pass.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_OLD = ["created_at", "kind", "status", "percentage", "passed", "escalated", "iterations", "failure"]
_NEW = _OLD + ["max_attempts_hit"]
_BATCH = 500


def _hit(kind: str, payload: Any) -> bool:
    """The same rule as the capabilities' row builders, read from a stored payload."""
    if not isinstance(payload, dict):
        return False
    if kind == "gate":
        attempts = payload.get("attempts")
        return payload.get("accept_reason") == "max_regenerations" and isinstance(attempts, list) \
            and len(attempts) > 1
    plan = payload.get("planEvaluation")
    if kind != "research" or not isinstance(plan, dict):
        return False
    attempts, limit = plan.get("attempts"), plan.get("maxAttempts")
    if not isinstance(attempts, list) or not attempts or not isinstance(limit, int) or limit < 2:
        return False
    last = attempts[-1]
    return len(attempts) >= limit and isinstance(last, dict) and last.get("passed") is False \
        and not last.get("evaluationSkipped")


def upgrade() -> None:
    op.drop_index("ix_evaluations_overview", "evaluations")
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("max_attempts_hit", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_index("ix_evaluations_overview", "evaluations", _NEW)
    evaluations = sa.table("evaluations", sa.column("id", sa.String), sa.column("kind", sa.String),
                           sa.column("iterations", sa.Integer), sa.column("payload", sa.JSON),
                           sa.column("max_attempts_hit", sa.Boolean))
    conn = op.get_bind()
    e = evaluations.c
    ids = conn.execute(sa.select(e.id).where(e.kind.in_(["gate", "research"]), e.iterations > 1)).scalars().all()
    for lo in range(0, len(ids), _BATCH):  # payloads a batch at a time: research records can be large
        rows = conn.execute(sa.select(e.id, e.kind, e.payload).where(e.id.in_(ids[lo:lo + _BATCH]))).all()
        hit = [r.id for r in rows if _hit(r.kind, r.payload)]
        if hit:
            conn.execute(sa.update(evaluations).where(e.id.in_(hit)).values(max_attempts_hit=True))


def downgrade() -> None:
    op.drop_index("ix_evaluations_overview", "evaluations")
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("max_attempts_hit")
    op.create_index("ix_evaluations_overview", "evaluations", _OLD)
