"""The dashboard's reads: overview aggregates, the explorer's filtered pages, one trace.

Every aggregate is computed by the database (``GROUP BY`` over the covering
index ``ix_evaluations_overview`` and ``ix_llm_calls_usage``), never by a
Python loop over rows, so the overview stays fast at 100,000 evaluations.
Scores are shown on 0..1: ``percentage / 100``, the one scale every kind of
evaluation shares.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta
from typing import Any

from pydantic import JsonValue
from sqlalchemy import Integer, and_, case, cast, func, literal_column, select
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from jurist.store.queries import call_status_is
from jurist.store.stored import StoredRow
from jurist.store.tables import checklist_messages, evaluations, llm_calls, pattern_evaluations, patterns, scores

KINDS = ("rubric", "gate", "research", "checklist")
#: The purpose of the checklist tutor's calls (jurist.checklist.session.PURPOSE_TUTOR; a test keeps them equal).
CHECKLIST_TUTOR = "checklist_tutor"
_TURN_TUTOR_CALLS = 20  # tutor calls read after a turn's judge call to find its reply (retries included)
_E = evaluations.c
# The explorer's columns: everything but the payload.
# What an evaluation is about, read from its payload by the database (the payload itself is not
# fetched): a gate's question (its subject id is a hash of it), a research run's query. The first
# characters only; list_page puts them on one line.
_TITLE = func.substr(case((_E.kind == "gate", _E.payload["question"].as_string()),
                          (_E.kind == "research", _E.payload["userQuery"].as_string()), else_=None),
                     1, 1000).label("title")
_LIST_COLUMNS = [_E.id, _E.kind, _E.subject_id, _E.trace_id, _E.status, _E.score, _E.max_score, _E.percentage,
                 _E.passed, _E.escalated, _E.iterations, _E.max_attempts_hit, _E.failure, _E.judge_model,
                 _E.created_at, _TITLE]


@dataclass(frozen=True)
class EvaluationFilter:
    """What the overview and the explorer filter on (all optional)."""

    since: datetime | None = None
    until: datetime | None = None
    kind: str | None = None
    status: str | None = None
    failure: str | None = None
    escalated: bool | None = None
    passed: bool | None = None
    min_score: float | None = None  # on 0..1
    max_score: float | None = None
    min_iterations: int | None = None
    max_iterations: int | None = None
    max_attempts_hit: bool | None = None
    pattern_id: str | None = None
    subject_id: str | None = None

    @property
    def narrows(self) -> bool:
        """True when it filters on anything besides the date range (kind, status, score, ...)."""
        return any(getattr(self, f.name) is not None for f in fields(self) if f.name not in ("since", "until"))

    def where(self) -> list[ColumnElement[bool]]:
        out: list[ColumnElement[bool]] = []
        if self.since is not None:
            out.append(_E.created_at >= self.since)
        if self.until is not None:
            out.append(_E.created_at < self.until)
        for column, value in ((_E.kind, self.kind), (_E.status, self.status), (_E.failure, self.failure),
                              (_E.escalated, self.escalated), (_E.passed, self.passed),
                              (_E.max_attempts_hit, self.max_attempts_hit), (_E.subject_id, self.subject_id)):
            if value is not None:
                out.append(column == value)
        if self.min_score is not None:
            out.append(_E.percentage >= self.min_score * 100.0)
        if self.max_score is not None:
            out.append(_E.percentage <= self.max_score * 100.0)
        if self.min_iterations is not None:
            out.append(_E.iterations >= self.min_iterations)
        if self.max_iterations is not None:
            out.append(_E.iterations <= self.max_iterations)
        if self.pattern_id is not None:
            out.append(_E.id.in_(select(pattern_evaluations.c.evaluation_id)
                                 .where(pattern_evaluations.c.pattern_id == self.pattern_id)))
        return out


def _bucket(conn: Connection) -> ColumnElement[Any]:
    """The score-distribution bin (0..9) of a row, from its percentage."""
    tenth = _E.percentage / 10.0
    # CAST truncates on SQLite; PostgreSQL rounds, so floor() first there.
    whole = cast(func.floor(tenth), Integer) if conn.dialect.name == "postgresql" else cast(tenth, Integer)
    return case((_E.percentage >= 100.0, 9), else_=whole)


def _day(conn: Connection) -> ColumnElement[Any]:
    """A row's day, as YYYY-MM-DD text."""
    if conn.dialect.name == "postgresql":
        return func.to_char(_E.created_at, "YYYY-MM-DD")
    return func.substr(_E.created_at, 1, 10)  # SQLite keeps date-times as ISO text


