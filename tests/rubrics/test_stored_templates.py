"""Scoring with a prompt version kept in the store (`rubric_judge@2`), end to end to the prompt lab."""

import pytest

from jurist.analysis import activate_version, compare_versions, create_prompt_version
from jurist.errors import NotFound
from jurist.judges.templates import builtin
from jurist.rubrics import evaluate
from jurist.rubrics.api import load_template
from jurist.store import Store
from jurist.testing import Reply
from tests.rubrics.test_against_server import ONE, settings_for
from tests.rubrics.test_scoring import SESSION

STRICT = builtin("rubric_judge").text + "\nSTRICT MODE: a high score needs evidence quoted from the session.\n"


async def test_a_stored_version_is_what_the_judge_is_sent(provider, tmp_path):
    s = settings_for(provider, home=str(tmp_path / ".jurist"))
    store = await Store.aopen(s.database)
    try:
        v2 = await create_prompt_version(store, "rubric_judge", STRICT, note="stricter")
        provider.script(Reply(text='{"score": 2, "reasoning": "no evidence"}'),
                        Reply(text='{"score": 4, "reasoning": "fine"}'))
        strict = await evaluate(ONE, SESSION, judge="fake/judge-1", template="rubric_judge@2", settings=s,
                                store=store, cache=False)
        plain = await evaluate(ONE, SESSION, judge="fake/judge-1", template="rubric_judge@1", settings=s,
                               store=store, cache=False)
        await store.aflush()
        sent = [r["json"]["messages"] for r in provider.requests]
        assert any("STRICT MODE" in m["content"] for m in sent[0])
        assert not any("STRICT MODE" in m["content"] for m in sent[1])
        assert strict["rubric_scores"][0]["score"] == 2.0 and plain["rubric_scores"][0]["score"] == 4.0
        hashes = {r.template_hash for e in store.evaluations(limit=None) for r in store.scores_of(e["id"])}
        assert hashes == {v2.hash, builtin("rubric_judge").hash}
        ab = await compare_versions(store, "rubric_judge", 1, 2)
        assert ab.n_a == 1 and ab.n_b == 1  # the prompt lab sees both versions' scores
    finally:
        await store.aclose()


def test_unknown_versions_and_names(tmp_path):
    with Store(f"sqlite:///{tmp_path / 'j.db'}") as store:
        assert load_template("rubric_judge@1", store).hash == builtin("rubric_judge").hash
        with pytest.raises(NotFound, match="no prompt 'rubric_judge' version 7"):
            load_template("rubric_judge@7", store)
        with pytest.raises(NotFound, match="no prompt 'nonesuch' version 1"):
            load_template("nonesuch@1", store)


async def test_a_version_asked_for_is_not_routed(provider, tmp_path):
    """`rubric_judge@1` is the shipped text even while version 2 is the active one."""
    s = settings_for(provider, home=str(tmp_path / ".jurist"))
    store = await Store.aopen(s.database)
    try:
        await create_prompt_version(store, "rubric_judge", STRICT)
        await activate_version(store, "rubric_judge", 2)
        provider.script(Reply(text='{"score": 4, "reasoning": "fine"}'), Reply(text='{"score": 2, "reasoning": "no"}'))
        await evaluate(ONE, SESSION, judge="fake/judge-1", template="rubric_judge@1", settings=s, store=store,
                       cache=False)
        await evaluate(ONE, SESSION, judge="fake/judge-1", settings=s, store=store, cache=False)
        sent = [r["json"]["messages"] for r in provider.requests]
        assert not any("STRICT MODE" in m["content"] for m in sent[0])
        assert any("STRICT MODE" in m["content"] for m in sent[1])  # the default follows the route
    finally:
        await store.aclose()
