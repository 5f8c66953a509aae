"""`experiment run` against the scripted OpenAI-compatible server as target and judge (SQLite and
PostgreSQL): answers, scores, records and files; failures of the target; reruns; the lock."""

import json

import pytest

from jurist.errors import InputError, NotFound
from jurist.experiments.run import ExperimentSpec, run_experiment
from jurist.store import Store
from jurist.testing import Reply

from tests.conftest import fresh_database
from tests.experiments.runs import (RUBRICS, add_dataset, judge_requests, questions, replies, settings_for,
                                    target_requests)

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(params=BACKENDS)
def url(request, tmp_path):
    with fresh_database(request.param, tmp_path, "jurist_experiment") as url:
        yield url


def spec(tmp_path, name="exp1", **kw):
    return ExperimentSpec(**{"name": name, "dataset": "qa", "target": "fake/app", "rubrics": RUBRICS,
                             "judge": "fake/judge", "parallel": 3, "output_dir": tmp_path / "out" / name, **kw})


async def test_every_item_is_answered_judged_stored_and_written(provider, tmp_path, url):
    add_dataset(url, tmp_path, questions(5))
    provider.default = replies({"Question 2?": "Paris"}, score=5)
    report = await run_experiment(spec(tmp_path), settings=settings_for(provider, url))
    record = report.record
    assert (record.status, record.items_total, record.items_scored, record.items_failed) == ("finished", 5, 5, 0)
    assert report.exit_code == 0 and record.target == "fake/app" and record.judge_models == ["fake/judge"]
    assert [r.id for r in record.rubrics] == ["correct", "clear"] and all(r.template_hash for r in record.rubrics)
    assert len(target_requests(provider)) == 5 and len(judge_requests(provider)) == 10
    # the judge reads the target's answer as the assistant's last turn
    assert any("Paris" in json.dumps(r["json"]["messages"]) for r in judge_requests(provider))
    with Store(url) as store:
        items = {i.item_id: i for i in store.experiment_items("exp1")}
        assert store.experiment("exp1") == record
        generations = store.calls(purpose="generation", limit=None)
        evaluations = store.evaluation_ids([i.evaluation_id for i in items.values() if i.evaluation_id])
    assert items["q002"].answer == "Paris" and items["q002"].scores["correct"].score == 5.0
    assert items["q002"].passed is True and items["q002"].percentage == 100.0
    assert len(generations) == 5 and {g["id"] for g in generations} == {i.generation_call_id for i in items.values()}
    assert len(evaluations) == 5
    out = tmp_path / "out" / "exp1"
    assert json.loads((out / "q002_result.json").read_text())["answer"] == "Paris"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["items"] == {"total": 5, "done": 5, "scored": 5, "failed": 0, "not_done": 0}
    assert summary["per_rubric"]["correct"]["average"] == 5.0 and summary["dataset_version"] == record.dataset_version


async def test_a_failing_target_fails_its_item_and_a_rerun_retries_only_that_one(provider, tmp_path, url):
    add_dataset(url, tmp_path, questions(4))
    provider.default = replies(fail={"Question 1?"})
    settings = settings_for(provider, url, max_retries=0)
    report = await run_experiment(spec(tmp_path), settings=settings)
    assert (report.record.items_scored, report.record.items_failed, report.exit_code) == (3, 1, 1)
    failed = json.loads((tmp_path / "out" / "exp1" / "q001_result.json").read_text())
    assert failed["status"] == "failed" and failed["error"].startswith("the target failed: ModelUnavailable")
    assert report.summary["failures"][0]["item_id"] == "q001"
    provider.requests.clear()
    provider.default = replies()
    rerun = await run_experiment(spec(tmp_path), settings=settings)
    assert (rerun.record.items_scored, rerun.record.items_failed, rerun.exit_code) == (4, 0, 0)
    assert [r["json"]["messages"][-1]["content"] for r in target_requests(provider)] == ["Question 1?"]
    assert rerun.skipped == 3 and rerun.done_now == 1


