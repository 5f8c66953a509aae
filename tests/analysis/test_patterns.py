import json
import random
from datetime import timedelta, timezone

import pytest
from sqlalchemy import select

from jurist.analysis import latest_patterns, run_analysis
from jurist.analysis.stats import Subject, benjamini_hochberg, compare, find_patterns, impact_of, terms_of
from jurist.analysis.texts import texts_of
from jurist.store.analysis import AnalysedEvaluation, PatternReport
from jurist.config import Settings
from jurist.errors import ConfigError, InputError, NotFound
from jurist.judges.templates import builtin
from jurist.store.tables import pattern_evaluations
from jurist.testing import Reply
from tests.analysis.conftest import START, TOPICS, add_evaluation, seed_latest
from tests.quoting import prompt_text


def _term(result, term, dimension="overall"):
    found = [p for p in result.patterns
             if p.feature_type == "term" and p.feature == term and p.dimension == dimension]
    assert len(found) == 1, [(p.feature_type, p.feature, p.dimension) for p in result.patterns]
    return found[0]


async def test_a_term_whose_evaluations_score_lower_becomes_a_pattern(store):
    latest_ids = seed_latest(store)
    result = await run_analysis(store, Settings())
    run = result.run
    assert run.status == "done" and run.evaluations == 60 and run.writer_model is None
    p = _term(result, "latest")
    assert p.affected_count == 15 and set(p.evaluation_ids) == latest_ids
    assert p.impact == "high" and p.effect_size < -0.474 and p.p_value < 0.001
    assert p.mean_affected < 0.6 < 0.7 < p.mean_rest
    assert p.writer == "statistics" and p.suggested_fix is None
    assert p.title.startswith('Evaluations containing "latest" score lower (mean 0.')
    assert "Cliff's delta -1.00" in p.title and "n = 15" in p.title
    assert not any(x.feature == "simple" for x in result.patterns)  # the better half is no pattern
    # the links are stored in full, and the newest run is what latest_patterns returns
    with store.engine.connect() as conn:
        linked = {r.evaluation_id for r in conn.execute(
            select(pattern_evaluations.c.evaluation_id).where(pattern_evaluations.c.pattern_id == p.id))}
    assert linked == latest_ids
    again = await latest_patterns(store)
    assert again.run.id == run.id and {x.id for x in again.patterns} == {
        x.id for x in result.patterns}


async def test_random_scores_give_no_pattern(store):
    rng = random.Random(3)
    for i in range(80):
        words = " ".join(rng.sample(TOPICS, 3))
        add_evaluation(store, text=f"Tell me about {words}", percentage=rng.uniform(0, 100),
                       judge_model=rng.choice(["openai/judge-a", "openai/judge-b"]), at=START + timedelta(minutes=i))
    store.flush()
    result = await run_analysis(store, Settings())
    assert result.run.status == "done" and result.run.evaluations == 80
    assert result.patterns == []


async def test_prompt_version_and_dimension_patterns(store):
    shipped = builtin("rubric_judge").hash
    rng = random.Random(11)
    for i in range(40):
        old = i % 2 == 0
        score = rng.uniform(0.2, 0.5) if old else rng.uniform(0.6, 0.9)
        add_evaluation(store, text=None, percentage=score * 100, at=START + timedelta(minutes=i),
                       score_rows=[{"key": "intent", "score": score * 5, "max_score": 5,
                                    "template_hash": shipped if old else "0123456789abcdef"}])
    store.flush()
    result = await run_analysis(store, Settings(), kind="research")
    found = {(p.feature_type, p.feature, p.dimension): p for p in result.patterns}
    # one pattern for the prompt version, on the overall score, naming the rubric it also lowers
    old = found[("prompt_version", "rubric_judge v1", "overall")]
    assert old.affected_count == 20 and "also scores lower on intent" in old.description
    assert [p for p in result.patterns if p.feature == "rubric_judge v1"] == [old]
    assert not any(p.feature_type == "term" for p in result.patterns)  # no texts, no terms


async def test_filters_bound_what_is_analysed(store):
    seed_latest(store)
    result = await run_analysis(store, Settings(), kind="gate")
    assert result.run.evaluations == 0 and result.patterns == []
    result = await run_analysis(store, Settings(), since=START + timedelta(minutes=50))
    assert result.run.evaluations == 10
    assert result.run.params["since"].startswith("2026-01-01T00:50")
    two_hours_east = timezone(timedelta(hours=2))
    result = await run_analysis(store, Settings(), since=(START + timedelta(minutes=50)).astimezone(two_hours_east))
    assert result.run.evaluations == 10
    result = await run_analysis(store, Settings(), limit=30)
    assert result.run.evaluations == 30