def _monday(day: str) -> str:
    d = date.fromisoformat(day[:10])
    return (d - timedelta(days=d.weekday())).isoformat()


def _ratio(part: Any, whole: Any) -> float | None:
    return None if not whole else round(float(part) / float(whole), 4)


def _score(percentage: Any) -> float | None:
    return None if percentage is None else round(float(percentage) / 100.0, 4)


@dataclass
class _Sums:
    """Sums of one group of the (kind, day) aggregate, folded into kinds, weeks and the total."""

    count: int = 0
    passed: int = 0
    judged: int = 0
    pct_sum: float = 0.0
    pct_n: int = 0
    escalated: int = 0
    iter_sum: int = 0
    iter_max: int | None = None
    failed: int = 0
    iterated: int = 0
    max_hit: int = 0

    def add(self, row: Any) -> None:
        n, p, j, ps, pn, esc, isum, imax, f, it, mh = row
        self.count += int(n)
        self.passed += int(p or 0)
        self.judged += int(j or 0)
        self.pct_sum += float(ps or 0.0)
        self.pct_n += int(pn or 0)
        self.escalated += int(esc or 0)
        self.iter_sum += int(isum or 0)
        self.iter_max = imax if self.iter_max is None or (imax is not None and imax > self.iter_max) else self.iter_max
        self.failed += int(f or 0)
        self.iterated += int(it or 0)
        self.max_hit += int(mh or 0)

    @property
    def average(self) -> float | None:
        return _score(self.pct_sum / self.pct_n) if self.pct_n else None

    @property
    def pass_rate(self) -> float | None:
        return _ratio(self.passed, self.judged)


class ScoreBin(StoredRow):
    """One bar of the score distribution: the evaluations scored in [low, high) (the last bin takes 1.0)."""

    bin: int
    low: float
    high: float
    count: int


class FailureCount(StoredRow):
    failure: str
    count: int


class WeekFigures(StoredRow):
    """Count, average score (0..1) and pass rate of one week's evaluations."""

    week: str  # the week's Monday, YYYY-MM-DD
    count: int
    average_score: float | None
    pass_rate: float | None


class KindFigures(StoredRow):
    """Count, average score (0..1) and pass rate of one kind's evaluations."""

    kind: str
    count: int
    average_score: float | None
    pass_rate: float | None


class IterationFigures(StoredRow):
    average: float | None
    max: int | None
    iterated: int  # evaluations with more than one attempt
    iterated_rate: float | None
    max_attempts_hit: int
    max_attempts_hit_rate: float | None


class EscalationFigures(StoredRow):
    count: int
    rate: float | None


class CallUsage(StoredRow):
    """Tokens, latency and cost of LLM calls: ``cost_usd`` sums the known costs (genai-prices'),
    ``cost_unknown_calls`` counts the calls whose cost is unknown (not in the sum)."""

    count: int
    input_tokens: int
    output_tokens: int
    average_latency_ms: float | None
    max_latency_ms: float | None
    errors: int
    cost_usd: float = 0.0
    cost_unknown_calls: int = 0


class Overview(StoredRow):
    """The overview's aggregates (also the metrics API's body)."""

    total: int
    passed: int
    judged: int
    pass_rate: float | None
    average_score: float | None
    failed: int
    distribution: list[ScoreBin]
    failures: list[FailureCount]
    trend: list[WeekFigures]
    by_kind: list[KindFigures]
    iterations: IterationFigures
    escalations: EscalationFigures
    calls: CallUsage


