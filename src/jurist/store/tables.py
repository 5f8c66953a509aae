"""The store's tables (SQLAlchemy Core). Migrations in ``migrations/`` create them."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

llm_calls = Table(
    "llm_calls",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("trace_id", String(64), index=True),
    Column("purpose", String(64), nullable=False, index=True),
    Column("model", String(200), nullable=False),
    Column("endpoint", String(300), nullable=False),
    Column("template_name", String(200)),
    Column("template_hash", String(64)),
    Column("request_hash", String(64), nullable=False, index=True),
    Column("messages", JSON, nullable=False),
    Column("params", JSON, nullable=False),
    Column("response_text", Text),
    Column("parsed", JSON),
    Column("input_tokens", Integer, nullable=False, default=0),
    Column("output_tokens", Integer, nullable=False, default=0),
    Column("latency_ms", Float, nullable=False, default=0.0),
    Column("attempts", Integer, nullable=False, default=1),
    Column("status", String(32), nullable=False, index=True),
    Column("error", Text),
    Column("cached", Boolean, nullable=False, default=False),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
)

evaluations = Table(
    "evaluations",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("kind", String(32), nullable=False, index=True),  # rubric | gate | research | checklist
    Column("subject_id", String(300), nullable=False, index=True),  # e.g. the session id
    Column("trace_id", String(64), index=True),
    Column("status", String(32), nullable=False, index=True),  # scored | partial | failed
    Column("score", Float),
    Column("max_score", Float),
    Column("percentage", Float),
    Column("judge_model", String(200)),
    Column("rubrics_version", String(64)),
    Column("source", Text),
    Column("payload", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
)

scores = Table(
    "scores",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("evaluation_id", String(32), ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False),
    Column("key", String(200), nullable=False),  # rubric id (or dimension)
    Column("name", String(300)),
    Column("score", Float),
    Column("max_score", Float),
    Column("weight", Float),
    Column("status", String(32), nullable=False),  # scored | evaluation_failed
    Column("reason", Text),
    Column("judge_model", String(200)),
    Column("template_hash", String(64)),
    Column("input_tokens", Integer, nullable=False, default=0),
    Column("output_tokens", Integer, nullable=False, default=0),
    Column("latency_ms", Float, nullable=False, default=0.0),
    Column("call_id", String(32)),
    Index("ix_scores_evaluation_key", "evaluation_id", "key"),
)
