"""Batches that keep files and store rows in agreement: recovery, retries of failed sessions,
unreadable results, one batch per folder, result names, and ids and numbers checked before any call."""

import asyncio
import json
import os
import threading

import pytest

from jurist.config import Settings
from jurist.errors import InputError, StoreError
from jurist.jsonfiles import write_json
from jurist.models import script
from jurist.rubrics import evaluate_batch
from jurist.rubrics.folder import LOCK_NAME
from jurist.rubrics.models import Rubric, RubricSet, parse_rubrics
from jurist.rubrics.naming import result_name
from jurist.store import Store

from tests.conftest import fresh_database
from tests.rubrics.test_batch import RUBRICS, make_sessions, scores_by_session
from tests.quoting import prompt_text

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def database(request, tmp_path, monkeypatch):
    """The store of the test's batches: a new SQLite file or PostgreSQL database."""
    with fresh_database(request.param, tmp_path, "jurist_batch") as url:
        monkeypatch.setenv("JURIST_DATABASE_URL", url)
        yield url


def strict_json(path):
    """A file's JSON, refusing NaN and infinity (which are not JSON)."""
    def refuse(token):
        raise ValueError(f"{path.name} holds {token}")
    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def rows_and_files(url, out):
    """{evaluation id: session id} of the store's rubric rows and of the folder's result files."""
    store = Store(url)
    try:
        rows = {e["id"]: e["subject_id"] for e in store.evaluations(kind="rubric", limit=None)}
    finally:
        store.close()
    files = {}
    for p in out.glob("*_result.json"):
        data = strict_json(p)
        files[data["trace_id"]] = data["session_id"]
    return rows, files


# -- 2. files and rows agree ------------------------------------------------------------------


async def test_every_result_file_has_its_committed_row_when_written(database, tmp_path):
    """The row is committed before the file appears, so no moment has a file without its row."""
    sessions = make_sessions(tmp_path / "s", 12)
    out = tmp_path / "out"
    script("j", default=scores_by_session)
    checked = []
    watcher = Store(database)

    def check(name, status):  # runs as each session is counted, after its file is in place
        rows, files = rows_and_files(database, out)
        assert set(files) <= set(rows), "a result file without its store row"
        checked.append(name)

    try:
        await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j", parallel=4, on_progress=check)
    finally:
        watcher.close()
    assert len(checked) == 12
    rows, files = rows_and_files(database, out)
    assert rows == files and len(set(files.values())) == 12


async def test_pending_results_are_put_in_place_or_scored_again(tmp_path):
    """A batch killed between commit and rename leaves a pending file: the rerun finishes it if its row
    is stored, removes it (and scores the session) if not, and removes half-written temporary files."""
    url = Settings.load().database
    sessions = make_sessions(tmp_path / "s", 3)
    out = tmp_path / "out"
    adapter = script("j", default=scores_by_session)
    await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j")
    rows, files = rows_and_files(url, out)
    # As if killed: sess000's file not yet renamed (its row committed); sess001's row never committed.
    by_session = {s: i for i, s in files.items()}
    done, lost = out / "sess000_result.json", out / "sess001_result.json"
    done.rename(out / f".{done.name}.{by_session['sess000']}.pending")
    lost.rename(out / f".{lost.name}.{'f' * 32}.pending")
    (out / ".summary.json.4242.0123abcd.tmp").write_text("{half")
    (out / "sess002_result.json.tmp").write_text("{half")  # an earlier version's temporary name
    calls = len(adapter.requests)
    report = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j", cache=False)
    assert report.skipped == 2 and report.scored == 1  # sess000 recovered, sess001 scored again
    assert len(adapter.requests) - calls == 2  # sess001's two rubrics
    assert sorted(p.name for p in out.iterdir()) == ["sess000_result.json", "sess001_result.json",
                                                     "sess002_result.json", "summary.json"]
    rows, files = rows_and_files(url, out)
    assert set(files) <= set(rows) and strict_json(done)["trace_id"] == by_session["sess000"]


async def test_a_row_the_store_refuses_leaves_no_result_file(tmp_path):
    """Before, a row PostgreSQL refused (after the judge was paid) left a file whose row never came."""
    class Refusing(Store):
        async def asave_evaluation(self, evaluation, score_rows):
            raise StoreError("could not write to the store: DataError: value too long")

    sessions = make_sessions(tmp_path / "s", 2)
    store = Refusing(f"sqlite:///{tmp_path}/j.db")
    script("j", default=scores_by_session)
    try:
        with pytest.raises(StoreError, match="value too long"):
            await evaluate_batch(RUBRICS, sessions, tmp_path / "out", judge="scripted/j", store=store)
    finally:
        store.close()
    assert [p.name for p in (tmp_path / "out").iterdir()] == []  # no result, no pending file, no lock


# -- 3. a rerun retries failed sessions ---------------------------------------------------------