def overview(conn: Connection, flt: EvaluationFilter) -> Overview:
    """The overview: totals, pass rate, average score, distribution, failures, trend, iterations, calls."""
    where = flt.where()
    flag = lambda cond: func.sum(case((cond, 1), else_=0))  # noqa: E731
    day = _day(conn).label("day")
    groups = conn.execute(
        select(_E.kind, day, func.count(), flag(_E.passed.is_(True)), flag(_E.passed.is_not(None)),
               func.sum(_E.percentage), func.count(_E.percentage), flag(_E.escalated.is_(True)),
               func.sum(_E.iterations), func.max(_E.iterations), flag(_E.status == "failed"),
               flag(_E.iterations > 1), flag(_E.max_attempts_hit.is_(True)))
        .where(*where).group_by(_E.kind, day)).all()
    total = _Sums()
    kinds: defaultdict[str, _Sums] = defaultdict(_Sums)
    weeks: defaultdict[str, _Sums] = defaultdict(_Sums)
    for kind, d, *sums in groups:  # one row per (kind, day): a few hundred, whatever the row count
        total.add(sums)
        kinds[kind].add(sums)
        weeks[_monday(str(d))].add(sums)
    bucket = _bucket(conn).label("bucket")
    dist: dict[int, int] = dict(conn.execute(
        select(bucket, func.count()).where(*where, _E.percentage.is_not(None)).group_by(bucket)).all())
    failures = conn.execute(
        select(_E.failure, func.count().label("n")).where(*where, _E.failure.is_not(None))
        .group_by(_E.failure).order_by(literal_column("n").desc(), _E.failure).limit(20)).all()
    return Overview(
        total=total.count,
        passed=total.passed,
        judged=total.judged,
        pass_rate=total.pass_rate,
        average_score=total.average,
        failed=total.failed,
        distribution=[ScoreBin(bin=b, low=b / 10, high=(b + 1) / 10, count=int(dist.get(b, 0))) for b in range(10)],
        failures=[FailureCount(failure=f, count=int(n)) for f, n in failures],
        trend=[WeekFigures(week=w, count=s.count, average_score=s.average, pass_rate=s.pass_rate)
               for w, s in sorted(weeks.items())],
        by_kind=[KindFigures(kind=k, count=s.count, average_score=s.average, pass_rate=s.pass_rate)
                 for k, s in sorted(kinds.items())],
        iterations=IterationFigures(
            average=round(total.iter_sum / total.count, 3) if total.count else None, max=total.iter_max,
            iterated=total.iterated, iterated_rate=_ratio(total.iterated, total.count),
            max_attempts_hit=total.max_hit, max_attempts_hit_rate=_ratio(total.max_hit, total.count)),
        escalations=EscalationFigures(count=total.escalated, rate=_ratio(total.escalated, total.count)),
        calls=call_usage(conn, flt),
    )


def _of_evaluations(flt: EvaluationFilter) -> ColumnElement[bool]:
    """An LLM call belongs to an evaluation that matches ``flt`` (by its trace)."""
    return llm_calls.c.trace_id.in_(select(_E.trace_id).where(*flt.where(), _E.trace_id.is_not(None)))


def call_usage(conn: Connection, flt: EvaluationFilter) -> CallUsage:
    """Tokens and latency of the LLM calls in the filter's date range; when it filters on more
    (a kind, a status, ...), of the calls of the matching evaluations only."""
    c = llm_calls.c
    where = []
    if flt.since is not None:
        where.append(c.created_at >= flt.since)
    if flt.until is not None:
        where.append(c.created_at < flt.until)
    if flt.narrows:
        where.append(_of_evaluations(flt))
    n, tin, tout, avg_lat, max_lat, errors, cost, unknown = conn.execute(
        select(func.count(), func.sum(c.input_tokens), func.sum(c.output_tokens), func.avg(c.latency_ms),
               func.max(c.latency_ms), func.sum(case((c.status != "ok", 1), else_=0)), func.sum(c.cost_usd),
               func.sum(case((c.cost_usd.is_(None), 1), else_=0)))
        .select_from(llm_calls).where(*where)).one()
    return CallUsage(count=int(n or 0), input_tokens=int(tin or 0), output_tokens=int(tout or 0),
                     average_latency_ms=None if avg_lat is None else round(float(avg_lat), 1),
                     max_latency_ms=None if max_lat is None else round(float(max_lat), 1),
                     errors=int(errors or 0), cost_usd=round(float(cost or 0.0), 9),
                     cost_unknown_calls=int(unknown or 0))


class ListedEvaluation(StoredRow):
    """An evaluation as the explorer lists it: no payload; its title, and its score on 0..1."""

    id: str
    kind: str
    subject_id: str
    title: str | None  # the gate's question, the research query (one line, at most TITLE_CHARS); else None
    trace_id: str | None
    status: str
    score: float | None
    max_score: float | None
    percentage: float | None
    score_normalised: float | None  # percentage / 100
    passed: bool | None
    escalated: bool
    iterations: int
    max_attempts_hit: bool
    failure: str | None
    judge_model: str | None
    created_at: datetime


