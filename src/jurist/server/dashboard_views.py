"""What the trace and research pages show, read from a stored evaluation.

Payloads differ per kind (rubric result.json, the gate's record, the research
EvaluationRecord in camelCase, a checklist turn); these functions turn one
into plain dicts and lists for the templates, tolerating missing or odd
fields (a payload is data from the past, not a contract). Nothing here marks
text as safe: the templates escape everything.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

STAGES = (("plan", "planEvaluation", "Stage 1: Planning"), ("retrieval", "retrievalEvaluation", "Stage 2: Retrieval"),
          ("answer", "answerEvaluation", "Stage 3: Answer"))


# -- template filters ---------------------------------------------------------
def num(value: Any, digits: int = 2) -> str:
    if value is None or isinstance(value, bool):
        return "—"
    try:
        return f"{float(value):.{digits}f}"
    except (TypeError, ValueError):
        return str(value)


def pct(value: Any, digits: int = 1) -> str:
    if value is None or isinstance(value, bool):
        return "—"
    try:
        return f"{float(value) * 100:.{digits}f}%"
    except (TypeError, ValueError):
        return str(value)


def count(value: Any) -> str:
    if value is None:
        return "—"
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


def when(value: Any) -> str:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return "—" if value is None else str(value)[:16].replace("T", " ")


def label(key: Any) -> str:
    """``intent_alignment`` -> ``Intent alignment``."""
    text = str(key).replace("_", " ").replace(".", " · ")
    return text[:1].upper() + text[1:]


def pretty(value: Any) -> str:
    """A JSON value as indented text (for <pre>); strings as they are."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def width(value: Any) -> int:
    """A 0..1 score as a bar width in percent (clamped)."""
    try:
        return max(0, min(100, round(float(value) * 100)))
    except (TypeError, ValueError):
        return 0


FILTERS = {"num": num, "pct": pct, "count": count, "when": when, "label": label, "pretty": pretty, "width": width}