async def test_a_target_that_times_out_fails_its_item_and_the_run_goes_on(provider, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, questions(3))
    slow = replies()

    def respond(body):
        if body.get("model") == "app" and body["messages"][-1]["content"] == "Question 0?":
            return Reply(delay=3)
        return slow(body)

    provider.default = respond
    report = await run_experiment(spec(tmp_path), settings=settings_for(provider, url, timeout=0.3, max_retries=0))
    assert (report.record.items_scored, report.record.items_failed) == (2, 1)
    with Store(url) as store:
        item = {i.item_id: i for i in store.experiment_items("exp1")}["q000"]
    assert item.status == "failed" and "ModelTimeout" in item.error and item.answer is None


async def test_a_rerun_that_changes_what_ran_is_refused(provider, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, questions(2))
    provider.default = replies()
    settings = settings_for(provider, url)
    await run_experiment(spec(tmp_path), settings=settings)
    calls = len(provider.requests)
    with pytest.raises(InputError, match="ran with another target"):
        await run_experiment(spec(tmp_path, target="fake/other"), settings=settings)
    add_dataset(url, tmp_path, questions(3))  # a new version, now the latest
    with pytest.raises(InputError, match="ran with another dataset version") as err:
        await run_experiment(spec(tmp_path), settings=settings)
    old = err.value.args[0].split("--version ")[1].split(" ")[0]
    assert len(provider.requests) == calls
    resumed = await run_experiment(spec(tmp_path, version=old), settings=settings)
    assert resumed.skipped == 2 and len(provider.requests) == calls


async def test_a_second_run_of_the_same_name_is_refused_while_the_first_holds_it(provider, tmp_path, url):
    add_dataset(url, tmp_path, questions(2))
    provider.default = replies()
    with Store(url) as store:
        lock = store.experiment_lock("exp1")
        lock.acquire()
        try:
            with pytest.raises(InputError, match="the experiment 'exp1' is being run by"):
                await run_experiment(spec(tmp_path), settings=settings_for(provider, url))
        finally:
            lock.release()
    assert provider.requests == []
    report = await run_experiment(spec(tmp_path), settings=settings_for(provider, url))
    assert report.record.items_scored == 2


async def test_an_unknown_dataset_or_target_stops_before_any_call(provider, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, questions(2))
    settings = settings_for(provider, url)
    with pytest.raises(NotFound, match="no dataset 'nope'"):
        await run_experiment(spec(tmp_path, dataset="nope"), settings=settings)
    with pytest.raises(InputError, match="no module 'no_such_app'"):
        await run_experiment(spec(tmp_path, target="python:no_such_app:answer"), settings=settings)
    with pytest.raises(Exception, match="unknown provider 'nowhere'"):
        await run_experiment(spec(tmp_path, target="nowhere/model"), settings=settings)
    assert provider.requests == []


async def test_an_answer_kept_before_a_stop_is_judged_not_generated_again(provider, tmp_path, url):
    """What a run killed between the answer and its verdict leaves: the rerun judges the kept answer."""
    from jurist.store import experiments as q

    add_dataset(url, tmp_path, questions(2))
    provider.default = replies()
    with Store(url) as store:
        store.write(q.save_answer, "exp1", "q000", {"answer": "Kept answer", "turns": [
            {"role": "assistant", "content": "Kept answer"}], "call_id": None, "latency_ms": 12.0})
        assert store.experiment_items("exp1") == []  # answered is not done
    report = await run_experiment(spec(tmp_path), settings=settings_for(provider, url))
    assert [r["json"]["messages"][-1]["content"] for r in target_requests(provider)] == ["Question 1?"]
    assert report.resumed == 1 and report.record.items_scored == 2
    with Store(url) as store:
        item = {i.item_id: i for i in store.experiment_items("exp1")}["q000"]
    assert item.answer == "Kept answer" and item.latency_ms == 12.0
    assert any("Kept answer" in json.dumps(r["json"]["messages"]) for r in judge_requests(provider))


