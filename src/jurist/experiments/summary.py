"""An experiment's summary.json: counts, scores per rubric and overall, failures, cost."""

from __future__ import annotations

import statistics
from typing import Iterable

from pydantic import JsonValue

from jurist.experiments.records import ExperimentItem, ExperimentRecord

SHOWN_FAILURES = 100  # failed items listed by id and error in summary.json (all are in their files)


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 4) if values else None


def _rate(passed: int, of: int) -> float | None:
    return round(passed / of, 4) if of else None


def build_summary(record: ExperimentRecord, items: Iterable[ExperimentItem]) -> dict[str, JsonValue]:
    """summary.json's content, from the experiment's stored items."""
    items = list(items)
    per_rubric: dict[str, JsonValue] = {}
    for ref in record.rubrics:
        scores = [s.score for i in items if (s := i.scores.get(ref.id)) is not None and s.score is not None]
        judged = [s for i in items if (s := i.scores.get(ref.id)) is not None]
        passed = sum(1 for s in judged if s.passed)
        with_verdict = sum(1 for s in judged if s.passed is not None)
        per_rubric[ref.id] = {"name": ref.name, "average": _mean(scores), "scored": len(scores),
                              "failed": len(judged) - len(scores), "pass_rate": _rate(passed, with_verdict)}
    totals = [i.score for i in items if i.score is not None]
    percentages = [i.percentage for i in items if i.percentage is not None]
    verdicts = [i.passed for i in items if i.passed is not None]
    failed = [i for i in items if i.status == "failed"]
    costs = [i.cost_usd for i in items if i.cost_usd is not None]
    unknown = sum(1 for i in items if i.cost_note)
    return {
        "experiment": record.name,
        "dataset": record.dataset,
        "dataset_version": record.dataset_version,
        "target": record.target,
        "judge_models": list(record.judge_models),
        "status": record.status,
        "items": {"total": record.items_total, "done": len(items), "scored": len(items) - len(failed),
                  "failed": len(failed), "not_done": max(0, record.items_total - len(items))},
        "overall": {"average_score": _mean(totals), "max_score": items[0].max_score if items else None,
                    "average_percentage": _mean(percentages), "pass_rate": _rate(sum(verdicts), len(verdicts))},
        "per_rubric": per_rubric,
        "failures": [{"item_id": i.item_id, "error": i.error} for i in failed[:SHOWN_FAILURES]],
        "failures_not_shown": max(0, len(failed) - SHOWN_FAILURES),
        "cost_usd": round(sum(costs), 9) if costs else None,
        "cost_note": (f"{unknown} of {len(items)} items had a call of unknown cost: the total counts the known "
                      "costs only") if unknown else None,
    }
