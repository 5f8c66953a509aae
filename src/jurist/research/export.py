"""The record in the store, and out of it as the note's folder.

In the store: one ``evaluations`` row (kind ``research``, id = logId,
subject_id = queryId, payload = the record's JSON) and ``scores`` rows keyed
``overall``, ``<stage>.overall`` and ``<stage>.<dimension>``.

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
from typing import Any

from jurist.errors import InputError
from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.research.records import EvaluationRecord, PlanEvaluation
from jurist.jsonfiles import write_json
from jurist.store import EvaluationRow, Store

KIND = "research"
_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _section(rec: EvaluationRecord, stage: str) -> Any:
    return {st.PLAN: rec.plan_evaluation, st.RETRIEVAL: rec.retrieval_evaluation,
            st.ANSWER: rec.answer_evaluation}[stage]


def _final_results(rec: EvaluationRecord, stage: str) -> list[Any]:
    """The evaluator results behind a stage's final scores."""
    sec = _section(rec, stage)
    if sec is None:
        return []
    if stage == st.RETRIEVAL:
        return list(sec.evaluator_results)
    pick = sec.chosen_attempt if stage == st.PLAN else sec.final_attempt
    for a in sec.attempts:
        if a.attempt_number == pick and not a.evaluation_skipped:
            return list(a.evaluator_results)
    return []


# Every row carries every column, as the rubric rows do: the store writes the
# rows of many evaluations in one executemany.
_SCORE_DEFAULTS: dict[str, Any] = {
    "key": None, "name": None, "score": None, "max_score": 1.0, "weight": None, "status": "scored", "reason": None,
    "judge_model": None, "template_hash": None, "input_tokens": 0, "output_tokens": 0, "latency_ms": 0.0,
    "call_id": None,
}


def _models(results: list[Any]) -> list[str]:
    return sorted({r.model for r in results if r.model})


def evaluation_row(rec: EvaluationRecord) -> EvaluationRow:
    """The ``evaluations`` row of a record; its payload is the record."""
    stages = [s for s in st.STAGE_NAMES if _section(rec, s) is not None]
    skipped = [s for s in stages if _section(rec, s).evaluation_skipped]
    status = "skipped" if stages and len(skipped) == len(stages) else "partial" if skipped else "scored"
    models = sorted({m for s in stages for m in _models(_final_results(rec, s))})
    score = rec.overall_score
    return EvaluationRow(
        id=rec.log_id, subject_id=rec.query_id, trace_id=rec.trace_id, status=status, score=score, max_score=1.0,
        percentage=None if score is None else round(score * 100.0, 2), judge_model=",".join(models)[:200] or None,
        payload=rec, **facets(rec),
    )


def facets(rec: EvaluationRecord) -> dict[str, Any]:
    """The dashboard's columns: passed when every evaluated stage passed; the primary failure
    is the lowest dimension of the first stage that did not pass (``plan.intent_alignment``),
    or ``evaluation_skipped``."""
    plan = rec.plan_evaluation
    sections = [(s, _section(rec, s)) for s in st.STAGE_NAMES if _section(rec, s) is not None]
    verdicts = [sec.passed for _, sec in sections if not sec.evaluation_skipped and sec.passed is not None]
    failure = None
    for stage, sec in sections:
        if sec.evaluation_skipped:
            failure = failure or "evaluation_skipped"
        elif sec.passed is False:
            scores = sec.scores if stage == st.RETRIEVAL else sec.final_scores
            worst = min(scores.items(), key=lambda kv: kv[1])[0] if scores else "overall"
            failure = f"{stage}.{worst}"
            break
    escalated = bool(plan and plan.escalated_to_large_model) or any(
        getattr(a, "escalation", None) is not None
        for _, sec in sections for a in [sec, *getattr(sec, "attempts", [])])
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


