"""The pattern detector on a large store: how long run_analysis takes.

    python benchmarks/pattern_analysis.py [--evaluations 20000] [--repeats 2] [--keys 5]

Writes N rubric evaluations to a fresh SQLite file in a temporary folder
(removed at the end): N / repeats sessions, each scored ``--repeats`` times,
each evaluation with ``--keys`` score rows and its session's transcript in
the payload (as jurist stores it: a user question naming a topic, an
assistant answer of 200 to 2,000 characters). Sessions on two of the topics
score lower. Then times ``run_analysis`` (statistics only, no writer LLM) and
prints the time (wall clock and CPU), the evaluations and subjects analysed, and the patterns found.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from jurist.analysis import run_analysis
from jurist.config import Settings
from jurist.store import Store
from jurist.store.analysis import PatternReport
from jurist.store.queries import insert_history

TOPICS = ("latest release notes", "caffeine and sleep", "tax deadline", "python packaging", "recent outage",
          "refund policy", "quantum computing", "password reset", "garden soil", "train tickets")
LOW = ("latest release notes", "recent outage")
WORDS = "the a answer covers steps details and then with some more context for this question".split()


def seed(store: Store, n: int, repeats: int, keys: int, rng: random.Random) -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    key_names = [f"rubric_{k}" for k in range(keys)]
    evals, score_rows = [], []
    for i in range(n):
        session = i // repeats
        srng = random.Random(session)  # the same session, the same text, each time it is scored
        topic = srng.choice(TOPICS)
        answer = " ".join(srng.choice(WORDS) for _ in range(srng.randint(40, 400)))
        base = 0.45 if topic in LOW else 0.75
        score = min(1.0, max(0.0, rng.gauss(base, 0.15)))
        eid = f"pat{i:029d}"
        transcript = {"turns": [{"role": "user", "content": f"Tell me about the {topic}, please."},
                                {"role": "assistant", "content": answer}], "omitted_chars": 0}
        evals.append({
            "id": eid, "kind": "rubric", "subject_id": f"session-{session}", "trace_id": eid, "status": "scored",
            "score": round(score * 5, 4), "max_score": 5.0, "percentage": round(score * 100, 2),
            "judge_model": "openai/gpt-4o-mini", "rubrics_version": "1.0", "source": None,
            "payload": {"kind": "rubric", "version": "1.0", "session_id": f"session-{session}",
                        "transcript": transcript},
            "created_at": start + timedelta(seconds=i), "passed": score >= 0.7, "escalated": False,
            "iterations": 1, "failure": None,
        })
        score_rows += [{
            "evaluation_id": eid, "key": k, "name": k, "score": round(min(5.0, max(0.0, rng.gauss(score * 5, 0.5))), 4),
            "max_score": 5.0, "weight": 1.0, "status": "scored", "reason": None, "judge_model": "openai/gpt-4o-mini",
            "template_hash": "0123456789abcdef", "input_tokens": 400, "output_tokens": 60, "latency_ms": 800.0,
            "call_id": None,
        } for k in key_names]
        if len(evals) == 5000:
            store.write(insert_history, evals, score_rows, [])
            evals, score_rows = [], []
    if evals:
        store.write(insert_history, evals, score_rows, [])


async def timed(store: Store, limit: int) -> tuple[float, float, PatternReport]:
    """Wall-clock and CPU seconds (this process, all threads) of one run."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = await run_analysis(store, Settings(judge=None), limit=limit)
    return time.perf_counter() - t0, time.process_time() - c0, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluations", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=2, help="times each session is scored")
    ap.add_argument("--keys", type=int, default=5, help="score rows (rubrics) per evaluation")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'analysis.db'}")
        try:
            seed(store, args.evaluations, args.repeats, args.keys, random.Random(1))
            seconds, cpu, result = asyncio.run(timed(store, args.evaluations))
        finally:
            store.close()
    run, patterns = result.run, result.patterns
    assert run is not None
    subjects = -(-args.evaluations // args.repeats)
    print(f"run_analysis: {run.evaluations:,} evaluations of {subjects:,} sessions ({args.repeats} each), "
          f"{args.keys} score keys, SQLite: {seconds:.1f} s ({cpu:.1f} s of CPU)")
    for p in patterns[:5]:
        print(f"  {p.impact:6} {p.feature_type}: {p.feature} on {p.dimension}: "
              f"{p.affected_count:,} sessions, Cliff's delta {p.effect_size:.2f}")
    print(f"  {len(patterns)} patterns")


if __name__ == "__main__":
    main()
