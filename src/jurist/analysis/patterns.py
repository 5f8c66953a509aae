"""The offline pattern detector: what low-scoring evaluations have in common.

``run_analysis`` loads the newest evaluations (bounded by ``limit``), the text
each one judged (:mod:`jurist.analysis.texts`: from the store, so sessions
posted to the API or scored in memory count as much as files) and its per-item
scores; merges the evaluations of each subject into one (a session scored five
times counts once, with its mean score); finds the features whose subjects
score significantly lower (:mod:`jurist.analysis.stats`), one finding per
feature, and one per group of subjects: terms that occur in exactly the same
subjects ("latest" and "breakthroughs" in the same 16 queries) are one finding,
named by all its terms (:func:`one_per_group`); puts each finding into words (:mod:`jurist.analysis.writer`) and
stores the run, its patterns and the evaluations each pattern covers (every
evaluation of its subjects). Database reads and the statistics
run in worker threads, never on the event loop.

Running an analysis needs the ``analysis`` extra (scipy); reading the stored
patterns (:func:`latest_patterns`) does not, so the statistics modules are
imported by :func:`run_analysis` only.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection

from jurist.analysis.prompts import hash_labels
from jurist.analysis.texts import texts_of
from jurist.config import Settings
from jurist.errors import ConfigError, InputError, NotFound
from jurist.extras import require_extra
from jurist.ids import new_id
from jurist.models.model import Model
from jurist.models.registry import resolve_model, resolve_ref, writes_text
from jurist.store import Store
from jurist.store import analysis as q
from jurist.store.analysis import AnalysedEvaluation, AnalysisRun, Pattern, PatternReport, RunEnd, ScoredItem

if TYPE_CHECKING:  # pragma: no cover
    from jurist.analysis.stats import Finding, Subject
    from jurist.analysis.writer import Text

KINDS = ("rubric", "gate", "research", "checklist")
MAX_PATTERNS = 50
MAX_LIMIT = 100_000


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _aware(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InputError(f"{name} must be a date and time")
    # In UTC: SQLite keeps times as text, so every bound must use the same offset.
    return value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)


def check_params(kind: str | None, since: datetime | None, until: datetime | None, min_count: int, alpha: float,
                 limit: int) -> tuple[datetime | None, datetime | None]:
    """Raise InputError for a bad filter or threshold; return the dates made timezone-aware (UTC)."""
    if kind is not None and kind not in KINDS:
        raise InputError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    since, until = _aware(since, "since"), _aware(until, "until")
    if since is not None and until is not None and since >= until:
        raise InputError("since must be earlier than until")
    if not isinstance(min_count, int) or min_count < 2:
        raise InputError("min_count must be an integer of at least 2")
    if not 0 < alpha < 1:
        raise InputError("alpha must be between 0 and 1")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT:,}")
    return since, until


def writer_model(settings: Settings, writer: str | None, store: Store) -> Model | None:
    """The LLM that writes the patterns, or None (statistics only).

    An explicit ``writer`` that cannot be used is the caller's error
    (ConfigError); a configured judge that cannot be used, or the local judge,
    means the statistics write the text.
    """
    ref = writer or settings.judge
    if not ref:
        return None
    try:
        full = resolve_ref(ref, settings)
        if not writes_text(full):
            if writer:
                raise ConfigError(f"the writer must be an LLM; {writer!r} is the offline local judge")
            return None
        return resolve_model(full, settings, sink=store)
    except ConfigError:
        if writer:
            raise
        return None


def build_subjects(rows: list[AnalysedEvaluation], texts: dict[str, str],
                   score_rows: list[ScoredItem]) -> list[Subject]:
    """One :class:`Subject` per subject (kind and ``subject_id``) of ``rows`` (newest first): the
    mean of its evaluations' scores overall and per score key, the newest text, every judge model
    and prompt version that scored it, its evaluation ids."""
    from jurist.analysis.stats import Subject

    by_eval: dict[str, list[ScoredItem]] = {}
    for s in score_rows:
        by_eval.setdefault(s.evaluation_id, []).append(s)
    groups: dict[str, list[AnalysedEvaluation]] = {}
    for r in rows:
        groups.setdefault(f"{r.kind}/{r.subject_id}", []).append(r)
    subjects = []
    for key, evals in groups.items():
        dims: dict[str, list[tuple[float, str | None]]] = {}
        hashes = set()
        for r in evals:
            seen: set[str] = set()
            for s in by_eval.get(r.id, []):
                if s.template_hash:
                    hashes.add(s.template_hash)
                if s.max_score and s.key not in seen:
                    seen.add(s.key)
                    dims.setdefault(s.key, []).append((s.score / s.max_score, s.template_hash))
        text = next((texts[r.id] for r in evals if r.id in texts), None)
        subjects.append(Subject(
            key, sum(r.percentage for r in evals) / 100.0 / len(evals), text,
            frozenset(r.judge_model for r in evals if r.judge_model), frozenset(hashes),
            {k: (sum(v for v, _ in scored) / len(scored), frozenset(h for _, h in scored if h))
             for k, scored in dims.items()},
            tuple(r.id for r in evals)))
    return subjects


TERM_SEPARATOR = ", "  # between the terms of a finding that several terms flag alike (terms are single words)


def one_per_group(findings: list[Finding]) -> list[Finding]:
    """One finding per group of affected subjects: the term findings that flag exactly the same
    subjects become the first (strongest) of them, its feature all their terms (``"breakthroughs,
    latest"``) and ``also_lower_on`` every score any of them was found on. Other features are kept
    as they are: a judge model or a prompt version is a different explanation than a word."""
    groups: dict[frozenset[str], Finding] = {}
    terms: dict[frozenset[str], list[str]] = {}
    out = []
    for f in findings:
        if f.feature_type != "term":
            out.append(f)
            continue
        key = frozenset(f.affected)
        first = groups.get(key)
        if first is None:
            groups[key], terms[key] = f, [f.feature]
            out.append(f)
            continue
        terms[key].append(f.feature)
        first.also_lower_on.extend(d for d in [f.dimension, *f.also_lower_on]
                                   if d != first.dimension and d not in first.also_lower_on)
    for key, first in groups.items():
        first.feature = TERM_SEPARATOR.join(terms[key])
    return out


def _patterns(run_id: str, findings: list[Finding], texts: list[Text], at: datetime) -> list[Pattern]:
    """The patterns to store, each with every evaluation it covers."""
    return [Pattern(
        id=new_id(), run_id=run_id, impact=f.impact, feature_type=f.feature_type, feature=f.feature[:300],
        dimension=f.dimension[:200], affected_count=f.affected_count, mean_affected=f.mean_affected,
        mean_rest=f.mean_rest, effect_size=f.effect_size, p_value=f.p_value, test="mann-whitney-u", title=t.title,
        description=t.description, suggested_fix=t.suggested_fix, writer=t.writer, created_at=at,
        evaluation_ids=tuple(sorted(set(f.evaluation_ids))),
    ) for f, t in zip(findings, texts)]


def _save_results(conn: Connection, run_id: str, found: list[Pattern], end: RunEnd) -> None:
    q.insert_patterns(conn, found)
    q.finish_run(conn, run_id, end)


async def run_analysis(
    store: Store,
    settings: Settings,
    *,
    kind: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    writer: str | None = None,
    min_count: int = 5,
    alpha: float = 0.05,
    limit: int = 20000,
) -> PatternReport:
    """Analyse the newest ``limit`` evaluations (filtered by kind and time); store and return the run
    with its patterns, as :func:`latest_patterns` does. MissingExtra without the ``analysis`` extra."""
    since, until = check_params(kind, since, until, min_count, alpha, limit)
    require_extra("analysis", "The failure-pattern analysis")
    from jurist.analysis.stats import find_patterns
    from jurist.analysis.writer import STATISTICS, write_patterns
    from jurist.prompt_router import PromptRouter

    model = writer_model(settings, writer, store)  # builds a client; no I/O
    run_id = new_id()
    params = {"kind": kind, "since": since.isoformat() if since else None,
              "until": until.isoformat() if until else None, "writer": writer, "min_count": min_count,
              "alpha": alpha, "limit": limit}
    await store.awrite(q.insert_run, AnalysisRun(id=run_id, status="running", params=params, evaluations=0,
                                                 created_at=_utcnow()))
    try:
        rows = await store.aread(q.evaluations_for_analysis, kind=kind, since=since, until=until, limit=limit)
        texts = await texts_of(store, rows)
        score_rows = await store.aread(q.score_rows_of, [r.id for r in rows])
        labels = await hash_labels(store)
        subjects = await asyncio.to_thread(build_subjects, rows, texts, score_rows)
        findings = await asyncio.to_thread(lambda: find_patterns(subjects, min_count=min_count, alpha=alpha,
                                                                 hash_label=labels))
        findings = one_per_group(findings)[:MAX_PATTERNS]
        written = await write_patterns(findings, model, timeout=settings.rubric_timeout,
                                       prompts=PromptRouter(store))
        used = sorted({t.writer for t in written if t.writer != STATISTICS})
        found = _patterns(run_id, findings, written, _utcnow())
        done = RunEnd(status="done", evaluations=len(rows), writer_model=used[0] if used else None,
                      finished_at=_utcnow())
        await store.awrite(_save_results, run_id, found, done)
    except BaseException as exc:
        failed = RunEnd(status="failed", error=f"{type(exc).__name__}: {exc}"[:2000], finished_at=_utcnow())
        await asyncio.shield(store.awrite(q.finish_run, run_id, failed))
        raise
    finally:
        if model is not None:
            await model.aclose()
    return await latest_patterns(store, run_id)


async def latest_patterns(store: Store, run_id: str | None = None) -> PatternReport:
    """The given run, else the newest finished one (None before the first), with its patterns, each
    with its first 100 ``evaluation_ids``. NotFound for an unknown ``run_id``."""
    run = await store.aread(q.get_run, run_id)
    if run is None:
        if run_id is not None:
            raise NotFound(f"no analysis run {run_id!r}")
        return PatternReport(run=None, patterns=[])
    return PatternReport(run=run, patterns=await store.aread(q.patterns_of_run, run.id))
