"""result.json and summary.json, written from their models, keep the bytes of the documented format.

``tests/data/payloads/result_s1.json`` and ``summary.json`` were written, before
the files were built from models, by the run below (the example session s1 and
the five example sessions plus an unreadable one; a free-form rubric, an
item-based rubric and a rubric whose replies cannot be parsed; a char budget
that truncates). The only addition since is ``"kind": "rubric"`` at the top
of result.json.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from jurist.config import Settings
from jurist.models import script
from jurist.rubrics import RubricResult, SessionEvaluator, build_judge, run_batch
from jurist.rubrics.batch import open_session, result_name, score_session
from jurist.rubrics.models import parse_rubrics
from jurist.rubrics.sessions import load_session
from jurist.store import Store
from tests.conftest import EXAMPLES, REPO
from tests.quoting import prompt_text

DATA = REPO / "tests" / "data" / "payloads"
RUBRICS = {"version": "2.1", "scale": [1, 5], "rubrics": [
    {"id": "clear", "name": "Clarity", "scoring_criteria": {"1": "muddled", "3": "ok", "5": "clear"}, "weight": 2},
    {"id": "facts", "name": "Facts", "items": [
        {"id": "aden", "text": "mentions adenosine", "points": 2},
        {"id": "cal", "text": "claims coffee has many calories", "points": -1}]},
    {"id": "tone", "name": "Tone", "scoring_criteria": "friendly"},
]}
VARYING = re.compile(rb'("evaluated_at": |"trace_id": |"latency_ms": )("[^"]*"|[0-9.]+)')


def reply(req):
    text = prompt_text(req.messages)
    if "## Rubric: Clarity" in text:
        return '{"score": 4, "reasoning": "clear \u00e9nough"}'
    if "## Rubric: Facts" in text:
        return json.dumps({"items": [{"id": "aden", "met": True, "reasoning": "yes"},
                                     {"id": "cal", "met": False, "reasoning": "no"}]})
    return "garbage"


def stable(raw: bytes) -> bytes:
    """The bytes with the run's time, trace id and latencies blanked."""
    return VARYING.sub(rb"\1_", raw)


def evaluator(store: Store | None, char_budget: int = 60_000) -> SessionEvaluator:
    script("gold", default=reply)
    judge = build_judge(Settings.load(max_retries=0), store, judge="scripted/gold")
    return SessionEvaluator(parse_rubrics(RUBRICS, "gold"), judge, store, char_budget=char_budget)


async def test_result_json_bytes_are_the_documented_format_plus_kind(tmp_path: Path):
    store = Store(f"sqlite:///{tmp_path / 'j.db'}")
    try:
        result = await score_session(evaluator(store, char_budget=200), load_session(EXAMPLES / "sessions" / "s1.jsonl"),
                                     tmp_path)
        await store.aflush()
        row = store.evaluations(limit=None)[0]
    finally:
        store.close()
    written = (tmp_path / result_name("s1")).read_bytes()
    before = (DATA / "result_s1.json").read_bytes()
    assert stable(written) == stable(before).replace(b'{\n  "version"', b'{\n  "kind": "rubric",\n  "version"', 1)
    # the stored payload is the file plus the session's transcript, and reads back as the same model
    stored = dict(row["payload"])
    transcript = stored.pop("transcript")
    assert stored == json.loads(written) and row["kind"] == "rubric" and "transcript" not in json.loads(written)
    session = load_session(EXAMPLES / "sessions" / "s1.jsonl")
    assert transcript == {"turns": [{"role": m.role, "content": m.content} for m in session.messages],
                          "omitted_chars": 0}
    assert RubricResult.model_validate(row["payload"]).transcript.text_of("user") == session.text_of("user")
    assert RubricResult.model_validate_json(written).to_json() == result.to_json()  # the judge's call ids stay in memory
    assert list(result.rubric_scores[1].to_json()).count("items") == 1
    assert "cached" not in result.rubric_scores[0].to_json() and "reasoning" in result.rubric_scores[1].items[0].to_json()


async def test_summary_json_bytes_are_unchanged(tmp_path: Path):
    sessions = tmp_path / "in"
    sessions.mkdir()
    for p in (EXAMPLES / "sessions").glob("*.jsonl"):
        shutil.copy(p, sessions)
    (sessions / "bad.jsonl").write_text("{not json\n")
    report = await run_batch(evaluator(None), sessions, tmp_path / "out")
    written = (tmp_path / "out" / "summary.json").read_bytes()
    expected = (DATA / "summary.json").read_text(encoding="utf-8").replace("{bad_file}", str(sessions / "bad.jsonl"))
    assert written == expected.encode("utf-8")
    assert report.summary == json.loads(written)


async def test_a_result_written_before_kind_is_read_back_and_counted(tmp_path: Path):
    """Resuming a batch reads the results already written, those from before ``kind`` included."""
    out = tmp_path / "out"
    out.mkdir()
    old = json.loads((DATA / "result_s1.json").read_text(encoding="utf-8"))
    assert "kind" not in old
    (out / result_name("s1")).write_text(json.dumps(old), encoding="utf-8")
    _, existing = open_session(EXAMPLES / "sessions" / "s1.jsonl", out, force=False)
    assert isinstance(existing, RubricResult) and existing.kind == "rubric"
    assert existing.summary.total_score == old["summary"]["total_score"]
    assert existing.truncated is not None and existing.truncated.omitted_chars == old["truncated"]["omitted_chars"]
    (out / result_name("s1")).write_text('{"half": "a result"}', encoding="utf-8")
    assert open_session(EXAMPLES / "sessions" / "s1.jsonl", out, force=False)[1] is None  # rescored


def test_the_stored_transcript_is_bounded_and_keeps_short_turns_whole():
    from jurist.rubrics.scoring import transcript_of
    from jurist.rubrics.sessions import ChatSession, Message

    session = ChatSession("s", [Message("user", "What is the latest on rust?"), Message("assistant", "x" * 50_000),
                                Message("user", "And on python?"), Message("assistant", "y" * 30_000)])
    t = transcript_of(session, budget=1_000)
    assert [len(turn.content) for turn in t.turns] == [27, 479, 14, 479]
    assert t.omitted_chars == 80_041 - 999
    assert t.text_of("user") == "What is the latest on rust?\nAnd on python?"
    whole = transcript_of(session, budget=100_000)
    assert whole.omitted_chars == 0 and whole.turns[1].content == "x" * 50_000
