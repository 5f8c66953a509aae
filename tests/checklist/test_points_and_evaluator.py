"""Checklist files, the evaluator's model choice, and the local judge."""

from __future__ import annotations

import json

import pytest

from jurist.checklist import ChecklistEvaluator, ChecklistMessage, checklist_judge_ref, load_checklist
from jurist.checklist.evaluator import minimal_feedback, parse_batch_response
from jurist.config import Settings
from jurist.errors import InputError
from jurist.models import script

from .conftest import CAFFEINE, judge_reply
from tests.quoting import prompt_text


def test_caffeine_example_loads():
    c = load_checklist(CAFFEINE)
    assert c.title and len(c.points) == 5 and c.point("adenosine").text.startswith("Caffeine blocks")


@pytest.mark.parametrize("data, where", [
    ({"points": [{"id": "a", "text": "t"}]}, "title"),
    ({"title": "T", "points": []}, "points"),
    ({"title": "T", "points": [{"id": "a", "text": "t"}, {"id": "", "text": "u"}]}, "points[1].id"),
    ({"title": "T", "points": [{"id": "a", "text": "t"}, {"id": "a", "text": "u"}]}, "used twice"),
    ({"title": "T", "points": [{"id": "a", "txt": "t"}]}, "points[0]: unknown field 'txt' (did you mean 'text'?) ("),
    ({"title": "T", "points": [{"id": "a", "text": "t", "weight": 2}]}, "unknown field 'weight' (fields: id, text)"),
    ({"titel": "T", "points": [{"id": "a", "text": "t"}]}, "unknown field 'titel' (did you mean 'title'?) ("),
])
def test_bad_checklist_files_name_file_and_field(tmp_path, data, where):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(data))
    with pytest.raises(InputError) as err:
        load_checklist(f)
    assert str(f) in str(err.value) and where in str(err.value)


def test_a_misspelt_field_is_named_with_its_line(tmp_path):
    f = tmp_path / "c.json"
    f.write_text('{\n  "title": "T",\n  "points": [\n    {"id": "a", "txt": "t"}\n  ]\n}\n')
    with pytest.raises(InputError) as err:
        load_checklist(f)
    assert str(err.value).startswith(f"{f}:4: points[0]: unknown field 'txt' (did you mean 'text'?) (expected")