async def test_a_rerun_retries_failed_sessions_unless_told_not_to(database, tmp_path):
    sessions = make_sessions(tmp_path / "s", 5)
    out = tmp_path / "out"
    settings = Settings.load(max_retries=0)
    script("down", default="the judge is down")
    report = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/down", settings=settings)
    assert report.exit_code == 1 and report.summary["failures"]["sessions_without_score"] == 5

    kept = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/down", settings=settings,
                                retry_failed=False)
    assert kept.scored == 0 and kept.skipped == 5 and kept.exit_code == 1

    judge = script("down", default=scores_by_session)  # the judge is back
    before = len(judge.requests)
    report = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/down", settings=settings)
    assert report.scored == 5 and report.retried == 5 and report.exit_code == 0  # before: 0 calls, exit 1
    assert len(judge.requests) - before == 10
    assert report.summary["failures"]["evaluations_failed"] == 0
    rows, files = rows_and_files(database, out)
    assert set(files) <= set(rows) and len(rows) == 10  # the failed evaluations stay on record


async def test_a_partly_failed_session_is_retried_with_its_scored_rubric_from_the_cache(tmp_path):
    sessions = make_sessions(tmp_path / "s", 2)
    out = tmp_path / "out"
    settings = Settings.load(max_retries=0)
    script("j", default=lambda req: "SCORE: 9" if "## Rubric: B" in prompt_text(req.messages) else "SCORE: 4")
    await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j", settings=settings)
    judge = script("j", default="SCORE: 4")
    before = len(judge.requests)
    report = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j", settings=settings)
    assert report.retried == 2 and report.exit_code == 0
    assert len(judge.requests) - before == 2  # only rubric B; A came from the call cache


@pytest.mark.parametrize("content", ["[]", "{}", "garbage", "", '{"session_id": "sess000"}',
                                     '{"summary": {"total_score": NaN}}'])
async def test_unreadable_result_files_count_as_missing(tmp_path, content):
    sessions = make_sessions(tmp_path / "s", 2)
    out = tmp_path / "out"
    out.mkdir()
    (out / "sess000_result.json").write_text(content)
    script("j", default=scores_by_session)
    report = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j")
    assert report.scored == 2 and report.skipped == 0 and report.exit_code == 0
    assert strict_json(out / "sess000_result.json")["session_id"] == "sess000"


# -- 4. one batch per folder; unique temporary names ---------------------------------------------


async def test_a_second_batch_on_the_same_folder_is_refused_naming_the_first(tmp_path):
    sessions = make_sessions(tmp_path / "s", 6)
    out = tmp_path / "out"
    adapter = script("j", default=scores_by_session)
    adapter.delay = 0.05
    first = asyncio.create_task(evaluate_batch(RUBRICS, sessions, out, judge="scripted/j", parallel=2))
    for _ in range(2000):
        if (out / LOCK_NAME).exists():
            break
        await asyncio.sleep(0.005)
    with pytest.raises(InputError, match=f"another batch is writing to this folder \\(process {os.getpid()}\\)"):
        await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j")
    report = await first
    assert report.scored == 6 and len(adapter.requests) == 12  # nothing scored twice
    assert not (out / LOCK_NAME).exists()  # the lock goes with the batch
    again = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j")  # the folder is free again
    assert again.skipped == 6


def test_writers_of_one_file_use_temporary_files_of_their_own(tmp_path):
    target = tmp_path / "summary.json"
    errors = []

    def write(n):
        try:
            for i in range(50):
                write_json(target, {"writer": n, "i": i})
        except Exception as exc:  # before: FileNotFoundError on the shared summary.json.tmp
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and json.loads(target.read_text())["i"] == 49
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]


# -- 5. distinct session ids get distinct result files -------------------------------------------


def write_session(folder, file, session_id, text):
    folder.mkdir(exist_ok=True)
    (folder / file).write_text(json.dumps({"session_id": session_id, "role": "user", "content": text}) + "\n")


async def test_ids_that_were_the_same_after_sanitising_get_their_own_results(tmp_path):
    sessions = tmp_path / "s"
    write_session(sessions, "1.jsonl", "a b", "question 1")
    write_session(sessions, "2.jsonl", "a_b", "question 2")
    write_session(sessions, "3.jsonl", "a/b", "question 3")
    out = tmp_path / "out"
    script("j", default=scores_by_session)
    report = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j")
    assert report.scored == 3 and report.input_errors == []
    names = {result_name(s) for s in ("a b", "a_b", "a/b")}
    assert len(names) == 3 and "a_b_result.json" in names
    held = {strict_json(out / n)["session_id"]: strict_json(out / n)["summary"]["total_score"] for n in names}
    assert held == {"a b": 2.0, "a_b": 3.0, "a/b": 4.0}  # before: one file, the last writer's
    again = await evaluate_batch(RUBRICS, sessions, out, judge="scripted/j")
    assert again.skipped == 3 and again.scored == 0


async def test_ids_that_differ_only_in_case_are_refused_with_both_names(tmp_path):
    """On a case-insensitive file system (macOS, Windows) they would share one result file."""
    sessions = tmp_path / "s"
    write_session(sessions, "1.jsonl", "Case", "question 1")
    write_session(sessions, "2.jsonl", "case", "question 2")
    script("j", default=scores_by_session)
    report = await evaluate_batch(RUBRICS, sessions, tmp_path / "out", judge="scripted/j", parallel=1)
    assert report.scored == 1 and report.exit_code == 2
    [error] = report.input_errors
    assert "session id 'case' and 'Case'" in error and "would share the result file" in error


