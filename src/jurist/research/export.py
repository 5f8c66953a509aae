"""The record in the store, and out of it as the note's folder.

In the store: one ``evaluations`` row (kind ``research``, id = logId,
subject_id = queryId, payload = the record's JSON) and ``scores`` rows keyed
``overall``, ``<stage>.overall`` and ``<stage>.<dimension>``, each with the hash of
the judges' prompt that produced it (``template_hash``; see :func:`template_hash`).

Exported (``jurist export <logId>``)::

    {output_dir}/{logId}/
        evaluation.json                 the full record
        plan_attempts/attempt_N.json    each plan attempt
        evaluator_responses/<role>.json every response of that role, all stages
                                        (also escalation.json and plan_critic.json)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Union

from pydantic import BaseModel, JsonValue

from jurist.errors import InputError, PayloadError
from jurist.judges.panel import RoleResult
from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.research.records import AnswerEvaluation, EvaluationRecord, PlanEvaluation, RetrievalEvaluation
from jurist.jsonfiles import write_json
from jurist.store import EvaluationRow, Store
from jurist.store.rows import ColumnValue, Facets

KIND = "research"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
Section = Union[PlanEvaluation, RetrievalEvaluation, AnswerEvaluation]


def _section(rec: EvaluationRecord, stage: str) -> Section | None:
    sections: dict[str, Section | None] = {st.PLAN: rec.plan_evaluation, st.RETRIEVAL: rec.retrieval_evaluation,
                                           st.ANSWER: rec.answer_evaluation}
    return sections[stage]


def _final_results(rec: EvaluationRecord, stage: str) -> list[RoleResult]:
    """The evaluator results behind a stage's final scores."""
    sec = _section(rec, stage)
    if sec is None:
        return []
    if isinstance(sec, RetrievalEvaluation):
        return list(sec.evaluator_results)
    pick = sec.chosen_attempt if isinstance(sec, PlanEvaluation) else sec.final_attempt
    for a in sec.attempts:
        if a.attempt_number == pick and not a.evaluation_skipped:
            return list(a.evaluator_results)
    return []


# Every row carries every column, as the rubric rows do: the store writes the
# rows of many evaluations in one executemany.
_SCORE_DEFAULTS: dict[str, ColumnValue] = {
    "key": None, "name": None, "score": None, "max_score": 1.0, "weight": None, "status": "scored", "reason": None,
    "judge_model": None, "template_hash": None, "input_tokens": 0, "output_tokens": 0, "latency_ms": 0.0,
    "call_id": None,
}


def _models(results: list[RoleResult]) -> list[str]:
    return sorted({r.model for r in results if r.model})


def template_hash(results: list[RoleResult]) -> str | None:
    """The hash of the prompt that produced these judgements: the one prompt text their calls used;
    None when none was used (the local judge has no prompt) or several were (no one version
    produced the score, so no version claims it)."""
    hashes = {r.template_hash for r in results if r.status == "ok"}
    return hashes.pop() if len(hashes) == 1 else None


def evaluation_row(rec: EvaluationRecord) -> EvaluationRow:
    """The ``evaluations`` row of a record; its payload is the record."""
    sections = {s: sec for s in st.STAGE_NAMES if (sec := _section(rec, s)) is not None}
    skipped = [s for s, sec in sections.items() if sec.evaluation_skipped]
    status = "skipped" if sections and len(skipped) == len(sections) else "partial" if skipped else "scored"
    models = sorted({m for s in sections for m in _models(_final_results(rec, s))})
    score = rec.overall_score
    return EvaluationRow(
        id=rec.log_id, subject_id=rec.query_id, trace_id=rec.trace_id, status=status, score=score, max_score=1.0,
        percentage=None if score is None else round(score * 100.0, 2), judge_model=",".join(models)[:200] or None,
        payload=rec, **facets(rec),
    )


def facets(rec: EvaluationRecord) -> Facets:
    """The dashboard's columns: passed when every evaluated stage passed; the primary failure
    is the lowest dimension of the first stage that did not pass (``plan.intent_alignment``),
    or ``evaluation_skipped``."""
    plan = rec.plan_evaluation
    sections = [(s, sec) for s in st.STAGE_NAMES if (sec := _section(rec, s)) is not None]
    verdicts = [sec.passed for _, sec in sections if not sec.evaluation_skipped and sec.passed is not None]
    failure = None
    for stage, sec in sections:
        if sec.evaluation_skipped:
            failure = failure or "evaluation_skipped"
        elif sec.passed is False:
            scores = sec.scores if isinstance(sec, RetrievalEvaluation) else sec.final_scores
            worst = min(scores.items(), key=lambda kv: kv[1])[0] if scores else "overall"
            failure = f"{stage}.{worst}"
            break
    escalated = bool(plan and plan.escalated_to_large_model) or any(
        a.escalation is not None for _, sec in sections
        for a in (sec.attempts if isinstance(sec, (PlanEvaluation, AnswerEvaluation)) else [sec]))
    return {
        "passed": all(verdicts) if verdicts else None,
        "failure": failure,
        "escalated": escalated,
        "iterations": max(1, plan.total_iterations) if plan else 1,
        "max_attempts_hit": plan is not None and max_attempts_hit(plan),
    }


def max_attempts_hit(plan: PlanEvaluation) -> bool:
    """The plan loop made its last allowed attempt (of more than one) and that attempt did not pass."""
    last = plan.attempts[-1] if plan.attempts else None
    return (last is not None and plan.max_attempts is not None and plan.max_attempts > 1
            and len(plan.attempts) >= plan.max_attempts and last.passed is False and not last.evaluation_skipped)


