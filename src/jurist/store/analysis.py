"""Queries for the offline analysis and the prompt lab: prompt versions, analysis
runs, patterns and the evaluation and score rows the statistics read.

Plain functions taking a Connection, like :mod:`jurist.store.queries`; the
``Store`` runs them off the event loop (``aread`` / ``awrite``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, JsonValue
from sqlalchemy import func, insert, select, update
from sqlalchemy.engine import Connection

from jurist.store.tables import (
    analysis_runs,
    evaluations,
    llm_calls,
    pattern_evaluations,
    patterns,
    prompts,
    scores,
)
from jurist.store.stored import StoredRow

# IN lists are sent in chunks: SQLite and PostgreSQL both cap bound parameters.
_CHUNK = 500


def _chunks(values: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for i in range(0, len(values), _CHUNK):
        yield values[i : i + _CHUNK]


# -- prompts -----------------------------------------------------------------------


class PromptVersion(StoredRow):
    """A stored version of a prompt (a ``prompts`` row), without its text."""

    name: str
    version: int
    hash: str
    note: str | None
    created_at: datetime


class PromptText(PromptVersion):
    """A stored version of a prompt with its text."""

    text: str


def list_prompt_versions(conn: Connection, name: str | None = None) -> list[PromptVersion]:
    """Stored prompt versions (without their text), by name then version."""
    stmt = select(prompts.c.name, prompts.c.version, prompts.c.hash, prompts.c.note, prompts.c.created_at).order_by(
        prompts.c.name, prompts.c.version
    )
    if name is not None:
        stmt = stmt.where(prompts.c.name == name)
    return [PromptVersion.of(r._mapping) for r in conn.execute(stmt)]


def get_prompt_version(conn: Connection, name: str, version: int) -> PromptText | None:
    stmt = select(prompts.c.name, prompts.c.version, prompts.c.text, prompts.c.hash, prompts.c.note,
                  prompts.c.created_at).where(prompts.c.name == name, prompts.c.version == version)
    row = conn.execute(stmt).first()
    return PromptText.of(row._mapping) if row is not None else None


def latest_prompt_version(conn: Connection, name: str) -> int | None:
    return conn.execute(select(func.max(prompts.c.version)).where(prompts.c.name == name)).scalar()


def insert_prompt_version(conn: Connection, row: PromptText) -> None:
    conn.execute(insert(prompts), [row.model_dump()])


def prompt_hash_labels(conn: Connection) -> dict[str, tuple[str, int]]:
    """Every stored hash -> (prompt name, version)."""
    stmt = select(prompts.c.hash, prompts.c.name, prompts.c.version).order_by(prompts.c.version)
    return {r.hash: (r.name, r.version) for r in conn.execute(stmt)}


# -- what the statistics read ------------------------------------------------------


class AnalysedEvaluation(StoredRow):
    """A scored evaluation as the analysis reads it: no payload."""

    id: str
    kind: str
    subject_id: str
    trace_id: str | None
    percentage: float
    judge_model: str | None
    failure: str | None
    source: str | None
    created_at: datetime


class ScoredItem(StoredRow):
    """One scored per-item row of an evaluation (a rubric's or a dimension's score)."""

    evaluation_id: str
    key: str
    score: float
    max_score: float | None
    template_hash: str | None


def evaluations_for_analysis(
    conn: Connection,
    *,
    kind: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 20000,
) -> list[AnalysedEvaluation]:
    """Scored evaluations (newest first, at most ``limit``): the columns the analysis needs, no payloads."""
    e = evaluations.c
    stmt = (
        select(e.id, e.kind, e.subject_id, e.trace_id, e.percentage, e.judge_model, e.failure, e.source,
               e.created_at)
        .where(e.percentage.is_not(None))
        .order_by(e.created_at.desc(), e.id)
        .limit(limit)
    )
    if kind:
        stmt = stmt.where(e.kind == kind)
    if since is not None:
        stmt = stmt.where(e.created_at >= since)
    if until is not None:
        stmt = stmt.where(e.created_at < until)
    return [AnalysedEvaluation.of(r._mapping) for r in conn.execute(stmt)]


def payloads_of(conn: Connection, evaluation_ids: Sequence[str]) -> dict[str, JsonValue]:
    """evaluation id -> payload, for the few kinds whose text lives there."""
    out: dict[str, JsonValue] = {}
    for part in _chunks(list(evaluation_ids)):
        for r in conn.execute(select(evaluations.c.id, evaluations.c.payload).where(evaluations.c.id.in_(part))):
            out[r.id] = r.payload
    return out


def transcripts_of(conn: Connection, evaluation_ids: Sequence[str]) -> dict[str, JsonValue]:
    """evaluation id -> the ``transcript`` its payload keeps (rubric evaluations), reading only
    that part of the payload; evaluations without one are left out."""
    out: dict[str, JsonValue] = {}
    transcript = evaluations.c.payload["transcript"]
    for part in _chunks(list(evaluation_ids)):
        for r in conn.execute(select(evaluations.c.id, transcript.label("transcript"))
                              .where(evaluations.c.id.in_(part))):
            if r.transcript is not None:
                out[r.id] = r.transcript
    return out


def generation_messages(conn: Connection, trace_ids: Sequence[str]) -> dict[str, JsonValue]:
    """trace id -> the messages of its first generation call (the gate's input)."""
    out: dict[str, JsonValue] = {}
    for part in _chunks(list(trace_ids)):
        stmt = (
            select(llm_calls.c.trace_id, llm_calls.c.messages)
            .where(llm_calls.c.trace_id.in_(part), llm_calls.c.purpose == "generation")
            .order_by(llm_calls.c.created_at)
        )
        for r in conn.execute(stmt):
            out.setdefault(r.trace_id, r.messages)
    return out


def score_rows_of(conn: Connection, evaluation_ids: Sequence[str]) -> list[ScoredItem]:
    """The scored per-item rows of these evaluations: key, score, scale and template hash."""
    s = scores.c
    out: list[ScoredItem] = []
    for part in _chunks(list(evaluation_ids)):
        stmt = select(s.evaluation_id, s.key, s.score, s.max_score, s.template_hash).where(
            s.evaluation_id.in_(part), s.status == "scored", s.score.is_not(None)
        )
        out.extend(ScoredItem.of(r._mapping) for r in conn.execute(stmt))
    return out


class HashScore(TypedDict):
    """A scored row judged with a prompt version (its template hash), with its subject and judge model."""

    template_hash: str
    key: str
    score: float
    max_score: float | None
    subject_id: str
    created_at: datetime
    judge_model: str | None


def scores_for_hashes(
    conn: Connection, hashes: Sequence[str], *, key: str | None = None, limit: int = 20000
) -> list[HashScore]:
    """Scored rows judged with any of ``hashes``, newest first, with their subject and judge model
    (the score's, else its evaluation's)."""
    s, e = scores.c, evaluations.c
    stmt = (
        select(s.template_hash, s.key, s.score, s.max_score, e.subject_id, e.created_at,
               func.coalesce(s.judge_model, e.judge_model).label("judge_model"))
        .select_from(scores.join(evaluations, evaluations.c.id == scores.c.evaluation_id))
        .where(s.template_hash.in_(list(hashes)), s.status == "scored", s.score.is_not(None))
        .order_by(e.created_at.desc(), s.id.desc())
        .limit(limit)
    )
    if key:
        stmt = stmt.where(s.key == key)
    found = [HashScore(template_hash=r.template_hash, key=r.key, score=r.score, max_score=r.max_score,
                       subject_id=r.subject_id, created_at=r.created_at, judge_model=r.judge_model)
             for r in conn.execute(stmt)]
    if found or key not in (None, "overall"):
        return found
    return pipeline_prompt_scores(conn, hashes, limit=limit)


def pipeline_prompt_scores(conn: Connection, hashes: Sequence[str], *, since: datetime | None = None,
                           limit: int = 20000) -> list[HashScore]:
    """The research evaluations (newest first, among the newest ``limit``) whose run used one of
    ``hashes`` as a pipeline prompt (a planner's, say: the record's ``pipelinePrompts``), each as
    its overall score (key ``overall``): a pipeline's prompt produces the research that is scored,
    not a score row of its own."""
    e = evaluations.c
    used = e.payload["pipelinePrompts"]
    stmt = (select(e.subject_id, e.judge_model, e.score, e.max_score, e.created_at, used.label("used"))
            .where(e.kind == "research", e.score.is_not(None)).order_by(e.created_at.desc(), e.id).limit(limit))
    if since is not None:
        stmt = stmt.where(e.created_at >= since)
    wanted = set(hashes)
    out: list[HashScore] = []
    for r in conn.execute(stmt):
        matched = wanted & set((r.used or {}).values()) if isinstance(r.used, dict) else set()
        if len(matched) == 1:  # a run that used both versions (of two prompts) belongs to neither
            out.append(HashScore(template_hash=matched.pop(), key="overall", score=r.score, max_score=r.max_score,
                                 subject_id=r.subject_id, created_at=r.created_at, judge_model=r.judge_model))
    return out


# -- analysis runs and patterns ----------------------------------------------------


RunStatus = Literal["running", "done", "failed"]
Impact = Literal["high", "medium", "low"]
FeatureType = Literal["term", "length", "judge_model", "prompt_version"]


class AnalysisRun(StoredRow):
    """One run of the offline analysis (an ``analysis_runs`` row)."""

    id: str
    status: RunStatus
    params: dict[str, Any]  # a JSON column: the filters and thresholds used
    evaluations: int
    writer_model: str | None = None
    error: str | None = None
    created_at: datetime
    finished_at: datetime | None = None


class RunEnd(BaseModel):
    """How a run ended: ``done`` with its counts, or ``failed`` with its error (what is None is not written)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: RunStatus
    finished_at: datetime
    evaluations: int | None = None
    writer_model: str | None = None
    error: str | None = None


class Pattern(StoredRow):
    """A pattern a run found (a ``patterns`` row); read back with up to 100 of its evaluation ids."""

    id: str
    run_id: str
    impact: Impact
    feature_type: FeatureType
    feature: str
    dimension: str
    affected_count: int
    mean_affected: float | None
    mean_rest: float | None
    effect_size: float | None
    p_value: float | None
    test: str | None
    title: str
    description: str
    suggested_fix: str | None
    writer: str | None
    created_at: datetime
    evaluation_ids: tuple[str, ...] = ()


class PatternReport(BaseModel):
    """An analysis run (None before the first finished one) and its patterns."""

    model_config = ConfigDict(frozen=True)

    run: AnalysisRun | None
    patterns: list[Pattern]


def insert_run(conn: Connection, run: AnalysisRun) -> None:
    conn.execute(insert(analysis_runs), [run.model_dump()])


def finish_run(conn: Connection, run_id: str, end: RunEnd) -> None:
    conn.execute(update(analysis_runs).where(analysis_runs.c.id == run_id).values(**end.model_dump(exclude_none=True)))


def insert_patterns(conn: Connection, rows: list[Pattern]) -> None:
    """Patterns and every evaluation each one covers (``evaluation_ids``), in the caller's transaction."""
    if rows:
        conn.execute(insert(patterns), [p.model_dump(exclude={"evaluation_ids"}) for p in rows])
    links = [{"pattern_id": p.id, "evaluation_id": e} for p in rows for e in p.evaluation_ids]
    for start in range(0, len(links), 5000):
        conn.execute(insert(pattern_evaluations), links[start : start + 5000])


def get_run(conn: Connection, run_id: str | None = None) -> AnalysisRun | None:
    """One run by id, or the newest finished (done) run."""
    stmt = select(analysis_runs)
    if run_id is not None:  # not the prompt lab's routes, which this table also keeps (store/prompt_routes.py)
        stmt = stmt.where(analysis_runs.c.id == run_id, analysis_runs.c.status.in_(("running", "done", "failed")))
    else:
        stmt = stmt.where(analysis_runs.c.status == "done").order_by(analysis_runs.c.created_at.desc()).limit(1)
    row = conn.execute(stmt).first()
    return AnalysisRun.of(row._mapping) if row is not None else None


def patterns_of_run(conn: Connection, run_id: str, links_per_pattern: int = 100) -> list[Pattern]:
    """The run's patterns, highest impact first, each with up to ``links_per_pattern`` evaluation ids."""
    impact_order = {"high": 0, "medium": 1, "low": 2}
    rows = [Pattern.of(r._mapping) for r in conn.execute(select(patterns).where(patterns.c.run_id == run_id))]
    rows.sort(key=lambda p: (impact_order[p.impact], p.p_value if p.p_value is not None else 1.0, p.id))
    out = []
    for p in rows:
        stmt = (
            select(pattern_evaluations.c.evaluation_id)
            .where(pattern_evaluations.c.pattern_id == p.id)
            .order_by(pattern_evaluations.c.evaluation_id)
            .limit(links_per_pattern)
        )
        out.append(p.model_copy(update={"evaluation_ids": tuple(conn.execute(stmt).scalars())}))
    return out
