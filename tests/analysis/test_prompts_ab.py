import asyncio
import random
from datetime import timedelta

import pytest

from jurist.analysis import compare_versions, create_prompt_version, diff_lines, list_prompts, prompt_version
from jurist.analysis.ab import compare_rows, verdict
from jurist.errors import InputError, NotFound
from jurist.judges.templates import builtin
from tests.analysis.conftest import START, add_evaluation

SHIPPED = builtin("rubric_judge")


def _v2_text() -> str:
    return SHIPPED.text + "\nBe strict: a score above the middle of the scale needs evidence in the session.\n"


async def test_prompts_list_the_shipped_templates_as_version_1(store):
    prompts = {p.name: p for p in await list_prompts(store)}
    assert {"rubric_judge", "gate_quality", "pattern_writer"} <= set(prompts)
    rj = prompts["rubric_judge"]
    assert rj.latest_version == 1
    assert [v.model_dump() for v in rj.versions] == [{"version": 1, "hash": SHIPPED.hash, "created_at": None,
                                                      "note": "shipped with jurist", "source": "shipped"}]
    v1 = await prompt_version(store, "rubric_judge", 1)
    assert v1.text == SHIPPED.text and v1.hash == SHIPPED.hash


async def test_new_versions_are_numbered_and_kept(store):
    v2 = await create_prompt_version(store, "rubric_judge", _v2_text(), note="stricter")
    assert v2.version == 2 and v2.source == "stored" and v2.note == "stricter"
    assert v2.hash != SHIPPED.hash and len(v2.hash) == 16
    v3 = await create_prompt_version(store, "rubric_judge", _v2_text() + "Be brief.\n")
    assert v3.version == 3
    listed = {p.name: p for p in await list_prompts(store)}["rubric_judge"]
    assert listed.latest_version == 3 and [v.version for v in listed.versions] == [1, 2, 3]
    assert (await prompt_version(store, "rubric_judge", 2)).text == _v2_text()
    with pytest.raises(NotFound, match="has no version 9; versions: 1, 2, 3"):
        await prompt_version(store, "rubric_judge", 9)


async def test_concurrent_creations_get_distinct_versions(store):
    made = await asyncio.gather(*(create_prompt_version(store, "gate_quality",
                                                        builtin("gate_quality").text + f"\nVariant {i}.\n")
                                  for i in range(3)))
    assert sorted(v.version for v in made) == [2, 3, 4]


async def test_bad_new_versions_are_refused(store):
    without_session = SHIPPED.text.replace("{chat_session}", "")
    with pytest.raises(InputError, match=r"missing \{chat_session\}"):
        await create_prompt_version(store, "rubric_judge", without_session)
    with pytest.raises(InputError, match=r"unknown placeholder \{mood\} \(placeholders: \{chat_session\}"):
        await create_prompt_version(store, "rubric_judge", SHIPPED.text + "{mood}")
    with pytest.raises(InputError, match=r"unknown placeholder \{rubric_nme\} \(did you mean \{rubric_name\}\?\)"):
        await create_prompt_version(store, "rubric_judge", SHIPPED.text + "{rubric_nme}")
    with pytest.raises(InputError, match="empty"):
        await create_prompt_version(store, "rubric_judge", "   ")
    with pytest.raises(InputError, match="limit is 99,999"):
        await create_prompt_version(store, "rubric_judge", SHIPPED.text + "x" * 100_000)
    with pytest.raises(NotFound, match="no prompt named 'nope'"):
        await create_prompt_version(store, "nope", "text")
    with pytest.raises(NotFound):
        await prompt_version(store, "nope", 1)
    assert {p.name: p for p in await list_prompts(store)}["rubric_judge"].latest_version == 1


async def test_a_new_version_with_a_format_spec_is_refused(store):
    wide = SHIPPED.text.replace("{score_min}", "{score_min:>300000000}")
    with pytest.raises(InputError, match=r"\{score_min:>300000000\} is not a bare \{name\}"):
        await create_prompt_version(store, "rubric_judge", wide)


def test_diff_lines():
    assert diff_lines("a\nb\nc\n", "a\nB\nc\nd\n") == [
        ("@", "@@ -1,3 +1,4 @@"), (" ", "a"), ("-", "b"), ("+", "B"), (" ", "c"), ("+", "d")]
    assert diff_lines("same\n", "same\n") == []


# -- A/B --------------------------------------------------------------------------------


def _seed_pairs(store, hash_a, hash_b, shift, n=30, seed=5, noise=True):
    rng = random.Random(seed)
    for i in range(n):
        base = rng.uniform(1.5, 3.5)
        delta = shift + ((rng.uniform(-0.3, 0.3)) if noise else (0.5 if i % 2 else -0.5))
        for h, score in ((hash_a, base), (hash_b, base + delta)):
            add_evaluation(store, text=None, percentage=score * 20, subject=f"session-{i}",
                           at=START + timedelta(minutes=i),
                           score_rows=[{"key": "r1", "score": score, "max_score": 5, "template_hash": h}])
    store.flush()


