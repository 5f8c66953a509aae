"""An item-based rubric that a meaning judge could not wholly decide: the items it decided are
reported, the others say met null, the score is a range, and nothing is guessed. The judge here
is scripted: it answers each statement from a table, and is unsure of the ones marked None."""

import re

import pytest
from pydantic import ValidationError

from jurist.config import Settings
from jurist.errors import Uncertain
from jurist.judges import builtin
from jurist.models.base import DecidedChecks, StatementCheck
from jurist.rubrics import RubricJudge, SessionEvaluator
from jurist.rubrics.models import Rubric, RubricSet
from jurist.rubrics.sessions import ChatSession, Message
from jurist.runtime import Runtime


class Scripted:
    """A meaning judge that answers ``expresses`` from ``table`` (statement -> True / False / None
    for unsure) and, like the local judge, says which statements it decided."""

    name = "mine/scripted"

    def __init__(self, table, *, tell_decided=True, untyped=False):
        self.table = table
        self.tell_decided = tell_decided
        self.untyped = untyped  # says what it decided as a bare list, not as DecidedChecks

    async def expresses(self, text, statements):
        checks = [StatementCheck(statement=s, expressed=bool(self.table[s]), confidence=0.9, judge_model=self.name,
                                 evidence="the evidence" if self.table[s] else None)
                  for s in statements if self.table[s] is not None]
        unsure = [s for s in statements if self.table[s] is None]
        if unsure:
            raise Uncertain(f"uncertain: not sure about {unsure[0]!r}", subject=unsure[0], probability=0.5,
                            threshold=0.5, band=0.1, undecided=unsure,
                            decided=(checks if self.untyped else DecidedChecks(tuple(checks))) if self.tell_decided
                            else None)
        return checks

    async def coverage(self, question, answer, parts=None):
        raise AssertionError("not asked")

    async def relevance(self, query, passages):
        raise AssertionError("not asked")

    async def support(self, answer, sources):
        raise AssertionError("not asked")


RUBRIC = Rubric(id="care", name="Care", items=[
    {"id": "sorry", "text": "The assistant apologises.", "points": 2},
    {"id": "date", "text": "The assistant gives a delivery date.", "points": 1},
    {"id": "blame", "text": "The assistant blames the customer.", "points": -2},
])
CHAT = ChatSession("s", [Message("user", "Where is my parcel?"), Message("assistant", "Sorry! It comes Monday.")])


async def judged(table, rubric=RUBRIC, chat=CHAT, **kw):
    runtime = Runtime(Settings.load(), open_store=False)
    try:
        evaluator = SessionEvaluator(RubricSet(rubrics=[rubric]), RubricJudge(
            runtime.wrap(Scripted(table, **kw)), builtin("rubric_judge"), builtin("rubric_items_judge")))
        [score] = (await evaluator.evaluate(chat)).to_json()["rubric_scores"]
        return score
    finally:
        await runtime.aclose()


async def test_undecided_items_are_reported_with_met_null_and_the_score_as_a_range():
    score = await judged({"The assistant apologises.": True, "The assistant gives a delivery date.": None,
                          "The assistant blames the customer.": None})
    assert score["status"] == "evaluation_failed" and score["score"] is None
    assert score["reasoning"] == "uncertain: not sure about 'The assistant gives a delivery date.'"
    assert [(i["id"], i["met"]) for i in score["items"]] == [("sorry", True), ("date", None), ("blame", None)]
    assert score["items"][0]["confidence"] == 0.9 and score["items"][0]["evidence"] == "the evidence"
    assert score["items"][1]["reasoning"].startswith("undecided:") and "confidence" not in score["items"][1]
    # 3 points possible: worst (date missed, blame met) 0 -> 1.0; best (date met, blame not) 3 -> 5.0
    assert score["score_range"] == [1.0, 5.0]


async def test_a_decided_rubric_has_no_score_range():
    score = await judged({"The assistant apologises.": True, "The assistant gives a delivery date.": True,
                          "The assistant blames the customer.": False})
    assert score["status"] == "scored" and score["score"] == 5.0 and "score_range" not in score
    assert [i["met"] for i in score["items"]] == [True, True, False]


@pytest.mark.parametrize("how", [{"tell_decided": False}, {"untyped": True}])
async def test_a_judge_that_does_not_say_what_it_decided_reports_no_items(how):
    """Nothing said, or said in a shape that is not the typed one: nothing is read as decided."""
    score = await judged({"The assistant apologises.": True, "The assistant gives a delivery date.": None,
                          "The assistant blames the customer.": False}, **how)
    assert score["status"] == "evaluation_failed" and "items" not in score and "score_range" not in score


