"""Batch statistics: summary.json (a :class:`BatchSummary`), plus failure counts and what the
run's calls cost (:func:`batch_cost`)."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING

from jurist.judges.outcome import OK
from jurist.rubrics.models import RubricSet
from jurist.rubrics.results import BatchCost, BatchStats, BatchSummary, FailureCounts, RubricResult, RubricStats

if TYPE_CHECKING:  # pragma: no cover
    from jurist.models.cost import CostBudget


MAX_LEVELS = 1001  # score_distribution lists every integer level of a scale at most this wide


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def batch_cost(budget: "CostBudget", *, sessions_not_scored: int = 0) -> BatchCost:
    """The cost block of summary.json from the run's budget (its running total); the run
    stopped by the budget when ``sessions_not_scored`` sessions were left for a rerun."""
    data: dict[str, object] = {"cost_usd": round(budget.spent_usd, 9), "calls": budget.calls,
                               "cost_unknown_calls": budget.unknown}
    if budget.unknown_notes:
        data["unknown_reasons"] = dict(sorted(budget.unknown_notes.items(), key=lambda kv: -kv[1]))
    if budget.max_usd is not None:
        data["max_cost_usd"] = budget.max_usd
    data |= {"stopped_by_budget": sessions_not_scored > 0, "sessions_not_scored": sessions_not_scored}
    return BatchCost.model_validate(data)


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

    def add(self, result: RubricResult) -> None:
        self.sessions += 1
        total = result.summary.total_score
        if total is not None:
            self.totals.append(total)
        if result.status == "failed":
            self.sessions_failed += 1
        elif result.status == "partial":
            self.sessions_partial += 1
        for rs in result.rubric_scores:
            if rs.rubric_id not in self.per_rubric:
                continue
            if rs.status == OK and rs.final_score is not None:
                self.per_rubric[rs.rubric_id].append(rs.final_score)
            else:
                self.failures[rs.rubric_id] += 1

    def add_input_error(self, message: str) -> None:
        self.input_errors.append(message)

    @property
    def evaluations_failed(self) -> int:
        return sum(self.failures.values())

    def build(self, cost: BatchCost | None = None) -> BatchSummary:
        lo, hi = self.rubric_set.scale
        t = self.totals
        levels = range(math.floor(lo), math.ceil(hi) + 1)
        # Every level of the scale, or on a scale wider than MAX_LEVELS the levels that occur.
        counts = dict.fromkeys(levels, 0) if len(levels) <= MAX_LEVELS else {}
        for x in t:
            level = int(math.floor(x + 0.5))
            counts[level] = counts.get(level, 0) + 1
        distribution = {str(k): counts[k] for k in sorted(counts)}
        per_rubric = {}
        for rid, vals in self.per_rubric.items():
            attempted = len(vals) + self.failures[rid]
            per_rubric[rid] = RubricStats(
                name=self.names[rid],
                average=_r(statistics.fmean(vals)) if vals else None,
                median=_r(statistics.median(vals)) if vals else None,
                scored=len(vals),
                failed=self.failures[rid],
                failure_rate=round(self.failures[rid] / attempted, 4) if attempted else 0.0,
            )
        summary = BatchSummary(
            batch_summary=BatchStats(
                total_sessions=self.sessions,
                average_score=_r(statistics.fmean(t)) if t else None,
                median_score=_r(statistics.median(t)) if t else None,
                std_deviation=_r(statistics.pstdev(t)) if len(t) > 1 else (0.0 if t else None),
                score_distribution=distribution,
                max_score=hi,
            ),
            per_rubric_summary=per_rubric,
            failures=FailureCounts(
                evaluations_failed=self.evaluations_failed,
                sessions_with_failures=self.sessions_failed + self.sessions_partial,
                sessions_without_score=self.sessions_failed,
                input_errors=list(self.input_errors),
            ),
            rubrics_version=self.rubric_set.version,
        )
        if cost is not None:
            summary.cost = cost  # given, so written (an optional field)
        return summary