async def test_ab_paired_data_where_b_is_better(store):
    v2 = await create_prompt_version(store, "rubric_judge", _v2_text())
    _seed_pairs(store, SHIPPED.hash, v2.hash, shift=0.4)
    ab = await compare_versions(store, "rubric_judge", 1, 2)
    assert ab.paired and ab.test == "paired t-test" and ab.n_a == ab.n_b == 30
    assert ab.p_value < 0.05 and ab.significant and ab.unit == "points" and ab.refused is None
    assert ab.ci_low < ab.difference < ab.ci_high and ab.ci_low > 0
    assert ab.difference == pytest.approx(ab.mean_b - ab.mean_a)
    assert ab.verdict.startswith(f"B is better by {round(ab.difference, 2):g} points, p ") and ab.verdict.endswith(
        "n = 30 subjects scored by both, judge openai/judge-a")
    assert ab.judge_model == "openai/judge-a" and [j.model_dump() for j in ab.judges] == [
        {"judge_model": "openai/judge-a", "n_a": 30, "n_b": 30, "common": 30, "compared": True}]
    reverse = await compare_versions(store, "rubric_judge", 2, 1)
    assert reverse.verdict.startswith("A is better by")
    only_other_key = await compare_versions(store, "rubric_judge", 1, 2, key="other")
    assert only_other_key.verdict == only_other_key.refused == (
        "not enough data: version A has 0 and version B 0 verdicts; a comparison needs verdicts of both versions by "
        "the same judge")
    assert only_other_key.test is None and not only_other_key.significant


async def test_ab_equal_data_is_no_significant_difference(store):
    v2 = await create_prompt_version(store, "rubric_judge", _v2_text())
    _seed_pairs(store, SHIPPED.hash, v2.hash, shift=0.0, n=12, noise=False)
    ab = await compare_versions(store, "rubric_judge", 1, 2)
    assert ab.difference == pytest.approx(0.0, abs=1e-9) and not ab.significant
    assert ab.verdict.startswith("no significant difference yet (p = ") and ab.verdict.endswith(
        "n = 12 subjects scored by both, judge openai/judge-a)")


async def test_ab_different_subjects_are_not_compared(store):
    """Scores of different sessions differ by their sessions: the prompt lab does not test them."""
    v2 = await create_prompt_version(store, "rubric_judge", _v2_text())
    for i in range(10):
        add_evaluation(store, text=None, percentage=40, subject=f"a-{i}",
                       score_rows=[{"key": "r1", "score": 2 + (i % 2) * 0.5, "max_score": 5,
                                    "template_hash": SHIPPED.hash}])
        add_evaluation(store, text=None, percentage=80, subject=f"b-{i}",
                       score_rows=[{"key": "r1", "score": 4 + (i % 2) * 0.5, "max_score": 5,
                                    "template_hash": v2.hash}])
    store.flush()
    ab = await compare_versions(store, "rubric_judge", 1, 2)
    assert ab.test is None and ab.p_value is None and not ab.significant and ab.judge_model == "openai/judge-a"
    assert ab.n_a == ab.n_b == 10  # each version's subjects, none shared
    assert ab.refused is not None and ab.refused.startswith("not compared: the versions were scored on different "
                                                            "subjects") and ab.verdict == ab.refused
    assert [(j.judge_model, j.n_a, j.n_b, j.common) for j in ab.judges] == [("openai/judge-a", 10, 10, 0)]


def _judged(store, h, judge, subjects, score):
    for subject in subjects:
        add_evaluation(store, text=None, percentage=score * 20, subject=subject, judge_model=judge,
                       score_rows=[{"key": "r1", "score": score, "max_score": 5, "template_hash": h}])