# -- 6. ids and numbers checked before any call -------------------------------------------------


@pytest.mark.parametrize("raw, message", [
    ('{"rubrics": [{"id": "r", "name": "R", "scoring_criteria": "c", "weight": 1e309}]}', "weight"),
    ('{"rubrics": [{"id": "r", "name": "R", "scoring_criteria": {"1": "x", "inf": "y"}}]}', "finite score levels"),
    ('{"rubrics": [{"id": "r", "name": "R", "scoring_criteria": {"-inf": "x", "5": "y"}}]}', "finite score levels"),
    ('{"rubrics": [{"id": "r", "name": "R", "scoring_criteria": "c", "scale": [0, 1e400]}]}', "scale"),
    ('{"scale": [-1e308, 1e308], "rubrics": [{"id": "r", "name": "R", "scoring_criteria": "c"}]}', "scale"),
    ('{"rubrics": [{"id": "r", "name": "R", "items": [{"id": "a", "text": "t", "points": 1e308}, '
     '{"id": "b", "text": "u", "points": 1e308}]}]}', "points"),
    ('{"rubrics": [{"id": "' + "r" * 201 + '", "name": "R", "scoring_criteria": "c"}]}', "at most 200"),
    ('{"rubrics": [{"id": "r\\u0000", "name": "R", "scoring_criteria": "c"}]}', "control character"),
    ('{"rubrics": [{"id": "r", "name": "' + "n" * 301 + '", "scoring_criteria": "c"}]}', "at most 300"),
    ('{"version": "' + "v" * 65 + '", "rubrics": [{"id": "r", "name": "R", "scoring_criteria": "c"}]}',
     "at most 64"),
])
async def test_rubrics_the_store_or_arithmetic_cannot_take_are_refused(tmp_path, raw, message):
    (tmp_path / "r.json").write_text(raw)
    sessions = make_sessions(tmp_path / "s", 1)
    adapter = script("j", default=scores_by_session)
    with pytest.raises(InputError, match=message):
        await evaluate_batch(tmp_path / "r.json", sessions, tmp_path / "out", judge="scripted/j")
    assert adapter.requests == [] and not list((tmp_path / "out").glob("*.json"))


async def test_session_ids_the_store_cannot_take_are_input_errors_before_any_call(database, tmp_path):
    sessions = make_sessions(tmp_path / "s", 1)
    write_session(sessions, "long.jsonl", "x" * 301, "question 7")
    write_session(sessions, "nul.jsonl", "a\u0000b", "question 8")
    # A file name of 240 characters is a session id the store takes; its result file has a shortened name.
    (sessions / ("y" * 240 + ".jsonl")).write_text(json.dumps({"role": "user", "content": "question 9"}) + "\n")
    adapter = script("j", default=scores_by_session)
    report = await evaluate_batch(RUBRICS, sessions, tmp_path / "out", judge="scripted/j")
    assert report.scored == 2 and report.exit_code == 2 and len(report.input_errors) == 2
    assert any("long.jsonl:1: session_id 'xxx" in e and "at most 300" in e for e in report.input_errors)
    assert any("nul.jsonl:1" in e and "control character" in e for e in report.input_errors)
    assert len(adapter.requests) == 4  # the good sessions' two rubrics each, nothing for the refused ones
    rows, files = rows_and_files(database, tmp_path / "out")
    assert rows == files and set(files.values()) == {"sess000", "y" * 240}


async def test_results_summaries_and_rows_hold_finite_numbers_only(database, tmp_path):
    """Extreme but valid numbers: weights 1e12 and 1e-12, levels up to 1e12."""
    rubrics = parse_rubrics({"scale": [0, 1e12], "rubrics": [
        {"id": "heavy", "name": "H", "scoring_criteria": "c", "weight": 1e12},
        {"id": "light", "name": "L", "scoring_criteria": {"0": "no", "1e12": "yes"}, "weight": 1e-12}]}, "r")
    sessions = make_sessions(tmp_path / "s", 3)
    script("j", default="SCORE: 1000000000000")
    report = await evaluate_batch(rubrics, sessions, tmp_path / "out", judge="scripted/j")
    assert report.exit_code == 0
    for p in (tmp_path / "out").glob("*.json"):
        strict_json(p)
    # A scale a trillion points wide: the distribution lists the levels that occur, not every one.
    assert report.summary["batch_summary"]["score_distribution"] == {"1000000000000": 3}
    rows, files = rows_and_files(database, tmp_path / "out")
    assert rows == files and len(rows) == 3


def test_the_result_models_refuse_nan():
    from pydantic import ValidationError

    from jurist.rubrics.results import ResultSummary

    with pytest.raises(ValidationError):
        ResultSummary(total_score=float("nan"), max_score=5, percentage=None, rubrics_evaluated=1, rubrics_failed=0)
    with pytest.raises(ValidationError):
        RubricSet(rubrics=[Rubric(id="r", name="R", scoring_criteria="c", weight=float("inf"))])
