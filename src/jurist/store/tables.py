"""The store's tables (SQLAlchemy Core). Migrations in ``migrations/`` create them."""

from __future__ import annotations

from datetime import datetime, timezone

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
    TypeDecorator,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.engine import Dialect

metadata = MetaData()

# Lengths of the columns that hold what users name; checked where the names come in
# (session and rubric files), before any judge call.
SUBJECT_ID_LENGTH = 300  # evaluations.subject_id: a session id
SCORE_KEY_LENGTH = 200  # scores.key: a rubric id
SCORE_NAME_LENGTH = 300  # scores.name: a rubric name
RUBRICS_VERSION_LENGTH = 64  # evaluations.rubrics_version


class UtcDateTime(TypeDecorator[datetime]):
    """A moment in UTC, aware on the way out on every database.

    PostgreSQL keeps the zone; SQLite keeps text without one, so values are
    converted to UTC before they are written (a naive value is taken as UTC)
    and marked UTC when read back. Filters given in another zone compare
    correctly on both.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)

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
    Column("request_hash", String(64), nullable=False),
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
    Column("created_at", UtcDateTime(), nullable=False, index=True),
    # False: the endpoint reported no token usage (a stream without it); the tokens are unknown (migration 0008)
    Column("usage_known", Boolean, nullable=False, default=True, server_default=true()),
    # What the call cost in US dollars (genai-prices); NULL when unknown, cost_note says why (migration 0009)
    Column("cost_usd", Float),
    Column("cost_note", String(200)),
    Index("ix_llm_calls_usage", "created_at", "input_tokens", "output_tokens", "latency_ms", "status"),
    Index("ix_llm_calls_request_hash_status", "request_hash", "status"),  # cached-reply lookups
)

evaluations = Table(
    "evaluations",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("kind", String(32), nullable=False),  # rubric | gate | research | checklist
    Column("subject_id", String(SUBJECT_ID_LENGTH), nullable=False, index=True),  # e.g. the session id
    Column("trace_id", String(64), index=True),
    Column("status", String(32), nullable=False),  # scored | partial | failed | skipped
    Column("score", Float),
    Column("max_score", Float),
    Column("percentage", Float),
    Column("judge_model", String(200)),
    Column("rubrics_version", String(RUBRICS_VERSION_LENGTH)),
    Column("source", Text),
    Column("payload", JSON, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False, index=True),
    # Filled by every capability (migration 0003), for the dashboard's filters and aggregates:
    Column("passed", Boolean),  # the capability's own pass rule; None when nothing was scored
    Column("escalated", Boolean, nullable=False, default=False, server_default=false()),
    Column("iterations", Integer, nullable=False, default=1, server_default="1"),
    Column("failure", String(200)),  # the primary failure: a rubric or dimension key, or a failure state
    # The evaluation's loop (the gate's regenerations, the research plan loop) used every attempt it
    # was allowed, more than one, and the last still did not pass (migration 0006).
    Column("max_attempts_hit", Boolean, nullable=False, default=False, server_default=false()),
    # Overview aggregates and the explorer's filters read this index only, never the payloads
    # (kind and status have no index of their own, which the planner would prefer and then
    # read every row through).
    Index("ix_evaluations_overview", "created_at", "kind", "status", "percentage", "passed", "escalated",
          "iterations", "failure", "max_attempts_hit"),
    Index("ix_evaluations_failure_created", "failure", "created_at"),
)

scores = Table(
    "scores",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("evaluation_id", String(32), ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False),
    Column("key", String(SCORE_KEY_LENGTH), nullable=False),  # rubric id (or dimension)
    Column("name", String(SCORE_NAME_LENGTH)),
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
    Index("ix_scores_template_key", "template_hash", "key"),
)

# -- continuous checklist (migration 0002) -------------------------------------

checklist_sessions = Table(
    "checklist_sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("learner", String(200), nullable=False, index=True),
    Column("title", String(300), nullable=False),
    Column("points", JSON, nullable=False),  # [{"id", "text"}], the checklist as started
    Column("mode", String(32), nullable=False),  # recall | rabbithole
    Column("tutor_model", String(200)),
    Column("judge_model", String(200)),
    Column("status", String(32), nullable=False, index=True),  # active | completed | ended
    Column("created_at", UtcDateTime(), nullable=False, index=True),
    Column("updated_at", UtcDateTime(), nullable=False),
    Column("completed_at", UtcDateTime()),
)

checklist_messages = Table(
    "checklist_messages",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("session_id", String(64), ForeignKey("checklist_sessions.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("role", String(16), nullable=False),  # user | assistant (never the hidden feedback)
    Column("content", Text, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    Index("ix_checklist_messages_session_seq", "session_id", "seq", unique=True),
)

checklist_points = Table(
    "checklist_points",
    metadata,
    Column("session_id", String(64), ForeignKey("checklist_sessions.id", ondelete="CASCADE"), primary_key=True),
    Column("point_id", String(200), primary_key=True),
    Column("position", Integer, nullable=False),
    Column("status", String(16), nullable=False),  # pending | recalled
    Column("confidence", Float),
    Column("message_seq", Integer),  # the user message that recalled it
    Column("recalled_at", UtcDateTime()),
)

checklist_evaluations = Table(
    "checklist_evaluations",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("session_id", String(64), ForeignKey("checklist_sessions.id", ondelete="CASCADE"), nullable=False,
           index=True),
    Column("message_seq", Integer, nullable=False),
    Column("mode", String(32), nullable=False),
    Column("status", String(32), nullable=False),  # ok | evaluation_failed | skipped
    Column("judge_model", String(200)),
    Column("unchecked", JSON, nullable=False),  # the point ids judged
    Column("recalled", JSON, nullable=False),  # {point id: confidence}
    Column("observations", JSON, nullable=False),
    Column("feedback", Text, nullable=False),
    Column("dropped_ids", JSON, nullable=False),  # ids the judge invented
    Column("dropped_count", Integer, nullable=False),
    Column("undecided", JSON, nullable=False, default=list, server_default="[]"),  # point ids not decided
    Column("reason", Text),
    Column("call_ids", JSON, nullable=False),
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
)

fsrs_cards = Table(
    "fsrs_cards",
    metadata,
    Column("learner", String(200), primary_key=True),
    Column("deck", String(300), primary_key=True),  # the checklist title
    Column("point_id", String(200), primary_key=True),
    Column("text", Text, nullable=False),
    Column("card", JSON, nullable=False),  # fsrs.Card.to_dict()
    Column("due", UtcDateTime(), nullable=False, index=True),
    Column("state", String(16), nullable=False),
    Column("reviews", Integer, nullable=False),
    Column("last_rating", String(16)),
    Column("last_review", UtcDateTime()),
    Column("updated_at", UtcDateTime(), nullable=False),
)


# -- prompts, offline analysis (migration 0003) ---------------------------------

prompts = Table(
    "prompts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False),  # a template name, e.g. rubric_judge
    Column("version", Integer, nullable=False),  # 1 is the text shipped with jurist
    Column("text", Text, nullable=False),
    Column("hash", String(64), nullable=False, index=True),  # PromptTemplate.hash
    Column("note", Text),
    Column("created_at", UtcDateTime(), nullable=False),
    UniqueConstraint("name", "version", name="uq_prompts_name_version"),
)

analysis_runs = Table(
    "analysis_runs",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("status", String(32), nullable=False),  # running | done | failed
    Column("params", JSON, nullable=False),  # filters and thresholds used
    Column("evaluations", Integer, nullable=False, default=0),  # how many were analysed
    Column("writer_model", String(200)),  # the judge that wrote the patterns, or None (statistics only)
    Column("error", Text),
    Column("created_at", UtcDateTime(), nullable=False, index=True),
    Column("finished_at", UtcDateTime()),
)

patterns = Table(
    "patterns",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("run_id", String(32), ForeignKey("analysis_runs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("impact", String(16), nullable=False),  # high | medium | low
    Column("feature_type", String(32), nullable=False),  # term | length | judge_model | prompt_version
    Column("feature", String(300), nullable=False),
    Column("dimension", String(200), nullable=False),  # the score compared: "overall" or a rubric/dimension key
    Column("affected_count", Integer, nullable=False),
    Column("mean_affected", Float),
    Column("mean_rest", Float),
    Column("effect_size", Float),  # Cliff's delta, affected vs the rest
    Column("p_value", Float),
    Column("test", String(64)),
    Column("title", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("suggested_fix", Text),
    Column("writer", String(200)),  # the model that wrote title/description/fix, or "statistics"
    Column("created_at", UtcDateTime(), nullable=False),
)

pattern_evaluations = Table(
    "pattern_evaluations",
    metadata,
    Column("pattern_id", String(32), ForeignKey("patterns.id", ondelete="CASCADE"), primary_key=True),
    Column("evaluation_id", String(32), primary_key=True),
    Index("ix_pattern_evaluations_evaluation", "evaluation_id"),
)


# -- human labels (migration 0005) ---------------------------------------------

labels = Table(
    "labels",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item", String(300), nullable=False),  # what was judged: the evaluation's subject (a session id)
    Column("rubric", String(200), nullable=False),  # a rubric or dimension key
    Column("score", Float),  # a score on the rubric's scale, or None for a pass/fail label
    Column("passed", Boolean),  # a pass/fail label, or None for a score
    Column("annotator", String(200), nullable=False),
    Column("note", Text),
    Column("evaluation_id", String(32)),  # the evaluation the label was given on, if any
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
    UniqueConstraint("item", "rubric", "annotator", name="uq_labels_item_rubric_annotator"),
    Index("ix_labels_rubric", "rubric"),
)


# -- stored calibrations (migration 0007) ----------------------------------------

calibrations = Table(
    "calibrations",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("kind", String(16), nullable=False),  # what was calibrated: rubric | gate | panel
    Column("judge_model", String(200), nullable=False),  # the judge's model reference (provider/model)
    Column("template_name", String(200), nullable=False),
    Column("template_hash", String(64), nullable=False),
    Column("rubric", String(200), nullable=False),  # a rubric id, a gate evaluator or a panel dimension
    Column("rubric_hash", String(64)),  # what the judge is shown of the rubric or dimension; None: nothing beyond it
    Column("scale", String(64), nullable=False),  # "1-5" | "pass/fail"
    Column("items", Integer, nullable=False),
    Column("n", Integer, nullable=False),  # judge-person pairs compared
    Column("kappa", Float),  # Cohen's κ, quadratic weights (for pass/fail: Cohen's κ)
    Column("kappa_low", Float),
    Column("kappa_high", Float),
    Column("agreement", Float),  # exact agreement
    Column("agreement_low", Float),
    Column("agreement_high", Float),
    Column("pass_at", Float),  # pass/fail: the judge's score that counts as a pass in the figures above
    Column("threshold", Float),  # pass/fail: the fitted score threshold (pass at score >= threshold)
    Column("threshold_fit", String(16)),  # agreement | f1
    Column("threshold_agreement", Float),
    Column("threshold_agreement_low", Float),
    Column("threshold_agreement_high", Float),
    Column("labels", String(500), nullable=False),  # where the labels came from
    Column("figures", JSON, nullable=False),  # every figure of the report, with its interval
    Column("created_at", UtcDateTime(), nullable=False),
    Index("ix_calibrations_judge", "judge_model", "template_hash", "rubric", "created_at"),
)


# -- datasets and experiments (migration 0010) -----------------------------------

DATASET_NAME_LENGTH = 100  # datasets.name, experiments.name (jurist.experiments.datasets.NAME_LENGTH)

dataset_versions = Table(
    "dataset_versions",
    metadata,
    Column("dataset", String(DATASET_NAME_LENGTH), primary_key=True),
    Column("version", String(64), primary_key=True),  # the hash of the items' content
    Column("number", Integer, nullable=False),  # 1, 2, ... in the order the versions were added
    Column("items", Integer, nullable=False),
    Column("source", Text),  # the file it was added from
    Column("created_at", UtcDateTime(), nullable=False),
    UniqueConstraint("dataset", "number", name="uq_dataset_versions_number"),
)

dataset_items = Table(
    "dataset_items",
    metadata,
    Column("dataset", String(DATASET_NAME_LENGTH), primary_key=True),
    Column("version", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),  # the item's place in the file, from 0
    Column("item_id", String(SUBJECT_ID_LENGTH), nullable=False),
    Column("payload", JSON, nullable=False),  # a DatasetItem
)

experiments = Table(
    "experiments",
    metadata,
    Column("name", String(DATASET_NAME_LENGTH), primary_key=True),
    Column("dataset", String(DATASET_NAME_LENGTH), nullable=False),
    Column("dataset_version", String(64), nullable=False),
    Column("target", Text, nullable=False),
    Column("status", String(16), nullable=False),  # running | finished | interrupted | stopped
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
    Column("payload", JSON, nullable=False),  # an ExperimentRecord
    Index("ix_experiments_dataset", "dataset", "created_at"),
)

experiment_items = Table(
    "experiment_items",
    metadata,
    Column("experiment", String(DATASET_NAME_LENGTH), primary_key=True),
    Column("item_id", String(SUBJECT_ID_LENGTH), primary_key=True),
    # answered: generated, not yet judged (a rerun judges the answer kept here); scored | failed: done
    Column("status", String(16), nullable=False),
    Column("answer", JSON),  # the generation while the item is answered: answer, latency, cost
    Column("evaluation_id", String(32)),
    Column("cost_usd", Float),
    Column("updated_at", UtcDateTime(), nullable=False),
    Column("payload", JSON),  # the ExperimentItem once scored or failed
)