async def test_verdicts_of_different_judges_are_never_pooled(store):
    """The prompt lab's pools once mixed judges over different sessions: A scored by a harsh judge,
    B by a lenient one, and the judge both had (which gave 4 to either version) on shared sessions.
    Only that judge's verdicts on the shared sessions are compared: no difference."""
    v2 = await create_prompt_version(store, "rubric_judge", _v2_text())
    shared = [f"s-{i}" for i in range(8)]
    _judged(store, SHIPPED.hash, "local/minilm", [f"a-{i}" for i in range(20)], 2)
    _judged(store, v2.hash, "llamacpp/smollm2", [f"b-{i}" for i in range(20)], 5)
    _judged(store, SHIPPED.hash, "scripted/judge", shared, 4)
    _judged(store, v2.hash, "scripted/judge", shared, 4)
    store.flush()
    ab = await compare_versions(store, "rubric_judge", 1, 2)
    assert ab.judge_model == "scripted/judge" and ab.n_a == ab.n_b == 8 and ab.test == "paired t-test"
    assert ab.difference == 0 and ab.p_value == 1.0 and not ab.significant
    assert ab.verdict == "no significant difference yet (p = 1, n = 8 subjects scored by both, judge scripted/judge)"
    assert [(j.judge_model, j.n_a, j.n_b, j.common, j.compared) for j in ab.judges] == [
        ("llamacpp/smollm2", 0, 20, 0, False), ("local/minilm", 20, 0, 0, False),
        ("scripted/judge", 8, 8, 8, True)]
    # A second judge that scored both versions on shared sessions: which one? Not pooled, the caller chooses.
    _judged(store, SHIPPED.hash, "local/minilm", shared, 2)
    _judged(store, v2.hash, "local/minilm", shared, 3)
    store.flush()
    ab = await compare_versions(store, "rubric_judge", 1, 2)
    assert ab.test is None and not ab.significant and ab.verdict == ab.refused == (
        "not compared: 2 judge models scored both versions (local/minilm, scripted/judge); verdicts of different "
        "judges are not pooled: choose one judge")
    chosen = await compare_versions(store, "rubric_judge", 1, 2, judge="local/minilm")
    assert chosen.judge_model == "local/minilm" and chosen.n_a == 8 and chosen.difference == pytest.approx(1.0)
    assert chosen.significant and chosen.verdict.startswith("B is better by 1 points, p < 0.001")
    missing = await compare_versions(store, "rubric_judge", 1, 2, judge="openai/other")
    assert missing.test is None and missing.refused.startswith("not compared: judge openai/other scored neither")


async def test_ab_bad_requests(store):
    with pytest.raises(InputError, match="two different versions"):
        await compare_versions(store, "rubric_judge", 1, 1)
    with pytest.raises(NotFound):
        await compare_versions(store, "rubric_judge", 1, 2)


def _row(h, key, score, scale, subject, judge="j"):
    return {"template_hash": h, "key": key, "score": score, "max_score": scale, "subject_id": subject,
            "judge_model": judge}


def test_different_scales_are_compared_as_shares():
    rows = [_row(h, "k5", s, 5, f"s{i}") for h in "ab" for i, s in enumerate([2, 3, 4])]
    rows += [_row(h, "k10", s, 10, f"s{i}") for h in "ab" for i, s in enumerate([4, 6, 8])]
    result = compare_rows(rows, "a", "b")
    assert result.unit == "share" and result.difference == pytest.approx(0.0) and result.n_a == 3
    assert verdict(result)[0] == "no significant difference yet (p = 1, n = 3 subjects scored by both, judge j)"


def test_one_rubric_on_two_scales_is_not_a_pair():
    rows = [_row("a", "k", s, 5, f"s{i}") for i, s in enumerate([2, 3, 4])]
    rows += [_row("b", "k", s, 10, f"s{i}") for i, s in enumerate([4, 6, 8])]
    result = compare_rows(rows, "a", "b")
    assert result.test is None and result.refused.startswith("not compared: the versions were scored on different")


def test_a_randomized_test_compares_subjects_unpaired_within_one_judge():
    rows = [_row("a", "k", 2 + (i % 2) * 0.5, 5, f"a{i}") for i in range(10)]
    rows += [_row("b", "k", 4 + (i % 2) * 0.5, 5, f"b{i}") for i in range(10)]
    rows += [_row("b", "k", 1, 5, f"c{i}", judge="other") for i in range(10)]
    result = compare_rows(rows, "a", "b", design="randomized")
    assert result.test == "Welch t-test" and not result.paired and result.judge_model == "j"
    assert result.difference == pytest.approx(2.0) and result.p_value < 0.001
    assert verdict(result)[0] == ("B is better by 2 points, p < 0.001, n = 10 each subjects routed at random, "
                                  "judge j")
    unrecorded = [{**r, "judge_model": None} for r in rows]
    refused = compare_rows(unrecorded, "a", "b", design="randomized")
    assert refused.test is None and "no judge model scored both versions" in (refused.refused or "")


def test_counts_per_version_are_kept_where_no_test_runs():
    one_arm = [_row("a", "k", 3, 5, f"s{i}") for i in range(6)]
    result = compare_rows(one_arm, "a", "b", design="randomized")
    assert result.test is None and result.judge_model == "j" and (result.n_a, result.n_b) == (6, 0)
    assert result.refused == ("not enough data: judge j scored 6 subject(s) with version A and 0 with B; a "
                              "comparison needs at least 2 per version")
    paired = compare_rows(one_arm + [_row("b", "k", 3, 5, "s0")], "a", "b")
    assert (paired.n_a, paired.n_b) == (6, 1) and paired.refused.startswith("not enough data: judge j scored 1 ")
    two_judges = one_arm + [_row("b", "k", 3, 5, f"s{i}", judge="other") for i in range(4)]
    refused = compare_rows(two_judges, "a", "b")
    assert refused.judge_model is None and (refused.n_a, refused.n_b) == (6, 4)
    assert refused.refused.startswith("not compared: no judge model scored both versions (A: j; B: other)")
