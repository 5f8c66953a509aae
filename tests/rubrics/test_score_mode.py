"""Score mode logprobs: weighted scores beside the plain ones, against the scripted server."""

import json
import math

import pytest

from jurist.config import Settings
from jurist.errors import ConfigError
from jurist.judges import builtin
from jurist.models import script
from jurist.rubrics import RubricJudge, evaluate, evaluate_batch
from jurist.rubrics.models import Rubric, RubricItem, RubricSet
from jurist.runtime import Runtime
from jurist.store import Store
from jurist.testing import Reply
from jurist.testing.replies import token_logprobs

from tests.conftest import EXAMPLES, run_cli
from tests.rubrics.test_batch import make_sessions
from tests.rubrics.test_scoring import SESSION
from tests.quoting import prompt_text

TWO = RubricSet(rubrics=[Rubric(id="a", name="A", scoring_criteria="c", weight=1.0),
                         Rubric(id="b", name="B", scoring_criteria="c", weight=3.0)])
REPLY = ['{"', "score", '":', " ", "4", ', "reasoning": "clear"}']


def scored(probabilities: dict[str, float]) -> Reply:
    """A reply scoring 4, with ``probabilities`` for the numbers at the score token."""
    top = {t: math.log(p) for t, p in probabilities.items()}
    return Reply(text="".join(REPLY), logprobs=token_logprobs(REPLY, {4: top}))


def settings_for(server, **kw):
    return Settings.load(providers={"fake": {"type": "openai", "base_url": server.base_url, "api_key": "k"}},
                         max_retries=0, **kw)


async def test_weighted_scores_beside_the_plain_ones_and_in_the_total(provider, tmp_path):
    # rubric a: p(4) = 0.6, p(3) = 0.3, p(5) = 0.1 -> 3.8; rubric b: p(4) = 0.5, p(5) = 0.5 -> 4.5
    def reply(req: dict) -> Reply:
        prompt = prompt_text(req["messages"])
        return scored({"4": 0.6, "3": 0.3, "5": 0.1} if "Rubric: A" in prompt else {"4": 0.5, "5": 0.5})

    provider.default = reply
    store = Store(f"sqlite:///{tmp_path}/w.db")
    result = await evaluate(TWO, SESSION, judge="fake/j", settings=settings_for(provider, score_mode="logprobs"),
                            store=store)
    store.flush()
    calls = store.calls(limit=None)
    store.close()
    a, b = result["rubric_scores"]
    assert (a["score"], a["weighted_score"], a["score_mode"]) == (4.0, 3.8, "logprobs")
    assert (b["score"], b["weighted_score"]) == (4.0, 4.5) and "logprobs_unavailable" not in a
    # the total is over the weighted scores: (3.8 * 1 + 4.5 * 3) / 4 = 4.325
    assert result["summary"]["total_score"] == 4.325
    for request in provider.requests:
        assert (request["json"]["logprobs"], request["json"]["top_logprobs"]) == (True, 20)
    assert [(c["params"]["top_logprobs"], c["params"]["logprobs_returned"]) for c in calls] == [(20, True)] * 2
    # each call's record holds its parsed reply with both scores
    assert sorted((c["parsed"]["score"], c["parsed"]["weighted_score"], c["parsed"]["score_mode"]) for c in calls) \
        == [(4.0, 3.8, "logprobs"), (4.0, 4.5, "logprobs")]


async def test_without_logprobs_the_result_says_so_and_the_plain_score_counts(provider):
    provider.default = Reply(text='{"score": 4, "reasoning": "clear"}')  # an endpoint that sends none
    result = await evaluate(TWO, SESSION, judge="fake/j", settings=settings_for(provider), score_mode="logprobs")
    for rs in result["rubric_scores"]:
        assert rs["score"] == 4.0 and rs["weighted_score"] is None and rs["score_mode"] == "logprobs"
        assert rs["logprobs_unavailable"] == "logprobs unavailable: the endpoint returned none for this reply"
    assert result["summary"]["total_score"] == 4.0


