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
    prompts = {p["name"]: p for p in await list_prompts(store)}
    assert {"rubric_judge", "gate_quality", "pattern_writer"} <= set(prompts)
    rj = prompts["rubric_judge"]
    assert rj["latest_version"] == 1
    assert rj["versions"] == [{"version": 1, "hash": SHIPPED.hash, "created_at": None,
                               "note": "shipped with jurist", "source": "shipped"}]
    v1 = await prompt_version(store, "rubric_judge", 1)
    assert v1["text"] == SHIPPED.text and v1["hash"] == SHIPPED.hash


async def test_new_versions_are_numbered_and_kept(store):
    v2 = await create_prompt_version(store, "rubric_judge", _v2_text(), note="stricter")
    assert v2["version"] == 2 and v2["source"] == "stored" and v2["note"] == "stricter"
    assert v2["hash"] != SHIPPED.hash and len(v2["hash"]) == 16
    v3 = await create_prompt_version(store, "rubric_judge", _v2_text() + "Be brief.\n")
    assert v3["version"] == 3
    listed = {p["name"]: p for p in await list_prompts(store)}["rubric_judge"]
    assert listed["latest_version"] == 3 and [v["version"] for v in listed["versions"]] == [1, 2, 3]
    assert (await prompt_version(store, "rubric_judge", 2))["text"] == _v2_text()
    with pytest.raises(NotFound, match="has no version 9; versions: 1, 2, 3"):
        await prompt_version(store, "rubric_judge", 9)


async def test_concurrent_creations_get_distinct_versions(store):
    made = await asyncio.gather(*(create_prompt_version(store, "gate_quality",
                                                        builtin("gate_quality").text + f"\nVariant {i}.\n")
                                  for i in range(3)))
    assert sorted(v["version"] for v in made) == [2, 3, 4]


async def test_bad_new_versions_are_refused(store):
    without_session = SHIPPED.text.replace("{chat_session}", "")
    with pytest.raises(InputError, match=r"missing \{chat_session\}"):
        await create_prompt_version(store, "rubric_judge", without_session)
    with pytest.raises(InputError, match=r"unknown \{mood\}"):
        await create_prompt_version(store, "rubric_judge", SHIPPED.text + "{mood}")
    with pytest.raises(InputError, match="empty"):
        await create_prompt_version(store, "rubric_judge", "   ")
    with pytest.raises(InputError, match="limit is 99,999"):
        await create_prompt_version(store, "rubric_judge", SHIPPED.text + "x" * 100_000)
    with pytest.raises(NotFound, match="no prompt named 'nope'"):
        await create_prompt_version(store, "nope", "text")
    with pytest.raises(NotFound):
        await prompt_version(store, "nope", 1)
    assert {p["name"]: p for p in await list_prompts(store)}["rubric_judge"]["latest_version"] == 1


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
    _seed_pairs(store, SHIPPED.hash, v2["hash"], shift=0.4)
    ab = await compare_versions(store, "rubric_judge", 1, 2)
    assert ab.paired and ab.test == "paired t-test" and ab.n_a == ab.n_b == 30
    assert ab.p_value < 0.05 and ab.significant and ab.unit == "points"
    assert ab.ci_low < ab.difference < ab.ci_high and ab.ci_low > 0
    assert ab.difference == pytest.approx(ab.mean_b - ab.mean_a)
    assert ab.verdict.startswith(f"B is better by {round(ab.difference, 2):g} points, p ") and ab.verdict.endswith(
        "n = 30 each")
    reverse = await compare_versions(store, "rubric_judge", 2, 1)
    assert reverse.verdict.startswith("A is better by")
    only_other_key = await compare_versions(store, "rubric_judge", 1, 2, key="other")
    assert only_other_key.verdict.startswith("not enough data:") and "at least 2 scored evaluations per version" in (
        only_other_key.verdict)


async def test_ab_equal_data_is_no_significant_difference(store):
    v2 = await create_prompt_version(store, "rubric_judge", _v2_text())
    _seed_pairs(store, SHIPPED.hash, v2["hash"], shift=0.0, n=12, noise=False)
    ab = await compare_versions(store, "rubric_judge", 1, 2)
    assert ab.difference == pytest.approx(0.0, abs=1e-9) and not ab.significant
    assert ab.verdict.startswith("no significant difference yet (p = ") and ab.verdict.endswith("n = 12 each)")


async def test_ab_unpaired_data_uses_welch(store):
    v2 = await create_prompt_version(store, "rubric_judge", _v2_text())
    for i in range(10):
        add_evaluation(store, text=None, percentage=40, subject=f"a-{i}",
                       score_rows=[{"key": "r1", "score": 2 + (i % 2) * 0.5, "max_score": 5,
                                    "template_hash": SHIPPED.hash}])
        add_evaluation(store, text=None, percentage=80, subject=f"b-{i}",
                       score_rows=[{"key": "r1", "score": 4 + (i % 2) * 0.5, "max_score": 5,
                                    "template_hash": v2["hash"]}])
    store.flush()
    ab = await compare_versions(store, "rubric_judge", 1, 2)
    assert not ab.paired and ab.test == "Welch t-test" and ab.n_a == ab.n_b == 10
    assert ab.difference == pytest.approx(2.0) and ab.ci_low < 2.0 < ab.ci_high and ab.p_value < 0.001
    assert ab.verdict == "B is better by 2 points, p < 0.001, n = 10 each, unpaired: no subject was scored by both"


async def test_ab_bad_requests(store):
    with pytest.raises(InputError, match="two different versions"):
        await compare_versions(store, "rubric_judge", 1, 1)
    with pytest.raises(NotFound):
        await compare_versions(store, "rubric_judge", 1, 2)


def test_different_scales_are_compared_as_shares():
    rows = [{"template_hash": "a", "key": "k", "score": s, "max_score": 5, "subject_id": f"s{i}"}
            for i, s in enumerate([2, 3, 4])]
    rows += [{"template_hash": "b", "key": "k", "score": s, "max_score": 10, "subject_id": f"s{i}"}
             for i, s in enumerate([4, 6, 8])]
    result = compare_rows(rows, "a", "b")
    assert result["unit"] == "share" and result["difference"] == pytest.approx(0.0)
    assert verdict(result)[0] == "no significant difference yet (p = 1, n = 3 each)"
