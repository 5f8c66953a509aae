"""Batch scoring: files, summary, resume, bad input, bounded concurrency."""

import json
import shutil

import pytest

from jurist.config import Settings
from jurist.models import script
from jurist.rubrics import evaluate_batch
from jurist.rubrics.models import Rubric, RubricSet
from jurist.store import Store

from tests.conftest import EXAMPLES
from tests.quoting import prompt_text

RUBRICS = RubricSet(rubrics=[Rubric(id="a", name="A", scoring_criteria="c", weight=1),
                             Rubric(id="b", name="B", scoring_criteria="c", weight=3)])


def make_sessions(folder, n):
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"sess{i:03d}.jsonl").write_text(
            json.dumps({"role": "user", "content": f"question {i}"}) + "\n"
            + json.dumps({"role": "assistant", "content": f"answer {i}"}) + "\n")
    return folder


def scores_by_session(req):
    text = prompt_text(req.messages)
    n = int(text.split("question ")[1].split()[0].split("\n")[0])
    return f"SCORE: {1 + n % 5}\nREASONING: r{n}"


async def test_batch_writes_results_and_the_notes_summary(tmp_path):
    sessions = make_sessions(tmp_path / "s", 10)
    script("j", default=scores_by_session)
    report = await evaluate_batch(RUBRICS, sessions, tmp_path / "out", parallel=3, judge="scripted/j")
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == sorted([f"sess{i:03d}_result.json" for i in range(10)] + ["summary.json"])
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    bs = summary["batch_summary"]
    assert bs["total_sessions"] == 10 and bs["average_score"] == 3.0 and bs["median_score"] == 3.0
    assert bs["score_distribution"] == {"1": 2, "2": 2, "3": 2, "4": 2, "5": 2}
    assert bs["std_deviation"] == pytest.approx(1.4142, abs=1e-4)
    assert summary["per_rubric_summary"]["a"] == {"name": "A", "average": 3.0, "median": 3.0, "scored": 10,
                                                  "failed": 0, "failure_rate": 0.0}
    assert report.exit_code == 0 and report.scored == 10


async def test_resume_scores_nothing_twice(tmp_path):
    sessions = make_sessions(tmp_path / "s", 8)
    out = tmp_path / "out"
    adapter = script("j", default=scores_by_session)
    seen = []

    def stop_after_three(name, status):
        seen.append(name)
        if len(seen) == 3:
            raise RuntimeError("crash")  # as if the process died mid-batch

    with pytest.raises(RuntimeError, match="crash"):
        await evaluate_batch(RUBRICS, sessions, out, parallel=1, judge="scripted/j", on_progress=stop_after_three)
    done_first = {p.name for p in out.glob("*_result.json")}
    assert len(done_first) == 3
    calls_first = len(adapter.requests)
    report = await evaluate_batch(RUBRICS, sessions, out, parallel=4, judge="scripted/j")
    assert report.skipped == 3 and report.scored == 5
    assert len(adapter.requests) - calls_first == 5 * 2  # two rubrics for each remaining session
    assert report.summary["batch_summary"]["total_sessions"] == 8
    again = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j")
    assert again.scored == 0 and again.skipped == 8
    store = Store(Settings.load().database)
    evaluations = store.evaluations(limit=None)
    store.close()
    assert sorted(e["subject_id"] for e in evaluations) == [f"sess{i:03d}" for i in range(8)]


async def test_force_rescores_and_cache_answers_without_calls(tmp_path):
    sessions = make_sessions(tmp_path / "s", 3)
    adapter = script("j", default=scores_by_session)
    await evaluate_batch(RUBRICS, sessions, tmp_path / "out", judge="scripted/j")
    n = len(adapter.requests)
    report = await evaluate_batch(RUBRICS, sessions, tmp_path / "out", judge="scripted/j", force=True)
    assert report.scored == 3 and len(adapter.requests) == n  # all answered from the cache
    report = await evaluate_batch(RUBRICS, sessions, tmp_path / "out", judge="scripted/j", force=True, cache=False)
    assert len(adapter.requests) == 2 * n


async def test_bad_session_files_are_reported_and_others_scored(tmp_path):
    sessions = make_sessions(tmp_path / "s", 2)
    (sessions / "broken.jsonl").write_text('{"role": "user", "content": "hi"}\n{oops\n')
    (sessions / "dupe.jsonl").write_text('{"session_id": "sess000", "role": "user", "content": "question 0"}\n')
    script("j", default=scores_by_session)
    report = await evaluate_batch(RUBRICS, sessions, tmp_path / "out", judge="scripted/j", parallel=1)
    assert report.scored == 2 and report.exit_code == 2
    assert any("broken.jsonl:2: not valid JSON" in e for e in report.input_errors)
    assert any("also used by" in e for e in report.input_errors)


async def test_failed_rubrics_are_counted_and_exit_code_is_1(tmp_path):
    sessions = make_sessions(tmp_path / "s", 4)
    script("j", default=lambda req: "SCORE: 9" if "## Rubric: B" in prompt_text(req.messages) else "SCORE: 4")
    report = await evaluate_batch(RUBRICS, sessions, tmp_path / "out", judge="scripted/j",
                                  settings=Settings.load(max_retries=0))
    assert report.exit_code == 1
    pr = report.summary["per_rubric_summary"]
    assert pr["b"]["failed"] == 4 and pr["b"]["failure_rate"] == 1.0 and pr["b"]["average"] is None
    assert pr["a"]["average"] == 4.0 and report.summary["failures"]["evaluations_failed"] == 4
    assert report.summary["batch_summary"]["average_score"] == 4.0


async def test_missing_or_empty_sessions_folder(tmp_path):
    from jurist.errors import InputError

    script("j", default="SCORE: 3")
    with pytest.raises(InputError, match="sessions folder not found"):
        await evaluate_batch(RUBRICS, tmp_path / "nope", tmp_path / "out", judge="scripted/j")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no \\*.jsonl"):
        await evaluate_batch(RUBRICS, tmp_path / "empty", tmp_path / "out", judge="scripted/j")


async def test_examples_batch_with_item_rubrics(tmp_path):
    shutil.copytree(EXAMPLES / "sessions", tmp_path / "s")
    script("j", default='{"items": []}')
    report = await evaluate_batch(EXAMPLES / "rubrics.json", tmp_path / "s", tmp_path / "out", judge="scripted/j",
                                  settings=Settings.load(max_retries=0))
    # the judge answered no item: every rubric is evaluation_failed, none is silently scored
    assert report.summary["batch_summary"]["average_score"] is None
    assert report.summary["failures"]["evaluations_failed"] == 15


def test_failure_reasons_that_differ_only_in_numbers_are_one_kind():
    from jurist.rubrics.batch import reason_kind

    down = "EndpointDown: http://127.0.0.1:9/v1 is down: 10 calls in a row; calls fail at once for {} s more"
    assert reason_kind(down.format("29.5")) == reason_kind(down.format("3.1"))
    assert "127.0.0.1:#/v1" in reason_kind(down.format("1"))  # an address keeps its host
    assert reason_kind("failed on its side (500)") == reason_kind("failed on its side (503)")
    local = "the local judge cannot score free-form rubric {}; configure an LLM judge"
    assert reason_kind(local.format("rubric_001")) != reason_kind(local.format("rubric_002"))  # ids stay apart
