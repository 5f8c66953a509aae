"""The pairwise judge against a scripted judge on a real HTTP server: both orders, flips, re-asks,
quoting, and the records of its calls."""

from __future__ import annotations

import json
import re

import pytest

from jurist.config import Settings
from jurist.errors import InputError, JudgeParseError
from jurist.judges.pairwise import LOSS, TIE, WIN, Contestant, PairwiseJudge
from jurist.judges.parsing import PREFER_A, PREFER_B, PREFER_NEITHER, parse_preference
from jurist.judges.templates import PromptTemplate
from jurist.models import resolve_model
from jurist.store import Store
from jurist.testing import Reply
from tests.quoting import PAYLOAD, assert_inside, attack, prompt_text

ANSWER = re.compile(r'<answer id="([AB])">\n(.*?)\n</answer>', re.S)


def shown(payload: dict) -> dict[str, str]:
    """The answers as the judge saw them: position -> text."""
    return dict(ANSWER.findall(prompt_text(payload["messages"])))


def verdict(winner: str, reasoning: str = "scripted") -> Reply:
    return Reply(text=json.dumps({"reasoning": reasoning, "winner": winner}))


def first_position(payload: dict) -> Reply:
    return verdict("A")


def prefers_good(payload: dict) -> Reply:
    """A consistent judge: the answer that says GOOD wins, wherever it is shown."""
    a = shown(payload)
    good = [pos for pos, text in a.items() if "GOOD" in text]
    return verdict(good[0] if len(good) == 1 else "tie")


def make(provider, store=None, **kw) -> PairwiseJudge:
    s = Settings.load(providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}},
                      max_retries=0)
    return PairwiseJudge(resolve_model("fake/judge", s, sink=store), **kw)


X, Y = Contestant("x", "GOOD answer"), Contestant("y", "weak answer")


async def test_a_judge_that_always_picks_the_first_position_flips_every_pair_into_a_tie(provider):
    provider.default = first_position
    pj = make(provider)
    for first, second in ((X, Y), (Y, X)):
        pair = await pj.compare("q1", "Which?", first, second)
        assert pair.ok and pair.flipped and pair.outcome == TIE and pair.score == 0.5
        assert pair.picks == ("first", "second") and pair.positions == [PREFER_A, PREFER_A]
    assert len(provider.requests) == 4
    await pj.model.aclose()


async def test_a_consistent_judge_never_flips_and_names_the_winner(provider):
    provider.default = prefers_good
    pj = make(provider)
    win = await pj.compare("q1", "Which?", X, Y)
    loss = await pj.compare("q1", "Which?", Y, X)
    tie = await pj.compare("q1", "Which?", Y, Contestant("z", "another weak one"))
    await pj.model.aclose()
    assert (win.outcome, loss.outcome, tie.outcome) == (WIN, LOSS, TIE)
    assert not (win.flipped or loss.flipped or tie.flipped)
    assert win.positions == [PREFER_A, PREFER_B] and tie.positions == [PREFER_NEITHER, PREFER_NEITHER]
    # the two orders really were swapped
    orders = [shown(r["json"]) for r in provider.requests[:2]]
    assert sorted(o["A"] for o in orders) == ["GOOD answer", "weak answer"]


async def test_both_orders_are_recorded_under_one_trace(provider, tmp_path):
    provider.default = prefers_good
    store = Store(f"sqlite:///{tmp_path}/p.db")
    pj = make(provider, store)
    pair = await pj.compare("q1", "Which?", X, Y)
    await pj.model.aclose()
    store.flush()
    calls = store.calls(limit=None, trace_id=pair.trace_id)
    store.close()
    assert len(calls) == 2 and {c["purpose"] for c in calls} == {"pairwise_judge"}
    assert {c["template_name"] for c in calls} == {"pairwise_judge"}
    assert sorted(c["parsed"]["winner"] for c in calls) == ["A", "B"]
    assert pair.to_json()["orders"]["first_as_a"]["call_ids"][0] in {c["id"] for c in calls}