EXPECTED_RUBRIC = Rubric(id="right", name="Correct", items=[
    {"id": "agrees", "text": "The answer says what {expected} says.", "points": 1}])


EXPECTED = ("Caffeine blocks adenosine. It keeps you awake.", "Caffeine is a stimulant. It raises your heart rate.")
CHAT_WITH_EXPECTED = ChatSession("s", [Message("user", "Why does coffee wake me up?"),
                                       Message("assistant", "It blocks it.")], expected=EXPECTED)


@pytest.mark.parametrize(("sentences", "met", "score_range"), [
    # one expected answer expressed in full: met, whatever the undecided sentence of the other
    ((True, True, None, True), True, None),
    # every expected answer has a sentence found missing: not met, whatever the undecided ones
    ((False, None, None, False), False, None),
    # one expected answer could still be met: undecided
    ((True, None, False, True), None, [1.0, 5.0]),
])
async def test_an_expected_item_is_decided_when_its_undecided_sentences_cannot_change_it(sentences, met, score_range):
    table = dict(zip([s for answer in EXPECTED for s in answer.replace(". ", ".|").split("|")], sentences))
    score = await judged(table, rubric=EXPECTED_RUBRIC, chat=CHAT_WITH_EXPECTED)
    assert score["items"][0]["met"] is met
    assert score["status"] == ("evaluation_failed" if met is None else "scored")
    assert score.get("score_range") == score_range


async def test_the_stored_result_and_its_trace_page_show_the_undecided_item(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from jurist.rubrics.results import RubricResult
    from jurist.server import create_app
    from jurist.store import Store

    monkeypatch.setenv("JURIST_HOME", str(tmp_path / ".jurist"))
    store = Store(f"sqlite:///{tmp_path}/traces.db")
    runtime = Runtime(Settings.load(), open_store=False)
    try:
        table = {"The assistant apologises.": True, "The assistant gives a delivery date.": None,
                 "The assistant blames the customer.": False}
        evaluator = SessionEvaluator(RubricSet(rubrics=[RUBRIC]), RubricJudge(
            runtime.wrap(Scripted(table)), builtin("rubric_judge"), builtin("rubric_items_judge")), store)
        result = await evaluator.evaluate(CHAT)
        await store.aflush()
        again = RubricResult.model_validate(result.to_json())  # result.json read back, written the same
        assert again.to_json() == result.to_json() and again.rubric_scores[0].score_range == (3.6667, 5.0)  # 2 of 3 points, or all 3
        for bad, says in (([5.0, 3.6667], "the low end (5) is above the high end (3.6667)"), ([1.0], "score_range"),
                          ([1.0, "high"], "score_range")):
            edited = result.to_json()
            edited["rubric_scores"][0]["score_range"] = bad  # a hand-edited file
            with pytest.raises(ValidationError, match=re.escape(says)):
                RubricResult.model_validate(edited)
        [row] = store.evaluations(kind="rubric", limit=None)
        with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as client:
            page = client.get(f"/evaluation/evaluations/{row['id']}").text
        assert '<span class="badge warn" title="the judge could not decide">undecided</span>' in page
        assert "the score lies between 3.7 and 5.0" in page
    finally:
        await runtime.aclose()
        store.close()


async def test_the_terminal_table_and_the_assertion_message_show_the_range_and_the_undecided_item():
    from rich.console import Console

    from jurist.cli.evaluate import result_table
    from jurist.pytest_plugin import describe

    runtime = Runtime(Settings.load(), open_store=False)
    try:
        evaluator = SessionEvaluator(RubricSet(rubrics=[RUBRIC]), RubricJudge(runtime.wrap(Scripted(
            {"The assistant apologises.": True, "The assistant gives a delivery date.": None,
             "The assistant blames the customer.": False})), builtin("rubric_judge"), builtin("rubric_items_judge")))
        result = await evaluator.evaluate(CHAT)
    finally:
        await runtime.aclose()
    console = Console(width=200, record=True)
    console.print(result_table(result))
    assert "— (3.6667 to 5/5)" in console.export_text()
    message = describe(result, 3.0)
    assert "- care: evaluation_failed (the score lies between 3.6667 and 5): uncertain: not sure" in message
    assert "    [x] sorry: the evidence" in message and "    [?] date: undecided:" in message
    assert "    [ ] blame: " in message
