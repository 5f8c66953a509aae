"""One pattern per group of affected subjects: terms that occur in exactly the same queries are one
finding, named by all its terms."""

from __future__ import annotations

import random
from datetime import timedelta

from jurist.analysis import run_analysis
from jurist.analysis.stats import Finding
from jurist.analysis.patterns import one_per_group
from jurist.config import Settings
from tests.analysis.conftest import START, TOPICS, add_evaluation


def seed_breakthroughs(store, n_low: int = 16, n_rest: int = 44, seed: int = 5) -> set[str]:
    """16 queries about "the latest breakthroughs" score low; the rest ask simpler things."""
    rng = random.Random(seed)
    low_ids = set()
    for i in range(n_low + n_rest):
        low = i < n_low
        topic = rng.choice(TOPICS)
        text = (f"What are the latest breakthroughs in {topic}?" if low
                else f"Explain the basics of {topic} in simple words.")
        eid = add_evaluation(store, text=text, percentage=rng.uniform(30, 55) if low else rng.uniform(70, 95),
                             at=START + timedelta(minutes=i))
        if low:
            low_ids.add(eid)
    store.flush()
    return low_ids


async def test_terms_that_flag_the_same_queries_are_one_pattern(store):
    low_ids = seed_breakthroughs(store)
    result = await run_analysis(store, Settings())
    terms = [p for p in result.patterns if p.feature_type == "term"]
    assert len(terms) == 1, [(p.feature, p.affected_count) for p in terms]
    p = terms[0]
    assert p.feature == "breakthroughs, latest"  # every term that flags these queries
    assert p.affected_count == 16 and set(p.evaluation_ids) == low_ids
    assert p.title.startswith('Evaluations containing "breakthroughs" and "latest" score lower (mean 0.')
    assert "n = 16" in p.title


def _finding(feature: str, affected: list[str], dimension: str = "overall", kind: str = "term",
             also: list[str] | None = None) -> Finding:
    return Finding(kind, feature, dimension, affected, 0.4, 0.8, -0.9, 0.001, also_lower_on=list(also or []))


def test_only_the_same_set_of_subjects_is_merged():
    found = [_finding("latest", ["a", "b", "c"], also=["plan.intent_alignment"]),
             _finding("breakthroughs", ["c", "b", "a"], dimension="plan.query_coverage"),
             _finding("today", ["a", "b", "d"]),
             _finding("openai/judge-a", ["a", "b", "c"], kind="judge_model")]
    merged = one_per_group(found)
    assert [(f.feature_type, f.feature) for f in merged] == [
        ("term", "latest, breakthroughs"), ("term", "today"), ("judge_model", "openai/judge-a")]
    assert merged[0].also_lower_on == ["plan.intent_alignment", "plan.query_coverage"]