async def test_a_malformed_reply_is_asked_again_and_then_the_pair_has_no_result(provider):
    # first order: garbage, then a good reply after the re-ask; second order: garbage twice
    replies = {"x": [Reply(text="I think A is nicer"), verdict("A")], "y": [Reply(text='{"winner": "C"}'),
                                                                           Reply(text="")]}

    def respond(payload: dict) -> Reply:
        first_shown = "x" if "GOOD" in shown(payload)["A"] else "y"
        return replies[first_shown].pop(0)

    provider.default = respond
    pj = make(provider)
    pair = await pj.compare("q1", "Which?", X, Y)
    await pj.model.aclose()
    assert pair.forward.ok and pair.forward.reasked
    assert not pair.backward.ok and pair.backward.error_type == "JudgeParseError"
    assert not pair.ok and pair.outcome is None and pair.score is None and not pair.flipped
    assert "B-A order" in pair.reason and "could not be parsed after one re-ask" in pair.reason
    reask = [r["json"]["messages"] for r in provider.requests if r["json"]["messages"][-2]["role"] == "assistant"]
    assert any('"winner" must be "A", "B" or "tie"' in m[-1]["content"] for m in reask)


async def test_the_prompt_and_answers_stay_inside_their_blocks(provider):
    provider.default = first_position
    pj = make(provider)
    await pj.compare("q1", attack("question"), Contestant("x", attack("answer")), Contestant("y", "fine"))
    await pj.model.aclose()
    # Both orders, sent together: the attacking answer is A in one request and B in the other.
    prompts = [prompt_text(r["json"]["messages"]) for r in provider.requests]
    holders = []
    for prompt in prompts:
        assert_inside(prompt, "question")
        holders.append("A" if '<answer id="A">\nFine.' in prompt else "B")
        assert_inside(prompt, "answer", holders[-1])
        assert prompt.count(PAYLOAD) == 2 and prompt.count('<answer id="B">\n') == 1
    assert sorted(holders) == ["A", "B"]


async def test_the_offline_judge_prefers_the_answer_more_relevant_to_the_prompt():
    from jurist.runtime import Runtime

    runtime = Runtime(Settings.load(), open_store=False)
    pj = PairwiseJudge(runtime.judge("local/minilm"))
    pair = await pj.compare("q1", "Why does coffee keep me awake?",
                            Contestant("on", "Caffeine blocks adenosine receptors, so you feel less sleepy."),
                            Contestant("off", "Paris is the capital of France."))
    assert pair.outcome == WIN and not pair.flipped
    assert "relevance to the prompt" in pair.forward.value.reasoning


def test_a_users_template_must_hold_the_prompt_and_both_answers(provider):
    bad = PromptTemplate("mine", "1", "Compare {answer_a} with {answer_b}.")
    with pytest.raises(InputError, match=r"must contain \{question\}"):
        make(provider, template=bad)
    unknown = PromptTemplate("mine", "1", "{question} {answer_a} {answer_b} {rubric_name}")
    with pytest.raises(InputError, match=r"unknown placeholder"):
        make(provider, template=unknown)


@pytest.mark.parametrize("text, winner", [
    ('{"reasoning": "A is right", "winner": "A"}', PREFER_A),
    ('```json\n{"Winner": "b", "reasoning": "x"}\n```', PREFER_B),
    ('Sure. {"winner": "Tie"}', PREFER_NEITHER),
    ("REASONING: both fine\nWINNER: tie", PREFER_NEITHER),
    ("**Winner:** Answer B", PREFER_B),
    ('{"winner": "[[A]]"}', PREFER_A),
])
def test_preferences_are_read_in_the_usual_spellings(text, winner):
    assert parse_preference(text).winner == winner


@pytest.mark.parametrize("text, message", [
    ("", "empty"), ("A is better", 'neither a JSON object with "winner"'), ('{"winner": "both"}', 'must be "A"'),
    ('{"winner": 1}', 'must be "A"'),
])
def test_unreadable_preferences_say_why(text, message):
    with pytest.raises(JudgeParseError, match=message):
        parse_preference(text)
