"""Experiment records for the comparison's tests: two runs over one dataset, with the scores chosen."""

from __future__ import annotations

from collections.abc import Sequence

from jurist.experiments.records import DatasetItem, ExperimentItem, ExperimentRecord, ItemScore, RubricRef
from jurist.store import Store
from jurist.store import experiments as xq

WHEN = "2026-11-27T09:00:00+00:00"
RUBRICS = (RubricRef(id="correct", name="Correct", template_hash="t-correct"),
           RubricRef(id="concise", name="Concise", template_hash="t-concise"))


def record(name: str, *, items: int, dataset_version: str = "d1", judges: Sequence[str] = ("openai/judge",),
           rubrics: Sequence[RubricRef] = RUBRICS, status: str = "finished", cost: float | None = 0.25,
           target: str = "openai/app") -> ExperimentRecord:
    return ExperimentRecord(name=name, dataset="qa", dataset_version=dataset_version, target=target,
                            rubrics=list(rubrics), judge_models=list(judges), jurist_version="0.1.0",
                            status=status, created_at=WHEN, items_total=items, items_scored=items,
                            cost_usd=cost)  # type: ignore[arg-type]


def item(experiment: str, item_id: str, scores: dict[str, float | None], *, answer: str | None = "an answer",
         error: str | None = None, top: float = 5.0, evaluation_id: str | None = None) -> ExperimentItem:
    """An item scored ``scores`` (rubric id -> score, None: not scored); the overall is their mean,
    a pass is at least 70% of the scale (as the rubric scorer counts it)."""
    cells = {rid: ItemScore(score=s, max_score=top, passed=None if s is None else s / top >= 0.7,
                            status="scored" if s is not None else "evaluation_failed") for rid, s in scores.items()}
    known = [s for s in scores.values() if s is not None]
    scored = answer is not None and known and len(known) == len(scores)
    total = sum(known) / len(known) if scored else None
    return ExperimentItem(experiment=experiment, item_id=item_id, status="scored" if scored else "failed",
                          answer=answer, error=error, scores=cells, score=total, max_score=top if scored else None,
                          percentage=None if total is None else total / top * 100,
                          passed=None if total is None else total / top >= 0.7,
                          evaluation_id=evaluation_id or (f"ev-{experiment}-{item_id}" if answer else None),
                          judged_at=WHEN)


def run(name: str, rows: dict[str, tuple[float | None, float | None]], **kw: object) -> list[ExperimentItem]:
    """Items whose (correct, concise) scores are given per item id."""
    return [item(name, iid, {"correct": c, "concise": k}, **kw) for iid, (c, k) in rows.items()]  # type: ignore[arg-type]


def seed(store: Store, runs: dict[str, tuple[dict, list[ExperimentItem]]], ids: Sequence[str]) -> None:
    """Experiments (name -> (record options, items)) in the store, with the dataset version ``qa@d1``
    they ran on (one item per id: "Question <id>?", expecting "Answer <id>")."""
    items = [DatasetItem(id=i, input=f"Question {i}?", expected=f"Answer {i}") for i in ids]
    store.write(xq.add_dataset_version, "qa", "d1", items, "qa.jsonl")
    for name, (options, rows) in runs.items():
        store.write(xq.save_experiment, record(name, items=len(rows), **options))  # type: ignore[arg-type]
        for row in rows:
            store.write(xq.save_item, row)
