"""Function targets (python:module:function): sync, async, messages, failures; imported before any call."""

import json
import textwrap
import uuid

import pytest

from jurist.errors import InputError
from jurist.experiments.run import ExperimentSpec, run_experiment
from jurist.store import Store

from tests.experiments.runs import RUBRICS, add_dataset, judge_requests, questions, replies, settings_for

APP = '''
import asyncio

def sync_answer(given):
    return "sync: " + given

async def async_answer(given):
    await asyncio.sleep(0)
    return "async: " + given

def with_tools(given):
    return [{"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "looked up"},
            {"role": "assistant", "content": "final: " + given}]

def flaky(given):
    if given == "Question 1?":
        raise ValueError("no answer for that one")
    return "ok"

def wrong_type(given):
    return 42

class Bot:
    @staticmethod
    def reply(given):
        return "bot: " + given

NOT_A_FUNCTION = 3
'''


@pytest.fixture
def app_module(tmp_path):
    name = f"app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(APP))
    return name


def run(provider, tmp_path, target, n=3):
    url = f"sqlite:///{tmp_path}/t.db"
    add_dataset(url, tmp_path, questions(n))
    provider.default = replies()
    spec = ExperimentSpec(name="fn", dataset="qa", target=target, rubrics=RUBRICS, judge="fake/judge",
                          output_dir=tmp_path / "out")
    import asyncio

    report = asyncio.run(run_experiment(spec, settings=settings_for(provider, url, timeout=5)))
    with Store(url) as store:
        items = {i.item_id: i for i in store.experiment_items("fn")}
        calls = store.calls(purpose="generation", limit=None)
    return report, items, calls


@pytest.mark.parametrize("function, prefix", [("sync_answer", "sync: "), ("async_answer", "async: "),
                                              ("Bot.reply", "bot: ")])
def test_a_function_answers_each_item_and_its_calls_are_recorded(provider, tmp_path, app_module, function, prefix):
    report, items, calls = run(provider, tmp_path, f"python:{app_module}:{function}")
    assert report.record.items_scored == 3
    assert items["q001"].answer == prefix + "Question 1?"
    assert len(calls) == 3 and {c["model"] for c in calls} == {f"python:{app_module}:{function}"}


def test_messages_returned_are_judged_as_the_turn_and_the_last_is_the_answer(provider, tmp_path, app_module):
    report, items, _ = run(provider, tmp_path, f"python:{app_module}:with_tools", n=1)
    assert items["q000"].answer == "final: Question 0?" and report.record.items_scored == 1
    judged = json.dumps(judge_requests(provider)[0]["json"]["messages"])
    assert "[tool call lookup: {}]" in judged and "looked up" in judged


@pytest.mark.parametrize("function, error", [
    ("flaky", "the target failed: RequestRejected: python:{m}:flaky raised ValueError: no answer for that one"),
    ("wrong_type", "returned int; a target returns the answer text"),
])
def test_a_function_that_raises_or_returns_garbage_fails_its_item(provider, tmp_path, app_module, function, error):
    report, items, calls = run(provider, tmp_path, f"python:{app_module}:{function}")
    assert items["q001"].status == "failed" and error.format(m=app_module) in items["q001"].error
    assert report.exit_code == 1
    assert any(c["status"] == "error" for c in calls)  # the failed call is on record too


@pytest.mark.parametrize("target, says", [
    ("python:{m}:missing", "has no 'missing'"),
    ("python:{m}:NOT_A_FUNCTION", "is a int, not a function"),
    ("python:{m}", "write python:module:function"),
    ("python:nowhere_{m}:f", "no module 'nowhere_"),
])
def test_a_target_that_cannot_be_imported_stops_before_any_call(provider, tmp_path, app_module, target, says):
    with pytest.raises(InputError, match=says):
        run(provider, tmp_path, target.format(m=app_module))
    assert provider.requests == []


def test_a_module_that_fails_to_import_says_why(provider, tmp_path):
    (tmp_path / "broken_app.py").write_text("raise RuntimeError('config missing')\n")
    with pytest.raises(InputError, match="importing broken_app failed: RuntimeError: config missing"):
        run(provider, tmp_path, "python:broken_app:answer")