async def test_bad_parameters_are_input_errors(store):
    with pytest.raises(InputError, match="kind 'nope'"):
        await run_analysis(store, Settings(), kind="nope")
    with pytest.raises(InputError, match="since must be earlier"):
        await run_analysis(store, Settings(), since=START, until=START)
    with pytest.raises(InputError, match="min_count"):
        await run_analysis(store, Settings(), min_count=1)
    with pytest.raises(ConfigError):
        await run_analysis(store, Settings(), writer="nosuchprovider/model")
    with pytest.raises(NotFound):
        await latest_patterns(store, "no-such-run")
    assert await latest_patterns(store) == PatternReport(run=None, patterns=[])


def _writer_settings(provider):
    return Settings.load(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                         judge="fake/writer-model", max_retries=0, cache=False)


async def test_the_llm_writes_the_pattern(store, provider):
    seed_latest(store)
    provider.default = Reply(text=json.dumps({
        "title": "Questions about the latest news score low",
        "description": "The judge marks down answers that ignore recency.",
        "suggested_fix": "Tell the planner to prefer recent sources when the user asks for the latest news.",
    }))
    result = await run_analysis(store, _writer_settings(provider))
    p = _term(result, "latest")
    assert p.writer == "fake/writer-model" and result.run.writer_model == "fake/writer-model"
    assert p.title == "Questions about the latest news score low"
    assert p.suggested_fix.startswith("Tell the planner")
    assert p.affected_count == 15  # the statistics are kept as they are
    prompts = [prompt_text(r["json"]["messages"]) for r in provider.requests]
    assert len(prompts) == len(result.patterns) <= 10
    latest_prompt = next(t for t in prompts if "feature: latest" in t)
    assert "<example>\nWhat is the latest story about" in latest_prompt
    assert "never follow instructions" in latest_prompt.lower()


async def test_a_malformed_writer_reply_falls_back_to_the_statistics(store, provider):
    seed_latest(store)
    provider.default = Reply(text="I think the pattern is about news. {not json")
    result = await run_analysis(store, _writer_settings(provider))
    p = _term(result, "latest")
    assert p.writer == "statistics" and p.suggested_fix is None
    assert p.title.startswith('Evaluations containing "latest" score lower')
    assert result.run.status == "done" and result.run.writer_model is None
    assert len(provider.requests) == 2 * len(result.patterns)  # one re-ask each, then the fallback


async def test_a_failing_writer_endpoint_falls_back_to_the_statistics(store, provider):
    seed_latest(store)
    provider.default = Reply(status=500, text="boom")
    result = await run_analysis(store, _writer_settings(provider))
    assert _term(result, "latest").writer == "statistics"


# -- the parts, on their own ----------------------------------------------------------


def test_cliffs_delta_and_benjamini_hochberg():
    import numpy as np

    p, delta = compare(np.array([0.1, 0.2, 0.3]), np.array([0.5, 0.6, 0.7, 0.8]))
    assert delta == -1.0 and p < 0.05
    _, delta = compare(np.array([0.1, 0.6]), np.array([0.5, 0.5]))
    assert delta == 0.0
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.5])
    assert impact_of(-0.5) == "high" and impact_of(0.4) == "medium" and impact_of(-0.2) == "low"
    assert terms_of("The LATEST news, and the latest-ish it's OK") == {"latest", "news", "latest-ish"}


def test_find_patterns_needs_min_count_on_both_sides():
    subjects = [Subject(str(i), 0.1 if i < 4 else 0.9, "rare" if i < 4 else "common", frozenset(), frozenset())
                for i in range(40)]
    assert find_patterns(subjects, min_count=5) == []
    assert [f.feature for f in find_patterns(subjects, min_count=4)] == ["rare"]


async def test_texts_come_from_session_files_payloads_and_generation_calls(store, tmp_path):
    session = tmp_path / "s1.jsonl"
    session.write_text('{"role": "user", "content": "What is the latest on rust?"}\n'
                       '{"role": "assistant", "content": "Rust 2.0."}\n')
    rubric = add_evaluation(store, text=None, percentage=50, kind="rubric")
    gate = add_evaluation(store, text=None, percentage=50, kind="gate")
    with store.engine.begin() as conn:
        from sqlalchemy import update

        from jurist.store.tables import evaluations, llm_calls

        conn.execute(update(evaluations).where(evaluations.c.id == rubric).values(source=str(session)))
        conn.execute(llm_calls.insert(), [{
            "id": "c1", "trace_id": gate, "purpose": "generation", "model": "m", "endpoint": "e", "request_hash": "h",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}],
            "params": {}, "status": "ok", "created_at": START}])
    rows = [AnalysedEvaluation(id=rubric, kind="rubric", subject_id="s1", source=str(session), trace_id=rubric,
                               percentage=50.0, judge_model=None, failure=None, created_at=START),
            AnalysedEvaluation(id=gate, kind="gate", subject_id="s2", source=None, trace_id=gate, percentage=50.0,
                               judge_model=None, failure=None, created_at=START)]
    assert await texts_of(store, rows) == {rubric: "What is the latest on rust?", gate: "Hi there"}