async def test_plain_mode_asks_for_nothing_and_writes_no_new_keys(provider, tmp_path):
    provider.default = scored({"4": 0.5, "5": 0.5})
    store = Store(f"sqlite:///{tmp_path}/p.db")
    result = await evaluate(TWO, SESSION, judge="fake/j", settings=settings_for(provider), store=store)
    store.flush()
    calls = store.calls(limit=None)
    store.close()
    assert "logprobs" not in provider.requests[0]["json"]
    assert all(c["parsed"] == {"score": 4.0, "reasoning": "clear"} and "logprobs" not in c["params"] for c in calls)
    assert not {"score_mode", "weighted_score", "logprobs_unavailable"} & result["rubric_scores"][0].keys()
    assert result["summary"]["total_score"] == 4.0


async def test_an_item_based_rubric_says_it_has_no_score_token(provider):
    rs = RubricSet(rubrics=[Rubric(id="i", name="I", items=[RubricItem(id="x", text="says hello", points=1)])])
    provider.default = Reply(text='{"items": [{"id": "x", "met": true, "reasoning": "yes"}]}')
    result = await evaluate(rs, SESSION, judge="fake/j", settings=settings_for(provider, score_mode="logprobs"))
    (entry,) = result["rubric_scores"]
    assert entry["score"] == 5.0 and entry["weighted_score"] is None
    assert "item-based" in entry["logprobs_unavailable"]
    assert "logprobs" not in provider.requests[0]["json"]


async def test_a_failed_rubric_carries_the_mode_but_no_weighted_score(provider):
    provider.default = Reply(text="no score here")
    result = await evaluate(TWO, SESSION, judge="fake/j", settings=settings_for(provider, score_mode="logprobs"))
    entry = result["rubric_scores"][0]
    assert entry["status"] == "evaluation_failed" and entry["score_mode"] == "logprobs"
    assert "weighted_score" not in entry and "logprobs_unavailable" not in entry


async def test_batch_summary_averages_the_weighted_scores(provider, tmp_path):
    provider.default = scored({"4": 0.5, "5": 0.5})
    make_sessions(tmp_path / "in", 2)
    report = await evaluate_batch(TWO, tmp_path / "in", tmp_path / "out", judge="fake/j",
                                  settings=settings_for(provider), score_mode="logprobs")
    per_rubric = report.summary["per_rubric_summary"]
    assert per_rubric["a"]["average"] == per_rubric["b"]["average"] == 4.5
    assert report.summary["batch_summary"]["average_score"] == 4.5


def test_an_unknown_score_mode_is_a_config_error():
    model = Runtime(Settings.load(), open_store=False).judge("scripted/j")
    with pytest.raises(ConfigError, match="score_mode"):
        RubricJudge(model, builtin("rubric_judge"), builtin("rubric_items_judge"), score_mode="sampled")
    with pytest.raises(ConfigError, match="score_mode"):
        Settings.load(score_mode="sampled")


async def test_a_scripted_judge_has_no_logprobs_and_says_so():
    script("j", '{"score": 2, "reasoning": "meh"}')
    result = await evaluate(RubricSet(rubrics=[TWO.rubrics[0]]), SESSION, judge="scripted/j",
                            settings=Settings.load(score_mode="logprobs"))
    entry = result["rubric_scores"][0]
    assert entry["score"] == 2.0 and entry["weighted_score"] is None and entry["logprobs_unavailable"]


def test_cli_score_mode_flag(provider, tmp_path):
    provider.default = scored({"4": 0.6, "3": 0.3, "5": 0.1})
    out = tmp_path / "result.json"
    env = {"OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "k", "JURIST_HOME": str(tmp_path / ".jurist"),
           "JURIST_JUDGE": "openai/m"}
    r = run_cli("evaluate", "--rubrics", str(EXAMPLES / "rubrics_freeform.json"), "--session",
                str(EXAMPLES / "sessions" / "s1.jsonl"), "--output", str(out), "--score-mode", "logprobs",
                env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    assert {rs["weighted_score"] for rs in result["rubric_scores"]} == {3.8}
    assert "3.8/5 (plain 4)" in r.stdout
    r = run_cli("evaluate", "--rubrics", str(EXAMPLES / "rubrics_freeform.json"), "--session",
                str(EXAMPLES / "sessions" / "s1.jsonl"), "--score-mode", "sampled", env=env, cwd=tmp_path)
    assert r.returncode == 2 and "sampled" in r.stderr
