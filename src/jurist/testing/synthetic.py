"""Synthetic evaluation history: many stored evaluations, their scores and judge calls.

For the dashboard's benchmark and tests, where tens of thousands of rows are
needed quickly. The rows have the shape the capabilities write (kinds rubric,
gate, research, checklist; the dashboard columns filled) and are drawn from a
seeded generator, so a run is repeatable. Nothing here calls a model.

    python -m jurist.testing.synthetic --database sqlite:///big.db --evaluations 100000
"""

from __future__ import annotations

import argparse
import random
from datetime import datetime, timedelta, timezone

from jurist.store import Store
from jurist.store.queries import insert_history

KINDS = ("rubric", "gate", "research", "checklist")
RUBRIC_KEYS = ("empathy", "accuracy", "clarity")
RESEARCH_KEYS = ("plan.intent_alignment", "plan.query_coverage", "retrieval.context_recall", "answer.faithfulness")
MAX_ATTEMPTS = 3  # the gate's and the research plan loop's attempt limit in this history
TOPICS = ("latest release notes", "caffeine and sleep", "tax deadline", "python packaging", "recent outage",
          "refund policy", "quantum computing", "password reset")


def _evaluation(rng: random.Random, i: int, at: datetime) -> tuple[dict[str, object], list[dict[str, object]],
                                                                 dict[str, object]]:
    """One synthetic evaluation, its score rows and its call, as the rows the store inserts."""
    kind = KINDS[i % len(KINDS)]
    eid = f"syn{i:029d}"
    trace = f"trace{i:027d}"
    topic = rng.choice(TOPICS)
    base = 0.45 if "latest" in topic or "recent" in topic else 0.75
    score = min(1.0, max(0.0, rng.gauss(base, 0.15)))
    failed = rng.random() < 0.03
    iterations = 1 if kind not in ("gate", "research") else 1 + int(rng.random() < 0.3) + int(rng.random() < 0.1)
    escalated = kind == "research" and rng.random() < 0.12
    keys = RUBRIC_KEYS if kind == "rubric" else RESEARCH_KEYS if kind == "research" else ("attempt.1",)
    passed = None if failed or kind == "checklist" else score >= (0.7 if kind != "gate" else 0.4)
    failure = "evaluation_failed" if failed else (None if passed in (None, True) else rng.choice(keys))
    pct = None if failed else round(score * 100.0, 2)
    evaluation: dict[str, object] = {
        "id": eid, "kind": kind, "subject_id": f"{kind}-{i}", "trace_id": trace,
        "status": "failed" if failed else "scored", "score": None if failed else round(score, 4),
        "max_score": 1.0, "percentage": pct, "judge_model": rng.choice(("openai/gpt-4o-mini", "local/minilm")),
        "rubrics_version": "1.0" if kind == "rubric" else None, "source": None,
        "payload": {"synthetic": True, "topic": topic, "user_query": f"What about {topic}?"},
        "created_at": at, "passed": passed, "escalated": escalated, "iterations": iterations, "failure": failure,
        "max_attempts_hit": iterations == MAX_ATTEMPTS and passed is False,
    }
    score_rows: list[dict[str, object]] = [{
        "evaluation_id": eid, "key": k, "name": k, "score": None if failed else round(min(1.0, max(0.0, rng.gauss(score, 0.1))), 4),
        "max_score": 1.0, "weight": 1.0, "status": "evaluation_failed" if failed else "scored", "reason": None,
        "judge_model": evaluation["judge_model"], "template_hash": "0123456789abcdef", "input_tokens": 400,
        "output_tokens": 60, "latency_ms": 800.0, "call_id": None,
    } for k in keys]
    call: dict[str, object] = {
        "id": f"call{i:028d}", "trace_id": trace, "purpose": f"{kind}_judge", "model": evaluation["judge_model"],
        "endpoint": "https://api.example/v1", "template_name": "rubric_judge", "template_hash": "0123456789abcdef",
        "request_hash": f"{i:064x}", "messages": [{"role": "user", "content": f"Judge: {topic}"}], "params": {},
        "response_text": '{"score": 4}', "parsed": None, "input_tokens": rng.randint(200, 900),
        "output_tokens": rng.randint(20, 200), "latency_ms": round(rng.uniform(150, 2500), 1), "attempts": 1,
        "status": "error" if failed else "ok", "error": "timeout" if failed else None, "cached": False,
        "created_at": at,
    }
    return evaluation, score_rows, call


def seed_history(store: Store, n: int, *, seed: int = 7, days: int = 120, end: datetime | None = None,
                 batch: int = 5000) -> None:
    """Write ``n`` synthetic evaluations (with scores and one call each) spread over ``days`` days."""
    rng = random.Random(seed)
    end = end or datetime.now(timezone.utc)
    start = end - timedelta(days=days)
    step = (end - start) / max(n, 1)
    for lo in range(0, n, batch):
        evals, score_rows, calls = [], [], []
        for i in range(lo, min(n, lo + batch)):
            e, s, c = _evaluation(rng, i, start + step * i)
            evals.append(e)
            score_rows.extend(s)
            calls.append(c)
        store.write(insert_history, evals, score_rows, calls)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--database", required=True, help="SQLAlchemy URL, e.g. sqlite:///big.db")
    ap.add_argument("--evaluations", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    with Store(args.database) as store:
        seed_history(store, args.evaluations, seed=args.seed)
    print(f"wrote {args.evaluations} synthetic evaluations to {args.database}")


if __name__ == "__main__":
    main()
