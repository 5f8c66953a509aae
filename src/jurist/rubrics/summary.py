"""Batch statistics: summary.json in the design note's shape, plus failure counts."""

from __future__ import annotations

import math
import statistics
from typing import Any

from jurist.rubrics.models import RubricSet


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


class SummaryBuilder:
    """Accumulates per-session results (a few numbers each, not the results)."""

    def __init__(self, rubric_set: RubricSet) -> None:
        self.rubric_set = rubric_set
        self.totals: list[float] = []
        self.sessions = 0
        self.sessions_failed = 0  # no rubric scored
        self.sessions_partial = 0
        self.per_rubric: dict[str, list[float]] = {r.id: [] for r in rubric_set.rubrics}
        self.failures: dict[str, int] = {r.id: 0 for r in rubric_set.rubrics}
        self.names = {r.id: r.name for r in rubric_set.rubrics}
        self.input_errors: list[str] = []

    def add(self, result: dict[str, Any]) -> None:
        self.sessions += 1
        total = result.get("summary", {}).get("total_score")
        if total is not None:
            self.totals.append(float(total))
        status = result.get("status")
        if status == "failed":
            self.sessions_failed += 1
        elif status == "partial":
            self.sessions_partial += 1
        for rs in result.get("rubric_scores", []):
            rid = rs.get("rubric_id")
            if rid not in self.per_rubric:
                continue
            if rs.get("status") == "scored" and rs.get("score") is not None:
                self.per_rubric[rid].append(float(rs["score"]))
            else:
                self.failures[rid] += 1

    def add_input_error(self, message: str) -> None:
        self.input_errors.append(message)

    @property
    def evaluations_failed(self) -> int:
        return sum(self.failures.values())

    def build(self) -> dict[str, Any]:
        lo, hi = self.rubric_set.scale
        t = self.totals
        distribution = {str(k): 0 for k in range(math.floor(lo), math.ceil(hi) + 1)}
        for x in t:
            key = str(int(math.floor(x + 0.5)))
            distribution[key] = distribution.get(key, 0) + 1
        per_rubric = {}
        for rid, vals in self.per_rubric.items():
            attempted = len(vals) + self.failures[rid]
            per_rubric[rid] = {
                "name": self.names[rid],
                "average": _r(statistics.fmean(vals)) if vals else None,
                "median": _r(statistics.median(vals)) if vals else None,
                "scored": len(vals),
                "failed": self.failures[rid],
                "failure_rate": _r(self.failures[rid] / attempted) if attempted else 0.0,
            }
        return {
            "batch_summary": {
                "total_sessions": self.sessions,
                "average_score": _r(statistics.fmean(t)) if t else None,
                "median_score": _r(statistics.median(t)) if t else None,
                "std_deviation": _r(statistics.pstdev(t)) if len(t) > 1 else (0.0 if t else None),
                "score_distribution": distribution,
                "max_score": hi,
            },
            "per_rubric_summary": per_rubric,
            "failures": {
                "evaluations_failed": self.evaluations_failed,
                "sessions_with_failures": self.sessions_failed + self.sessions_partial,
                "sessions_without_score": self.sessions_failed,
                "input_errors": self.input_errors,
            },
            "rubrics_version": self.rubric_set.version,
        }