class EvaluationPage(StoredRow):
    total: int  # how many match, in all
    page: int
    page_size: int
    items: list[ListedEvaluation]


def list_page(conn: Connection, flt: EvaluationFilter, *, page: int = 1, page_size: int = 50) -> EvaluationPage:
    """One page of evaluations (newest first, no payloads) and how many match in all; each with its
    ``title`` (the gate's question, the research query; None for the other kinds)."""
    where = flt.where()
    total = conn.execute(select(func.count()).select_from(evaluations).where(*where)).scalar_one()
    rows = conn.execute(
        select(*_LIST_COLUMNS).where(*where).order_by(_E.created_at.desc(), _E.id)
        .limit(page_size).offset((page - 1) * page_size)).all()
    items = [ListedEvaluation.of(r._mapping, title=_title(r.title), score_normalised=_score(r.percentage))
             for r in rows]
    return EvaluationPage(total=int(total), page=page, page_size=page_size, items=items)


TITLE_CHARS = 200


def _title(value: str | None) -> str | None:
    """A title on one line, at most :data:`TITLE_CHARS` characters; None for an empty one."""
    text = " ".join((value or "").split())
    if not text:
        return None
    return text if len(text) <= TITLE_CHARS else text[:TITLE_CHARS - 1] + "…"


class StoredCall(StoredRow):
    """One ``llm_calls`` row: every column, as recorded."""

    id: str
    trace_id: str | None
    purpose: str
    model: str
    endpoint: str
    template_name: str | None
    template_hash: str | None
    request_hash: str
    messages: JsonValue
    params: JsonValue
    response_text: str | None
    parsed: JsonValue
    input_tokens: int
    output_tokens: int
    latency_ms: float
    attempts: int
    status: str
    error: str | None
    cached: bool
    created_at: datetime
    usage_known: bool
    cost_usd: float | None = None
    cost_note: str | None = None


class CallLogPage(StoredRow):
    """One page of the LLM call log, with the number of calls matching."""

    total: int
    page: int
    page_size: int
    items: list[StoredCall]


class TurnMessage(StoredRow):
    """A checklist turn's learner message: its text, its number among the learner's messages
    (``number`` of ``learner_messages`` so far in the session), its seq and the judge's call ids."""

    message: str | None
    message_seq: int
    number: int | None
    learner_messages: int
    call_ids: list[str]


def trace(conn: Connection, evaluation_id: str) -> dict[str, Any] | None:
    """One evaluation in full: the row with its payload, its scores, its judge calls, its patterns."""
    row = conn.execute(select(evaluations).where(_E.id == evaluation_id)).first()
    if row is None:
        return None
    ev = dict(row._mapping)
    ev["score_normalised"] = _score(ev.get("percentage"))
    score_rows = [dict(r._mapping) for r in conn.execute(
        select(scores).where(scores.c.evaluation_id == evaluation_id).order_by(scores.c.id))]
    payload = ev.get("payload")
    turn = _checklist_turn(conn, ev["trace_id"], payload) if ev.get("kind") == "checklist" else None
    if turn is not None:  # a checklist turn: its own calls, not the whole session's
        calls = [c.model_dump() for c in _turn_calls(conn, ev["trace_id"], turn.message_seq, turn.call_ids)]
    elif ev.get("trace_id"):
        calls = [dict(r._mapping) for r in conn.execute(
            select(llm_calls).where(llm_calls.c.trace_id == ev["trace_id"])
            .order_by(llm_calls.c.created_at, llm_calls.c.id).limit(500))]
    else:
        calls = []
    found = conn.execute(
        select(patterns.c.id, patterns.c.title, patterns.c.impact)
        .join(pattern_evaluations, pattern_evaluations.c.pattern_id == patterns.c.id)
        .where(pattern_evaluations.c.evaluation_id == evaluation_id).order_by(patterns.c.created_at.desc())).all()
    return {"evaluation": ev, "scores": score_rows, "calls": calls, "patterns": [dict(p._mapping) for p in found],
            "turn": turn.model_dump(exclude={"call_ids"}) if turn is not None else None}


