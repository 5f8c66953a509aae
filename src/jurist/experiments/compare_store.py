"""What a comparison reads from the store: two experiments, their items and their dataset's inputs.

A store read (:meth:`Store.read <jurist.store.Store.read>` runs :func:`stored_runs` on a
connection); the statistics run after it, off the store's thread
(:func:`jurist.experiments.compare.compare_experiments`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.engine import Connection

from jurist.errors import NotFound
from jurist.experiments.records import DatasetItem, ExperimentItem, ExperimentRecord
from jurist.store import experiments as q

INPUT_CHARS = 2000  # of an item's input shown beside its answers


@dataclass
class StoredRuns:
    a: ExperimentRecord
    items_a: list[ExperimentItem]
    b: ExperimentRecord
    items_b: list[ExperimentItem]
    inputs: dict[str, str] = field(default_factory=dict)  # item id -> its input as text


def input_text(item: DatasetItem) -> str:
    """An item's input as one text: the text itself, or its last user message's text."""
    if isinstance(item.input, str):
        text = item.input
    else:
        users = [m for m in item.input if m.get("role") == "user"]
        content = users[-1].get("content") if users else None
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):  # content parts: their text
            text = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("text"))
        else:
            text = ""
    return text if len(text) <= INPUT_CHARS else text[:INPUT_CHARS] + "…"


def experiment_or_not_found(conn: Connection, name: str) -> ExperimentRecord:
    found = q.get_experiment(conn, name)
    if found is None:
        known = [r.name for r in q.list_experiments(conn, limit=20)]
        raise NotFound(f"no experiment named {name!r}" + (f" (experiments: {', '.join(known)})" if known else
                                                            " (the store holds none: jurist experiment run makes one)"))
    return found


def stored_runs(conn: Connection, a: str, b: str) -> StoredRuns:
    """Experiments ``a`` and ``b`` with their items; NotFound naming the stored ones when one is missing."""
    rec_a, rec_b = experiment_or_not_found(conn, a), experiment_or_not_found(conn, b)
    inputs: dict[str, str] = {}
    for rec in (rec_b, rec_a):  # A's dataset wins where both name the item
        for item in q.get_dataset_items(conn, rec.dataset, rec.dataset_version):
            inputs[item.id] = input_text(item)
    return StoredRuns(rec_a, q.get_experiment_items(conn, a), rec_b, q.get_experiment_items(conn, b), inputs)


__all__ = ["StoredRuns", "experiment_or_not_found", "input_text", "stored_runs"]