def test_unreadable_and_invalid_json(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_checklist(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(InputError, match=r"x.json:1: not valid JSON"):
        load_checklist(tmp_path / "x.json")


def test_judge_choice_fast_then_judge_then_local():
    assert checklist_judge_ref(Settings.load(aliases={"fast": "scripted/f"}, judge="scripted/j")) == "scripted/f"
    assert checklist_judge_ref(Settings.load(judge="scripted/j")) == "scripted/j"
    assert checklist_judge_ref(Settings.load()) == "local/minilm"
    assert checklist_judge_ref(Settings.load(aliases={"fast": "scripted/f"}), "scripted/x") == "scripted/x"


def test_parse_accepts_fences_and_rejects_malformed():
    r = parse_batch_response("```json\n" + judge_reply(("a", 0.7), feedback="f") + "\n```")
    assert r.recalledPoints[0].id == "a" and r.feedback == "f"
    for bad in ('{"feedback": "x"}', '{"recalledPoints": [{"id": "a", "confidence": 3}]}', "nothing"):
        with pytest.raises(Exception):
            parse_batch_response(bad)


async def test_evaluator_alone_with_the_fast_alias(checklist):
    judge = script("fast-judge", judge_reply(("half_life", 0.8), feedback="ok"))
    ev = ChecklistEvaluator(settings=Settings.load(aliases={"fast": "scripted/fast-judge"}))
    msgs = [ChecklistMessage(role="user", content=f"m{i}") for i in range(15)]
    r = await ev.evaluate_batch(checklist.points, msgs, "recall")
    assert r.recalled_point_ids == ["half_life"] and r.confidence_per_point == {"half_life": 0.8}
    prompt = prompt_text(judge.requests[0].messages)
    assert "m4" not in prompt and "m5" in prompt and "m14" in prompt  # the last 10 messages
    assert (await ev.evaluate_batch([], msgs)).recalled_point_ids == []
    assert len(judge.requests) == 1


async def test_the_evaluator_reads_role_and_content_dicts_as_messages(checklist):
    judge = script("fast-judge", judge_reply(("half_life", 0.8), feedback="ok"))
    ev = ChecklistEvaluator(settings=Settings.load(aliases={"fast": "scripted/fast-judge"}))
    msgs = [{"role": "assistant", "content": "What do you remember?"}, {"role": "user", "content": "five hours"}]
    r = await ev.evaluate_batch(checklist.points, msgs, "recall")
    assert r.recalled_point_ids == ["half_life"]
    prompt = prompt_text(judge.requests[0].messages)
    assert '<text id="1-assistant">' in prompt and '<text id="2-user">' in prompt and "five hours" in prompt


def test_minimal_feedback():
    assert minimal_feedback(["a"], ["b"], "rabbithole") == "Point a was recalled."
    assert minimal_feedback(["a"], ["b"], "rabbithole", ["b"]) == "Point a was recalled."  # minimal: no more
    assert minimal_feedback(["a"], ["b"], "recall", ["b"]) == (
        "Point a was recalled. Points b remain unchecked. Point(s) b could not be judged from this message.")
    assert minimal_feedback([], ["b", "c"], "recall") == (
        "No recall points were demonstrated in this message. Points b, c remain unchecked.")


@pytest.mark.slow
async def test_local_judge_checks_points_by_meaning(checklist):
    pytest.importorskip("tokenizers")
    ev = ChecklistEvaluator("local/minilm", settings=Settings.load())
    msgs = [ChecklistMessage(role="assistant", content="What do you remember?"),
            ChecklistMessage(role="user", content="Caffeine blocks the adenosine receptors in the brain, "
                                                  "so adenosine cannot make you feel sleepy.")]
    r = await ev.evaluate_batch(checklist.points, msgs, "recall")
    assert r.recalled_point_ids == ["adenosine"] and 0.5 <= r.confidence_per_point["adenosine"] <= 1
    assert r.feedback.startswith("Point adenosine was recalled.") and "remain unchecked" in r.feedback


@pytest.mark.slow
async def test_a_point_the_local_judge_cannot_decide_stays_unchecked_and_the_others_count(checklist):
    """One point inside the band: the turn keeps the verdicts on the others, names the undecided
    point and says why; every point inside it: the turn fails, as before."""
    pytest.importorskip("tokenizers")
    from jurist.models.local import LocalJudge, LocalThresholds

    msgs = [ChecklistMessage(role="user", content="Caffeine has a half-life of about five hours in adults. "
                                                  "It blocks adenosine so you do not feel sleepy.")]
    points = list(checklist.points)
    deciding = LocalJudge(LocalThresholds(band={"expresses": 0}))
    threshold = deciding.thresholds.expresses
    checks = await deciding.expresses(msgs[0].content, [p.text for p in points])
    distance = sorted((abs((c.confidence if c.expressed else 1 - c.confidence) - threshold), p.id)
                      for p, c in zip(points, checks))
    (near, near_id), (second, _) = distance[0], distance[1]
    assert second - near > 2e-4, distance  # one point clearly the closest to the threshold
    band = (near + second) / 2

    ev = ChecklistEvaluator(LocalJudge(LocalThresholds(band={"expresses": band})), settings=Settings.load())
    r = await ev.evaluate_batch(points, msgs, "recall")
    expected = [p.id for p, c in zip(points, checks) if c.expressed and p.id != near_id]
    assert r.status == "ok" and r.undecided_ids == [near_id]
    assert expected, "the message should express a point the judge decides"
    assert r.recalled_point_ids == expected and near_id not in r.confidence_per_point
    assert r.reason.startswith("uncertain: the local judge cannot decide whether the text expresses")
    assert f"Point {expected[0]} was recalled." in r.feedback
    assert r.feedback.endswith(f"Point(s) {near_id} could not be judged from this message.")  # for the tutor
    minimal = await ev.evaluate_batch(points, msgs, "rabbithole")
    assert minimal.undecided_ids == [near_id] and "could not be judged" not in minimal.feedback
    assert len(r.call_ids) == 1  # the question is on record (as an error: not every point was decided)

    everything = ChecklistEvaluator(LocalJudge(LocalThresholds(band={"expresses": 0.5})), settings=Settings.load())
    failed = await everything.evaluate_batch(points, msgs, "recall")
    assert failed.status == "failed" and failed.undecided_ids == [] and failed.recalled_point_ids == []
    assert failed.reason.startswith("uncertain:") and f"; {len(points) - 1} more inside the band" in failed.reason


async def test_an_undecided_error_from_another_judge_without_decided_checks_fails_the_turn(checklist):
    """A judge of the caller's own that raises Uncertain without saying what it decided: no guess."""
    from jurist.errors import Uncertain

    class Unsure:
        """Unsure of everything it is asked, and says nothing of what it decided."""

        name = "mine/unsure"

        @staticmethod
        def _unsure(subject):
            raise Uncertain("uncertain: not sure", subject=subject, probability=0.5, threshold=0.5, band=0.1)

        async def expresses(self, text, statements):
            self._unsure(statements[0])

        async def coverage(self, question, answer, parts=None):
            self._unsure(question)

        async def relevance(self, query, passages):
            self._unsure(query)

        async def support(self, answer, sources):
            self._unsure(answer)

    ev = ChecklistEvaluator(Unsure(), settings=Settings.load())
    r = await ev.evaluate_batch(checklist.points, [ChecklistMessage(role="user", content="Caffeine.")], "recall")
    assert r.status == "failed" and r.reason == "uncertain: not sure" and r.undecided_ids == []