# -- helpers -------------------------------------------------------------------
def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _messages(call: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    for m in _list(call.get("messages")):
        if isinstance(m, dict):
            content = m.get("content")
            out.append({"role": str(m.get("role", "?")), "content": content if isinstance(content, str)
                        else pretty(content)})
    return out


def call_view(call: dict[str, Any]) -> dict[str, Any]:
    return {**call, "message_list": _messages(call),
            "tokens": (call.get("input_tokens") or 0) + (call.get("output_tokens") or 0)}


# -- per kind --------------------------------------------------------------------
def rubric_section(payload: dict[str, Any]) -> dict[str, Any]:
    rubrics = []
    for r in _list(payload.get("rubric_scores")):
        r = _dict(r)
        rubrics.append({"id": r.get("rubric_id"), "name": r.get("rubric_name") or r.get("rubric_id"),
                        "score": r.get("score"), "max_score": r.get("max_score"), "status": r.get("status"),
                        "weight": r.get("weight"), "reasoning": r.get("reasoning"), "judge_model": r.get("judge_model"),
                        "items": [_dict(i) for i in _list(r.get("items"))]})
    return {"rubrics": rubrics, "session_id": payload.get("session_id"), "total": _dict(payload.get("total_score")),
            "status": payload.get("status")}


def gate_section(payload: dict[str, Any]) -> dict[str, Any]:
    attempts = []
    evals = {e.get("attempt"): e for e in map(_dict, _list(payload.get("evaluations"))) if e}
    for a in map(_dict, _list(payload.get("attempts"))):
        ev = _dict(a.get("evaluation")) or _dict(evals.get(a.get("number")))
        attempts.append({"number": a.get("number"), "kind": a.get("kind"), "text": a.get("text"),
                         "latency_ms": a.get("latency_ms"), "evaluation": ev,
                         "issues": [str(i) for i in _list(ev.get("issues"))]})
    accepted = payload.get("accepted_attempt")
    before = attempts[0] if len(attempts) > 1 else None
    after = next((a for a in attempts if a["number"] == accepted), attempts[-1] if attempts else None)
    return {"attempts": attempts, "accepted": accepted, "accept_reason": payload.get("accept_reason"),
            "answer": payload.get("answer"), "strategy": payload.get("strategy"), "evaluator": payload.get("evaluator"),
            "skipped": payload.get("evaluation_skipped"), "skip_reason": payload.get("skip_reason"),
            "error": payload.get("error"), "before": before, "after": after if before is not None else None,
            "calls": [_dict(c) for c in _list(payload.get("llm_calls"))]}


def checklist_section(payload: dict[str, Any]) -> dict[str, Any]:
    recalled = _dict(payload.get("recalled"))
    observations = _dict(payload.get("observations"))
    return {"title": payload.get("title"), "learner": payload.get("learner"), "mode": payload.get("mode"),
            "message_seq": payload.get("message_seq"), "status": payload.get("status"),
            "recalled": [{"id": k, "confidence": v, "observation": observations.get(k)} for k, v in recalled.items()],
            "unchecked": [str(u) for u in _list(payload.get("unchecked"))],
            "feedback": payload.get("feedback"), "dropped": [str(d) for d in _list(payload.get("dropped_ids"))],
            "recalled_count": payload.get("recalled_count"), "total_points": payload.get("total_points"),
            "session_id": payload.get("session_id"), "reason": payload.get("reason")}


def research_summary(payload: dict[str, Any]) -> dict[str, Any]:
    stages = []
    for key, field, title in STAGES:
        s = _dict(payload.get(field))
        stages.append({"key": key, "title": title, "overall": s.get("overall"), "passed": s.get("passed"),
                       "skipped": bool(s.get("evaluationSkipped")), "skip_reason": s.get("skipReason")})
    return {"query": payload.get("userQuery"), "overall": payload.get("overallScore"), "stages": stages}


def trace_view(found: dict[str, Any]) -> dict[str, Any]:
    ev = found["evaluation"]
    payload = _dict(ev.get("payload"))
    kind = ev.get("kind")
    section: dict[str, Any] = {}
    if kind == "rubric":
        section = rubric_section(payload)
    elif kind == "gate":
        section = gate_section(payload)
    elif kind == "checklist":
        section = checklist_section(payload)
    elif kind == "research":
        section = research_summary(payload)
    known = kind in ("rubric", "gate", "checklist", "research") and bool(section)
    return {"evaluation": ev, "kind": kind, "section": section, "known_payload": known and not payload.get("synthetic"),
            "payload_text": pretty(payload), "scores": found["scores"],
            "calls": [call_view(c) for c in found["calls"]], "patterns": found["patterns"]}


# -- research runtime view ----------------------------------------------------------
def _dimensions(scores: dict[str, Any], config: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for dim, score in scores.items():
        threshold = _dict(config.get(dim)).get("threshold")
        below = threshold is not None and isinstance(score, (int, float)) and score < threshold
        out.append({"key": dim, "label": label(dim), "score": score, "threshold": threshold, "below": below})
    return out


def _critiques(attempt: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in map(_dict, _list(attempt.get("evaluatorResults"))):
        if r.get("critique") or r.get("error"):
            out.append({"role": r.get("role"), "model": r.get("model"), "text": r.get("critique"),
                        "error": r.get("error"), "confidence": r.get("confidence")})
    return out


def _escalation(value: Any) -> dict[str, Any] | None:
    e = _dict(value)
    if not e:
        return None
    return {"trigger": e.get("trigger"), "triggers": [str(t) for t in _list(e.get("triggers"))],
            "model": e.get("model"), "review": e.get("panelReview"), "verdict": e.get("finalVerdict"),
            "scores": _dict(e.get("scores")), "status": e.get("status"), "error": e.get("error")}


def _attempt(a: dict[str, Any], number: int, total: int, dims: dict[str, Any]) -> dict[str, Any]:
    decision = _dict(a.get("iterationDecision"))
    return {
        "number": a.get("attemptNumber") or number, "total": total, "passed": a.get("passed"),
        "overall": a.get("overall"), "skipped": bool(a.get("evaluationSkipped")), "skip_reason": a.get("skipReason"),
        "dimensions": _dimensions(_dict(a.get("aggregatedScores")) or _dict(a.get("scores")), dims),
        "critiques": _critiques(a), "failed_rules": [str(r) for r in _list(a.get("failedRules"))],
        "decision": {"mode": decision.get("mode"), "critique": decision.get("critique"),
                     "feedback": decision.get("feedbackToPlanner"), "failure_type": decision.get("failureType"),
                     "issues": [_dict(i) for i in _list(decision.get("specificIssues"))]} if decision else None,
        "escalation": _escalation(a.get("escalation")), "note": a.get("scoringNote"),
        "plan": a.get("plan"), "answer": a.get("answer"), "feedback": a.get("feedback"),
    }


def research_view(ev: dict[str, Any]) -> dict[str, Any]:
    """The runtime view: one box per stage with its score and pass mark, attempts, critiques,
    escalation, skipped and severe-failure notices."""
    payload = _dict(ev.get("payload"))
    config = _dict(_dict(payload.get("config")).get("stages"))
    stages = []
    for key, field, title in STAGES:
        s = _dict(payload.get(field))
        cfg = _dict(config.get(key))
        dims = _dict(cfg.get("dimensions"))
        raw_attempts = [_dict(a) for a in _list(s.get("attempts"))]
        if not raw_attempts and s:
            raw_attempts = [s]  # retrieval: one evaluation, no loop
        total = max(len(raw_attempts), int(s.get("maxAttempts") or 0)) if key == "plan" else len(raw_attempts)
        attempts = [_attempt(a, i + 1, total, dims) for i, a in enumerate(raw_attempts)]
        final = _dict(s.get("finalScores")) or _dict(s.get("aggregatedScores"))
        severe = [{"key": d, "label": label(d), "score": final.get(d)} for d in _list(s.get("severeDimensions"))]
        stages.append({
            "key": key, "title": title, "present": bool(s), "overall": s.get("overall"), "passed": s.get("passed"),
            "pass_threshold": cfg.get("pass_threshold"), "skipped": bool(s.get("evaluationSkipped")),
            "skip_reason": s.get("skipReason"), "attempts": attempts,
            "final_dimensions": _dimensions(final, dims), "flagged_severe": bool(s.get("flaggedSevere")),
            "severe": severe, "warnings": [str(w) for w in _list(s.get("warnings"))
                                           if not (s.get("flaggedSevere") and "quality warning" in str(w).lower())],
            "all_warnings": [str(w) for w in _list(s.get("warnings"))],
            "escalated": bool(s.get("escalatedToLargeModel")), "meta_review": _escalation(s.get("metaReview")),
            "chosen": s.get("chosenAttempt") or s.get("finalAttempt"), "regenerated": s.get("regenerated"),
            "iterations": s.get("totalIterations"), "note": s.get("scoringNote"),
        })
    shown = {w for s in stages for w in s["all_warnings"]}
    return {"query": payload.get("userQuery"), "overall": payload.get("overallScore"),
            "skipped": bool(payload.get("evaluationSkipped")), "skip_reason": payload.get("skipReason"),
            "stages": stages, "warnings": [str(w) for w in _list(payload.get("warnings")) if str(w) not in shown]}
