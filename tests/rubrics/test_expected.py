"""Reference-based judging: {expected} brings in the session's expected answers, quoted as data."""

from importlib.resources import files
from pathlib import Path

import pytest

from jurist.rubrics import evaluate
from jurist.rubrics.models import load_rubrics, parse_rubrics
from jurist.rubrics.sessions import ChatSession, Message
from jurist.testing import Reply
from tests.quoting import PAYLOAD, assert_inside, attack
from tests.rubrics.test_against_server import settings_for

CORRECTNESS = Path(str(files("jurist") / "examples" / "correctness.json"))
QUESTION = "Why does coffee keep me awake?"
EXPECTED = "Caffeine blocks adenosine receptors in the brain, so you do not feel sleepy."


def session(answer, *expected):
    return ChatSession("s", [Message("user", QUESTION), Message("assistant", answer)], expected=tuple(expected))


def prompt_of(request):
    return "\n".join(m["content"] for m in request["json"]["messages"])


async def test_the_correctness_rubric_sends_the_expected_answer_as_quoted_data(provider):
    provider.script(Reply(text='{"items": [{"id": "agrees", "met": true, "reasoning": "Same mechanism."}]}'))
    chat = session("It blocks adenosine, the sleepiness signal.", EXPECTED + " " + attack("answer"))
    result = await evaluate(load_rubrics(CORRECTNESS), chat, judge="fake/judge-1", settings=settings_for(provider))
    score = result["rubric_scores"][0]
    assert (score["score"], score["status"], score["judge_model"]) == (5.0, "scored", "fake/judge-1")
    prompt = prompt_of(provider.requests[0])
    assert_inside(prompt, "answer", "expected", PAYLOAD)  # the expected answer cannot close its block
    assert 'the same conclusion as the expected answer (quoted in <answer id="expected">)' in prompt
    assert "{expected}" not in prompt
    system, user = provider.requests[0]["json"]["messages"]
    assert "Caffeine blocks adenosine" in user["content"] and "Caffeine blocks" not in system["content"]


async def test_several_expected_answers_are_each_quoted_and_any_one_is_acceptable(provider):
    rs = parse_rubrics([{"id": "ref", "name": "Ref", "scoring_criteria": "5: the answer agrees with {expected}; "
                                                                         "1: it does not"}], "r.json")
    provider.script(Reply(text='{"score": 4, "reasoning": "close"}'))
    result = await evaluate(rs, session("Paris.", "Paris", "The capital is Paris"), judge="fake/judge-1",
                            settings=settings_for(provider))
    assert result["rubric_scores"][0]["score"] == 4.0
    prompt = prompt_of(provider.requests[0])
    assert '<answer id="expected-1">\nParis\n</answer>' in prompt
    assert '<answer id="expected-2">\nThe capital is Paris\n</answer>' in prompt
    assert "one of the 2 expected answers" in prompt and "any one of them is acceptable" in prompt


async def test_a_session_without_an_expected_answer_fails_that_rubric_and_calls_no_model(provider):
    rs = parse_rubrics([{"id": "ref", "name": "Ref", "scoring_criteria": "agrees with {expected}"},
                        {"id": "plain", "name": "Plain", "scoring_criteria": "1-5"}], "r.json")
    provider.script(Reply(text='{"score": 3, "reasoning": "fine"}'))
    result = await evaluate(rs, session("Paris."), judge="fake/judge-1", settings=settings_for(provider))
    ref, plain = result["rubric_scores"]
    assert (ref["score"], ref["status"], ref["reasoning"]) == (None, "evaluation_failed", "no expected answer")
    assert plain["score"] == 3.0 and result["status"] == "partial"
    assert len(provider.requests) == 1  # only the plain rubric was judged
    assert "<answer" not in prompt_of(provider.requests[0])