def score_rows(rec: EvaluationRecord, config: ResearchConfig) -> list[dict[str, ColumnValue]]:
    """``scores`` rows: the record's overall, each stage's overall and each dimension."""
    every = [r for stage in st.STAGE_NAMES for r in _final_results(rec, stage)]
    rows: list[dict[str, ColumnValue]] = [{
        "key": "overall", "name": "Overall", "score": rec.overall_score, "max_score": 1.0, "weight": None,
        "status": "scored" if rec.overall_score is not None else "skipped", "reason": rec.skip_reason,
        "template_hash": template_hash(every),
    }]
    for stage in st.STAGE_NAMES:
        sec = _section(rec, stage)
        if sec is None:
            continue
        results = _final_results(rec, stage)
        models = ",".join(_models(results))[:200] or None
        scores = sec.scores if isinstance(sec, RetrievalEvaluation) else sec.final_scores
        latency = round(sum(r.latency_ms for r in results), 3)
        rows.append({
            "key": f"{stage}.overall", "name": f"{stage.capitalize()} overall", "score": sec.overall,
            "max_score": 1.0, "weight": None, "latency_ms": latency, "judge_model": models,
            "template_hash": template_hash(results), "status": "skipped" if sec.evaluation_skipped else "scored",
            "reason": sec.skip_reason if sec.evaluation_skipped else sec.scoring_note,
        })
        for key, dim in config.stages.of(stage).dimensions.items():
            value = scores.get(key)
            status = "skipped" if sec.evaluation_skipped else "scored" if value is not None else "unscored"
            scorers = [r for r in results if key in r.scores]
            label = next((d.label for d in st.DIMENSIONS[stage] if d.key == key), key)
            rows.append({
                "key": f"{stage}.{key}", "name": label, "score": value, "max_score": 1.0, "weight": dim.weight,
                "status": status, "reason": "; ".join(r.critique for r in scorers if r.critique)[:2000] or None,
                "judge_model": ",".join(_models(scorers))[:200] or None, "template_hash": template_hash(scorers),
            })
    return [{**_SCORE_DEFAULTS, **row} for row in rows]


def find_record(store: Store, log_id: str) -> EvaluationRecord:
    """The stored record of ``log_id`` (read by :func:`jurist.payloads.read_payload`, a record
    stored by an older version included); InputError when there is none, PayloadError when the
    payload is not a research record."""
    from jurist.payloads import read_payload

    row = store.evaluation(log_id, kind=KIND)
    if row is None:
        raise InputError(f"no research evaluation with log id {log_id!r} in {store.engine.url.render_as_string()}; "
                         "check the id (the logId printed by the research run) and JURIST_DATABASE_URL")
    record = read_payload(KIND, row.payload)
    if not isinstance(record, EvaluationRecord):
        raise PayloadError(f"the payload of research evaluation {log_id!r} is a {record.kind} payload", kind=KIND)
    return record


def _role_file(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:100] or "unknown"


def _json(model: BaseModel) -> dict[str, JsonValue]:
    """A record's part as the record's JSON writes it (camelCase)."""
    data: dict[str, JsonValue] = model.model_dump(mode="json", by_alias=True)
    return data


def write_export(record: EvaluationRecord | Mapping[str, Any], output_dir: str | Path) -> Path:
    """Write the note's folder for one record (JSON as stored, camelCase); a record given as
    JSON data is read as an :class:`EvaluationRecord` first."""
    rec = record if isinstance(record, EvaluationRecord) else EvaluationRecord.model_validate(record)
    if not _SAFE_ID.match(rec.log_id):
        raise InputError(f"the record's logId {rec.log_id!r} cannot name a folder")
    folder = Path(output_dir) / rec.log_id
    (folder / "plan_attempts").mkdir(parents=True, exist_ok=True)
    (folder / "evaluator_responses").mkdir(parents=True, exist_ok=True)
    write_json(folder / "evaluation.json", rec.to_json())
    responses: dict[str, list[dict[str, JsonValue]]] = {}

    def add(name: str, stage: str, attempt: int | None, part: BaseModel | None) -> None:
        if part is not None:
            responses.setdefault(_role_file(name), []).append({"stage": stage, "attempt": attempt, **_json(part)})

    def add_results(stage: str, attempt: int | None, results: list[RoleResult]) -> None:
        for r in results:
            add(r.role or "unknown", stage, attempt, r)

    plan = rec.plan_evaluation
    if plan is not None:
        for a in plan.attempts:
            write_json(folder / "plan_attempts" / f"attempt_{a.attempt_number}.json", _json(a))
            add_results(st.PLAN, a.attempt_number, a.evaluator_results)
            add("escalation", st.PLAN, a.attempt_number, a.escalation)
            add("plan_critic", st.PLAN, a.attempt_number, a.iteration_decision)
        add("escalation", st.PLAN, None, plan.meta_review)
    ret = rec.retrieval_evaluation
    if ret is not None:
        add_results(st.RETRIEVAL, None, ret.evaluator_results)
        add("escalation", st.RETRIEVAL, None, ret.escalation)
    for answer in rec.answer_evaluation.attempts if rec.answer_evaluation is not None else []:
        add_results(st.ANSWER, answer.attempt_number, answer.evaluator_results)
        add("escalation", st.ANSWER, answer.attempt_number, answer.escalation)
    for name, entries in responses.items():
        write_json(folder / "evaluator_responses" / f"{name}.json", entries)
    return folder


def export_record(store: Store, log_id: str, output_dir: str | Path) -> Path:
    """Read ``log_id`` from the store and write its folder; returns the folder."""
    return write_export(find_record(store, log_id), output_dir)