async def test_a_spent_budget_stops_the_run_and_a_rerun_goes_on(provider, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, questions(2))
    provider.default = replies()
    settings = settings_for(provider, url)
    stopped = await run_experiment(spec(tmp_path, max_cost=0.0), settings=settings)
    assert (stopped.record.status, stopped.record.items_scored, stopped.exit_code) == ("stopped", 0, 3)
    assert provider.requests == [] and any("cost budget of $0 was reached" in n for n in stopped.notes)
    assert stopped.summary["items"]["not_done"] == 2
    done = await run_experiment(spec(tmp_path, max_cost=5.0), settings=settings)
    assert (done.record.status, done.record.items_scored) == ("finished", 2)
    # the scripted server's calls have no known price: said, not counted as free
    assert any("calls of unknown cost do not count toward --max-cost" in n for n in done.notes)
    assert done.record.cost_usd is None and "unknown cost" in (done.record.cost_note or "")


async def test_each_item_carries_the_cost_of_its_calls_and_the_record_their_total(tmp_path):
    """The scripted provider runs in process: its calls are known to cost nothing, so items and total are $0."""
    from jurist.config import Settings
    from jurist.models import script

    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, questions(3))
    script("app", default=lambda request: "An answer.")
    script("judge", default=lambda request: json.dumps({"score": 3, "reasoning": "ok"}))
    report = await run_experiment(spec(tmp_path, target="scripted/app", judge="scripted/judge"),
                                  settings=Settings.load(database_url=url))
    with Store(url) as store:
        items = store.experiment_items("exp1")
    assert [(i.cost_usd, i.cost_note) for i in items] == [(0.0, None)] * 3
    assert (report.record.cost_usd, report.record.cost_note, report.summary["cost_usd"]) == (0.0, None, 0.0)


async def test_an_item_stored_without_its_file_gets_it_on_the_rerun(provider, tmp_path):
    """A run killed between an item's row and its result file: the rerun writes the file from the row."""
    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, questions(2))
    provider.default = replies()
    await run_experiment(spec(tmp_path), settings=settings_for(provider, url))
    lost = tmp_path / "out" / "exp1" / "q001_result.json"
    kept = json.loads(lost.read_text())
    lost.unlink()
    calls = len(provider.requests)
    rerun = await run_experiment(spec(tmp_path), settings=settings_for(provider, url))
    assert rerun.skipped == 2 and len(provider.requests) == calls
    assert json.loads(lost.read_text()) == kept


async def test_the_record_names_the_commit_it_ran_at_and_the_one_it_was_resumed_at(provider, tmp_path):
    import subprocess

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,
                              check=True, capture_output=True, text=True).stdout.strip()

    url = f"sqlite:///{tmp_path}/t.db"
    git("init", "-q")
    (tmp_path / "app.py").write_text("A = 1\n")
    git("add", "app.py")
    git("commit", "-qm", "first")
    head = git("rev-parse", "HEAD")
    add_dataset(url, tmp_path, questions(2))
    provider.default = replies(fail={"Question 1?"})
    settings = settings_for(provider, url, max_retries=0)
    first = await run_experiment(spec(tmp_path), settings=settings)
    assert first.record.git_commit == head and first.record.items_failed == 1
    (tmp_path / "app.py").write_text("A = 2\n")
    second = await run_experiment(spec(tmp_path), settings=settings)  # the failed item again
    assert second.record.git_commit == f"{head} (resumed at {head}-dirty)"
    assert any(f"resumed at git commit {head}-dirty" in n for n in second.notes)
    third = await run_experiment(spec(tmp_path), settings=settings)
    assert third.record.git_commit == second.record.git_commit