@pytest.mark.xfail(strict=True, reason="beyond the shipped cross-encoder of the offline judge: see docs/local-judge.md, what it is not good at")
@pytest.mark.slow
async def test_the_offline_judge_answers_correctness_where_it_can_and_says_when_it_cannot():
    rs = load_rubrics(CORRECTNESS)
    right = await evaluate(rs, session("Caffeine blocks the brain's adenosine receptors, so you don't feel sleepy.",
                                       EXPECTED), judge="local/minilm")
    agrees = right["rubric_scores"][0]
    assert (agrees["score"], agrees["judge_model"]) == (5.0, "local/minilm")
    assert agrees["items"][0]["met"] is True and "adenosine" in agrees["items"][0]["evidence"]

    wrong = await evaluate(rs, session("Coffee is warm, and warm drinks raise your body temperature.", EXPECTED),
                           judge="local/minilm")
    assert wrong["rubric_scores"][0]["score"] == 1.0 and wrong["rubric_scores"][0]["items"][0]["met"] is False

    either = await evaluate(rs, session("Caffeine blocks adenosine receptors in the brain, so you stay alert.",
                                        "It is all in your head, a placebo effect.", EXPECTED), judge="local/minilm")
    assert either["rubric_scores"][0]["score"] == 5.0  # one of the two expected answers is expressed

    short = await evaluate(rs, session("Paris.", "Paris"), judge="local/minilm")
    s = short["rubric_scores"][0]
    assert s["status"] == "evaluation_failed" and "too short to compare by meaning" in s["reasoning"]
    assert '{"contains": "{expected}"}' in s["reasoning"]

    long = await evaluate(rs, session("Yes.", " ".join(f"Fact number {n} is here." for n in range(9))),
                          judge="local/minilm")
    assert "9 sentences, too long to compare by meaning" in long["rubric_scores"][0]["reasoning"]

    none = await evaluate(rs, session("Caffeine blocks adenosine."), judge="local/minilm")
    assert none["rubric_scores"][0]["reasoning"] == "no expected answer"


async def test_a_template_with_an_expected_placeholder_gets_the_quoted_answers(provider):
    from jurist.judges.templates import PromptTemplate, builtin
    from jurist.rubrics.judging import RubricJudge
    from jurist.rubrics.scoring import SessionEvaluator
    from jurist.runtime import Runtime

    template = PromptTemplate("reference_judge", "1", (
        "Score {rubric_name} from {score_min} to {score_max}. {scoring_criteria}\n"
        "Reply with JSON {{\"score\": <n>, \"reasoning\": \"...\"}}.\n\n"
        "Expected:\n{expected}\n\nSession:\n{chat_session}"), source="reference_judge.txt")
    rs = parse_rubrics([{"id": "close", "name": "Close", "scoring_criteria": "5: same as the expected answer"}], "r.json")
    provider.script(Reply(text='{"score": 5, "reasoning": "same"}'))
    async with Runtime(settings_for(provider)) as runtime:
        judge = RubricJudge(runtime.judge("fake/judge-1"), template, builtin("rubric_items_judge"))
        evaluator = SessionEvaluator(rs, judge)
        scored = await evaluator.evaluate(session("Paris.", "Paris is the capital."))
        missing = await evaluator.evaluate(session("Paris."))
        await judge.aclose()
    assert scored.rubric_scores[0].score == 5.0
    prompt = prompt_of(provider.requests[0])
    assert 'Expected:\n<answer id="expected">\nParis is the capital.\n</answer>\n\nSession:\n<chat_session>' in prompt
    assert missing.rubric_scores[0].reasoning == "no expected answer"  # the template needs one: every rubric
    assert len(provider.requests) == 1


def test_a_template_file_may_use_the_expected_placeholder(tmp_path):
    """``{expected}`` is one of the rubric template's placeholders: build_judge (the CLI's
    ``--template``) takes a file that uses it, as it refuses an unknown one."""
    from jurist.config import Settings
    from jurist.errors import InputError
    from jurist.rubrics.api import build_judge

    good = tmp_path / "reference.txt"
    good.write_text("Score {rubric_name}. {scoring_criteria}\nExpected:\n{expected}\n\n{chat_session}")
    judge = build_judge(Settings(home=str(tmp_path / "home")), judge="local/minilm", template=good)
    assert judge.model.name == "local/minilm"
    bad = tmp_path / "typo.txt"
    bad.write_text("Score {rubric_name}.\nExpected:\n{expectd}\n\n{chat_session}")
    with pytest.raises(InputError, match="expectd"):
        build_judge(Settings(home=str(tmp_path / "home")), judge="local/minilm", template=bad)