def score_rows(rec: EvaluationRecord, config: ResearchConfig) -> list[dict[str, Any]]:
    """``scores`` rows: the record's overall, each stage's overall and each dimension."""
    rows: list[dict[str, Any]] = [{
        "key": "overall", "name": "Overall", "score": rec.overall_score, "max_score": 1.0, "weight": None,
        "status": "scored" if rec.overall_score is not None else "skipped", "reason": rec.skip_reason,
    }]
    for stage in st.STAGE_NAMES:
        sec = _section(rec, stage)
        if sec is None:
            continue
        results = _final_results(rec, stage)
        models = ",".join(_models(results))[:200] or None
        scores = sec.scores if stage == st.RETRIEVAL else sec.final_scores
        latency = round(sum(r.latency for r in results), 3)
        rows.append({
            "key": f"{stage}.overall", "name": f"{stage.capitalize()} overall", "score": sec.overall,
            "max_score": 1.0, "weight": None, "latency_ms": latency, "judge_model": models,
            "status": "skipped" if sec.evaluation_skipped else "scored",
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
                "judge_model": ",".join(_models(scorers))[:200] or None,
            })
    return [{**_SCORE_DEFAULTS, **row} for row in rows]


def find_record(store: Store, log_id: str) -> dict[str, Any]:
    """The stored record (payload) of ``log_id``; InputError when there is none."""
    row = store.evaluation(log_id, kind=KIND)
    if row is not None:
        payload: dict[str, Any] = row["payload"]  # a JSON column
        return payload
    raise InputError(f"no research evaluation with log id {log_id!r} in {store.engine.url.render_as_string()}; "
                     "check the id (the logId printed by the research run) and JURIST_DATABASE_URL")


def _role_file(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:100] or "unknown"


def write_export(record: dict[str, Any], output_dir: str | Path) -> Path:
    """Write the note's folder for one record (JSON as stored, camelCase)."""
    log_id = str(record.get("logId", ""))
    if not _SAFE_ID.match(log_id):
        raise InputError(f"the record's logId {log_id!r} cannot name a folder")
    folder = Path(output_dir) / log_id
    (folder / "plan_attempts").mkdir(parents=True, exist_ok=True)
    (folder / "evaluator_responses").mkdir(parents=True, exist_ok=True)
    write_json(folder / "evaluation.json", record)
    responses: dict[str, list[dict[str, Any]]] = {}

    def add(name: str, stage: str, attempt: int | None, data: dict[str, Any] | None) -> None:
        if data:
            responses.setdefault(_role_file(name), []).append({"stage": stage, "attempt": attempt, **data})

    plan = record.get("planEvaluation") or {}
    for a in plan.get("attempts", []):
        n = a.get("attemptNumber")
        write_json(folder / "plan_attempts" / f"attempt_{n}.json", a)
        for r in a.get("evaluatorResults", []):
            add(r.get("role", "unknown"), st.PLAN, n, r)
        add("escalation", st.PLAN, n, a.get("escalation"))
        add("plan_critic", st.PLAN, n, a.get("iterationDecision"))
    add("escalation", st.PLAN, None, plan.get("metaReview"))
    ret = record.get("retrievalEvaluation") or {}
    for r in ret.get("evaluatorResults", []):
        add(r.get("role", "unknown"), st.RETRIEVAL, None, r)
    add("escalation", st.RETRIEVAL, None, ret.get("escalation"))
    for a in (record.get("answerEvaluation") or {}).get("attempts", []):
        n = a.get("attemptNumber")
        for r in a.get("evaluatorResults", []):
            add(r.get("role", "unknown"), st.ANSWER, n, r)
        add("escalation", st.ANSWER, n, a.get("escalation"))
    for name, entries in responses.items():
        write_json(folder / "evaluator_responses" / f"{name}.json", entries)
    return folder


def export_record(store: Store, log_id: str, output_dir: str | Path) -> Path:
    """Read ``log_id`` from the store and write its folder; returns the folder."""
    record = find_record(store, log_id)
    EvaluationRecord.model_validate(record)  # a payload that is not a research record fails here, clearly
    return write_export(record, output_dir)