def _checklist_turn(conn: Connection, session_id: str | None, payload: object) -> TurnMessage | None:
    """The learner message of the checklist turn whose payload this is (None if it names none)."""
    if not isinstance(payload, dict) or not session_id or not isinstance(payload.get("message_seq"), int):
        return None
    seq = payload["message_seq"]
    m = checklist_messages.c
    user = and_(m.session_id == session_id, m.role == "user")
    text = conn.execute(select(m.content).where(m.session_id == session_id, m.seq == seq)).scalar()
    number, total = conn.execute(
        select(func.sum(case((m.seq <= seq, 1), else_=0)), func.count()).where(user)).one()
    call_ids = payload.get("call_ids")
    return TurnMessage(message=text, message_seq=seq, number=int(number or 0) or None, learner_messages=int(total),
                       call_ids=[str(i) for i in call_ids] if isinstance(call_ids, list) else [])


def _turn_calls(conn: Connection, session_id: str, seq: int, call_ids: list[str]) -> list[StoredCall]:
    """The calls of one checklist turn: the judge's (its call ids) and the tutor's reply to that
    message (a tutor call whose conversation ends at message ``seq``; a retried reply too). The
    tutor answers after the judge, so its calls are looked for from the judge's first call on."""
    c = llm_calls.c
    order = (c.created_at, c.id)
    judge = [StoredCall.of(r._mapping) for r in conn.execute(select(llm_calls).where(c.id.in_(call_ids))
                                                             .order_by(*order))] if call_ids else []
    tutor_q = select(llm_calls).where(c.trace_id == session_id, c.purpose == CHECKLIST_TUTOR)
    if judge:
        tutor_q = tutor_q.where(c.created_at >= judge[0].created_at).order_by(*order).limit(_TURN_TUTOR_CALLS)
    else:
        tutor_q = tutor_q.order_by(*order).limit(500)
    tutor = [call for call in (StoredCall.of(r._mapping) for r in conn.execute(tutor_q))
             if _conversation_length(call.messages) == seq]
    return sorted(judge + tutor, key=lambda call: (call.created_at, call.id))


def _conversation_length(messages: JsonValue) -> int:
    """The messages of a tutor request that are the conversation (not its system instructions)."""
    return sum(1 for x in messages if isinstance(x, dict) and x.get("role") != "system") \
        if isinstance(messages, list) else -1


def failure_types(conn: Connection, limit: int = 200) -> list[str]:
    """The failure values present (for the explorer's filter)."""
    rows = conn.execute(select(_E.failure).where(_E.failure.is_not(None)).group_by(_E.failure)
                        .order_by(_E.failure).limit(limit))
    return [r[0] for r in rows]


def call_page(conn: Connection, *, page: int = 1, page_size: int = 50, purpose: str | None = None,
              status: str | None = None, model: str | None = None, trace_id: str | None = None,
              since: datetime | None = None, until: datetime | None = None,
              kind: str | None = None) -> CallLogPage:
    """One page of the LLM call log (newest first), with the number matching; ``kind``: the calls
    of evaluations of that kind only (as the overview's call figures count them)."""
    c = llm_calls.c
    where = [col == v for col, v in ((c.purpose, purpose), (c.model, model), (c.trace_id, trace_id))
             if v is not None]
    if status is not None:
        where.append(call_status_is(status))  # failed: any failed call
    if kind is not None:
        where.append(_of_evaluations(EvaluationFilter(kind=kind)))
    if since is not None:
        where.append(c.created_at >= since)
    if until is not None:
        where.append(c.created_at < until)
    cond = and_(*where) if where else None
    count_q = select(func.count()).select_from(llm_calls)
    rows_q = select(llm_calls).order_by(c.created_at.desc(), c.id).limit(page_size).offset((page - 1) * page_size)
    if cond is not None:
        count_q, rows_q = count_q.where(cond), rows_q.where(cond)
    return CallLogPage(total=int(conn.execute(count_q).scalar_one()), page=page, page_size=page_size,
                       items=[StoredCall.of(r._mapping) for r in conn.execute(rows_q)])


def get_call(conn: Connection, call_id: str) -> StoredCall | None:
    row = conn.execute(select(llm_calls).where(llm_calls.c.id == call_id)).first()
    return StoredCall.of(row._mapping) if row is not None else None
