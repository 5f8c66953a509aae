"""`jurist experiment run` killed with SIGKILL, then rerun: the rerun completes the experiment without
generating or judging again the items that were done; a killed run's lock is taken over."""

import json
import signal
import subprocess
import sys

import pytest
import yaml

from jurist.store import Store

from tests.conftest import fresh_database
from tests.experiments.runs import RUBRICS_JSON, add_dataset, questions, replies, target_requests
from tests.faults.harness import interruptible, kill, wait_for

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
ITEMS = 20


def command(url):
    return [sys.executable, "-m", "jurist", "experiment", "run", "--dataset", "qa", "--target", "fake/app",
            "--rubrics", "rubrics.json", "--judge", "fake/judge", "--name", "exp", "--parallel", "2",
            "--output-dir", "out", "--db", url]


def workspace(provider, tmp_path, *, slow: bool = False) -> None:
    """jurist.yaml (the scripted provider as ``fake``) and rubrics.json in ``tmp_path``; ``slow``: 50 ms an
    answer, 50 ms a verdict, so that a run takes a few seconds (time to stop it)."""
    if slow:
        base = replies()

        def delayed(body):
            reply = base(body)
            reply.delay = 0.05
            return reply

        provider.default = delayed
    (tmp_path / "jurist.yaml").write_text(yaml.safe_dump(
        {"providers": {"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}}}))
    (tmp_path / "rubrics.json").write_text(json.dumps(RUBRICS_JSON))


def started(url, tmp_path, out, results: int) -> subprocess.Popen:
    """The run started in a process, once it has written ``results`` result files."""
    proc = subprocess.Popen(command(url), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    assert wait_for(lambda: len(list(out.glob("*_result.json"))) >= results, 60, proc), proc.communicate()
    return proc


def rerun(url, tmp_path) -> None:
    done = subprocess.run(command(url), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_killed_with_sigkill_is_completed_by_a_rerun_without_doing_items_twice(provider, tmp_path, backend):
    workspace(provider, tmp_path, slow=True)
    with fresh_database(backend, tmp_path, "jurist_resume") as url:
        add_dataset(url, tmp_path, questions(ITEMS))
        out = tmp_path / "out"
        proc = started(url, tmp_path, out, 5)
        code, _ = kill(proc, signal.SIGKILL)
        assert code == -signal.SIGKILL
        done = {p.name.removesuffix("_result.json") for p in out.glob("*_result.json")}
        with Store(url) as store:
            assert store.experiment("exp").status == "running"  # killed: it said nothing more
            stored = {i.item_id for i in store.experiment_items("exp")}
        assert done <= stored and len(stored) < ITEMS
        asked = {r["json"]["messages"][-1]["content"] for r in target_requests(provider)}
        provider.requests.clear()
        rerun(url, tmp_path)
        with Store(url) as store:
            record = store.experiment("exp")
            items = store.experiment_items("exp")
        assert (record.status, record.items_scored, len(items)) == ("finished", ITEMS, ITEMS)
        again = [r["json"]["messages"][-1]["content"] for r in target_requests(provider)]
        assert len(again) == len(set(again))  # each item at most once in the rerun
        assert not {f"Question {int(i[1:])}?" for i in stored} & set(again)  # done items: not generated again
        # an item answered before the kill but not judged is judged now from the kept answer, not regenerated
        assert len(again) <= ITEMS - len(stored)
        assert {f"Question {i}?" for i in range(ITEMS)} == asked | set(again)
        judged_again = [r for r in provider.requests if r["json"]["model"] != "app"
                        and any(f"Question {int(i[1:])}?" in json.dumps(r["json"]["messages"]) for i in stored)]
        assert judged_again == []
        assert len(list(out.glob("*_result.json"))) == ITEMS


def test_the_command_exits_2_for_bad_input_and_1_for_a_failed_item(provider, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from jurist.cli.main import app

    url = f"sqlite:///{tmp_path}/t.db"
    workspace(provider, tmp_path)
    add_dataset(url, tmp_path, questions(3))
    common = ["--rubrics", "rubrics.json", "--judge", "fake/judge", "--db", url]

    def invoke(*args):
        return CliRunner().invoke(app, ["experiment", "run", "--dataset", "qa", *args, *common], prog_name="jurist",
                                  env={"COLUMNS": "300", "JURIST_MAX_RETRIES": "0"})

    bad = invoke("--target", "python:nope_mod:f")
    assert bad.exit_code == 2 and "no module 'nope_mod'" in bad.output, bad.output
    assert provider.requests == []
    provider.default = replies(fail={"Question 2?"})
    ran = invoke("--target", "fake/app", "--name", "e1")
    assert ran.exit_code == 1, ran.output
    assert "3 items: 2 scored, 1 failed, 0 not done" in ran.output
    assert "failed: q002: the target failed" in ran.output
    assert json.loads((tmp_path / "experiments" / "e1" / "summary.json").read_text())["items"]["failed"] == 1


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_keep_what_is_done_mark_the_run_interrupted_and_say_how_to_resume(provider, tmp_path,
                                                                                              sig, code):
    workspace(provider, tmp_path, slow=True)
    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, questions(ITEMS))
    out = tmp_path / "out"
    proc = started(url, tmp_path, out, 3)
    returncode, err = kill(proc, sig)
    assert returncode == code and "rerun to resume" in err, err
    with Store(url) as store:
        record = store.experiment("exp")
        stored = len(store.experiment_items("exp"))
    assert record.status == "interrupted" and 0 < record.items_scored == stored < ITEMS
    assert json.loads((out / "summary.json").read_text())["items"]["not_done"] == ITEMS - stored
    rerun(url, tmp_path)
    with Store(url) as store:
        assert store.experiment("exp").status == "finished"
