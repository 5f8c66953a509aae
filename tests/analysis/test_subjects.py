"""The pattern detector counts subjects, not evaluations, and reads the texts the store keeps.

A session scored five times is one subject (with its mean score), and a session
whose only copy is in the store (posted to the API, built in memory, its file
deleted) gives its text as much as one still on disk.
"""

from __future__ import annotations

import json
import random
from datetime import timedelta

from jurist import evaluate
from jurist.analysis import run_analysis
from jurist.analysis.patterns import build_subjects
from jurist.analysis.stats import find_patterns
from jurist.config import Settings
from jurist.models import script
from jurist.rubrics.models import parse_rubrics
from jurist.rubrics.sessions import ChatSession, Message
from jurist.store.analysis import AnalysedEvaluation, ScoredItem, evaluations_for_analysis
from jurist.testing import Reply
from tests.analysis.conftest import START, TOPICS, add_evaluation
from tests.quoting import prompt_text

RUBRICS = {"scale": [1, 5], "rubrics": [{"id": "helpful", "name": "Helpfulness",
                                          "scoring_criteria": {"1": "useless", "5": "helpful"}}]}


def _seed(store, n_latest: int, repeats: int) -> tuple[set[str], set[str]]:
    """``n_latest`` subjects asking for "the latest" score low, the first of them evaluated ``repeats``
    times; 30 others score high. Returns the low subjects' evaluation ids and their subject ids."""
    rng = random.Random(5)
    low_ids, low_subjects, minute = set(), set(), 0
    for i in range(n_latest + 30):
        low = i < n_latest
        text = f"What is the {'latest' if low else 'simple'} story about {rng.choice(TOPICS)}?"
        for _ in range(repeats if i == 0 else 1):
            minute += 1
            eid = add_evaluation(store, text=text, subject=f"q{i}", at=START + timedelta(minutes=minute),
                                 percentage=rng.uniform(30, 50) if low else rng.uniform(75, 95))
            if low:
                low_ids.add(eid)
                low_subjects.add(f"q{i}")
    store.flush()
    return low_ids, low_subjects


async def test_a_subject_evaluated_five_times_counts_once(store):
    # four low subjects, one scored five times: eight low evaluations, four subjects, under min_count
    _seed(store, n_latest=4, repeats=5)
    result = await run_analysis(store, Settings(), min_count=5)
    assert result.run.evaluations == 38
    assert not any(p.feature == "latest" for p in result.patterns)
    # counted as eight independent evaluations, the same rows would make a pattern
    rows = store.evaluations(limit=None)
    one_each = [r.model_copy(update={"subject_id": r.id}) for r in store.read(evaluations_for_analysis)]
    texts = {r["id"]: r["payload"]["userQuery"] for r in rows}
    assert [f.feature for f in find_patterns(build_subjects(one_each, texts, []), min_count=5)] == ["latest"]


async def test_a_pattern_counts_its_subjects_and_links_all_their_evaluations(store):
    low_ids, _ = _seed(store, n_latest=6, repeats=5)
    result = await run_analysis(store, Settings(), min_count=5)
    [p] = [p for p in result.patterns if p.feature == "latest"]
    assert p.affected_count == 6 and set(p.evaluation_ids) == low_ids and len(low_ids) == 10
    assert "6 subjects (10 evaluations, each subject counted once)" in p.description
    assert "for the other 30" in p.description and "n = 6" in p.title


def test_subjects_take_the_mean_of_their_evaluations_and_every_judge():
    rows = [AnalysedEvaluation(id=e, kind=kind, subject_id="s", percentage=pct, judge_model=judge, trace_id=None,
                               failure=None, source=None, created_at=START)
            for e, kind, pct, judge in (("e1", "rubric", 40.0, "a"), ("e2", "rubric", 80.0, "b"),
                                        ("e3", "research", 10.0, "a"))]
    scores = [ScoredItem(evaluation_id="e1", key="k", score=1.0, max_score=5.0, template_hash="h1"),
              ScoredItem(evaluation_id="e2", key="k", score=3.0, max_score=5.0, template_hash="h2")]
    rubric, research = build_subjects(rows, {"e2": "older text", "e1": "newest text"}, scores)
    assert rubric.key == "rubric/s" and research.key == "research/s"  # one subject per kind and id
    assert rubric.score == 0.6 and rubric.evaluation_ids == ("e1", "e2") and rubric.text == "newest text"
    assert rubric.judge_models == {"a", "b"} and rubric.template_hashes == {"h1", "h2"}
    assert rubric.dimensions == {"k": (0.4, frozenset({"h1", "h2"}))}
    assert research.score == 0.1 and research.text is None and research.dimensions == {}


def test_find_patterns_refuses_a_subject_given_twice():
    import pytest

    from jurist.analysis.stats import Subject

    twice = [Subject("s", 0.5, None, frozenset(), frozenset())] * 2
    with pytest.raises(ValueError, match="each subject must come once"):
        find_patterns(twice)


def judge_reply(request):
    """The judge: a low score for sessions asking for "the latest", a high one otherwise."""
    low = "the latest" in prompt_text(request.messages)
    return json.dumps({"score": 2 if low else 5, "reasoning": "stale" if low else "good"})


async def test_patterns_come_from_transcripts_only_the_store_keeps(store):
    """Sessions built in memory (no file anywhere) and scored: the store's transcripts give the terms."""
    script("pj", default=judge_reply)
    rubric_set = parse_rubrics(RUBRICS, "in memory")
    rng = random.Random(9)
    for i in range(24):
        ask = "the latest" if i < 8 else "a simple"
        session = ChatSession(f"chat-{i}", [
            Message("user", f"Tell me {ask} story about {rng.choice(TOPICS)}."),
            Message("assistant", "Here is a story. " * rng.randint(1, 20))], source=None)
        await evaluate(rubric_set, session, judge="scripted/pj", settings=Settings.load(cache=False), store=store)
    # one of them scored again: the same subject, not a new one
    again = ChatSession("chat-0", [Message("user", "Tell me the latest story about rust.")])
    await evaluate(rubric_set, again, judge="scripted/pj", settings=Settings.load(cache=False), store=store)
    await store.aflush()
    assert {row["source"] for row in store.evaluations(limit=None)} == {None}  # no file to read
    result = await run_analysis(store, Settings(), kind="rubric", min_count=5)
    assert result.run.evaluations == 25
    [p] = [p for p in result.patterns if p.feature == "latest"]
    assert p.affected_count == 8 and len(p.evaluation_ids) == 9
    assert p.mean_affected == 0.4 and p.mean_rest == 1.0


async def test_the_writer_sees_subjects_and_examples(store, provider):
    _seed(store, n_latest=6, repeats=5)
    provider.default = Reply(text=json.dumps({"title": "Recency questions score low", "description": "d",
                                              "suggested_fix": None}))
    settings = Settings.load(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                             judge="fake/writer", max_retries=0, cache=False)
    result = await run_analysis(store, settings, min_count=5)
    [p] = [p for p in result.patterns if p.feature == "latest"]
    assert p.title == "Recency questions score low"
    prompt = next(t for t in (prompt_text(r["json"]["messages"]) for r in provider.requests) if "feature: latest" in t)
    assert "each counted once" in prompt and "): 6\n" in prompt and "their evaluations: 10" in prompt
    assert "other subjects compared against: 30" in prompt
    assert "<example>\nWhat is the latest story about" in prompt
