"""A store on SQLite and on PostgreSQL, and helpers that seed evaluations."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import delete

from jurist.ids import new_id
from jurist.store import Store
from jurist.store.tables import analysis_runs, evaluations, llm_calls, pattern_evaluations, patterns, prompts, scores

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
TOPICS = ["python", "rust", "football", "cooking", "weather", "gardening", "finance", "music", "travel", "history"]


def _clear(store: Store) -> None:
    with store.engine.begin() as conn:
        for table in (pattern_evaluations, patterns, analysis_runs, prompts, scores, evaluations, llm_calls):
            conn.execute(delete(table))


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = f"sqlite:///{tmp_path}/analysis.db" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    s = Store(url)
    _clear(s)  # the PostgreSQL database is shared by the session's tests
    try:
        yield s
    finally:
        _clear(s)
        s.close()


def add_evaluation(store: Store, *, text: str | None, percentage: float, kind: str = "research",
                   judge_model: str = "openai/judge-a", subject: str | None = None,
                   score_rows: list[dict] | None = None, at: datetime | None = None) -> str:
    eid = new_id()
    payload = {"userQuery": text} if text is not None else {}
    store.save_evaluation(
        {"id": eid, "kind": kind, "subject_id": subject or eid, "trace_id": eid, "status": "scored",
         "score": percentage / 100, "max_score": 1.0, "percentage": percentage, "judge_model": judge_model,
         "payload": payload, "created_at": at or START},
        [{"key": r.get("key", "intent"), "name": r.get("key", "intent"), "score": r["score"],
          "max_score": r.get("max_score", 1.0), "weight": 1.0, "status": "scored",
          "template_hash": r.get("template_hash")} for r in score_rows or []],
    )
    return eid


def seed_latest(store: Store, n_latest: int = 15, n_rest: int = 45, seed: int = 7) -> set[str]:
    """Evaluations whose query contains "latest" score clearly lower; returns their ids."""
    rng = random.Random(seed)
    latest_ids = set()
    for i in range(n_latest + n_rest):
        low = i < n_latest
        topic = rng.choice(TOPICS)
        text = f"What is the {'latest' if low else 'simple'} story about {topic} today?"
        pct = rng.uniform(35, 60) if low else rng.uniform(70, 95)
        eid = add_evaluation(store, text=text, percentage=pct, at=START + timedelta(minutes=i))
        if low:
            latest_ids.add(eid)
    store.flush()
    return latest_ids
