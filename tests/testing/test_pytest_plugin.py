"""jurist's pytest plugin, run by pytester against the scripted OpenAI-compatible server and the
offline judge: assertions, cached verdicts, the summary table, JUnit properties, xdist, calibration.

Each inner run is a process of its own (an inner run in this process would forget the modules it
imported first, which SQLAlchemy does not survive), without the slow-to-import plugins of this
environment that the tests do not need."""

import json
import xml.etree.ElementTree as ET

import pytest

from jurist.testing import Reply

pytest_plugins = ["pytester"]

HELPFUL_TESTS = '''
from jurist import assert_judged

HELPFUL = {"id": "helpful", "name": "Helpful",
           "scoring_criteria": "5: answers the question directly; 1: does not answer it"}

def test_answers():
    assert_judged("Paris is the capital of France.", rubric=HELPFUL, input="What is the capital of France?",
                  min_score=4)

def test_dodges():
    assert_judged("No idea, sorry.", rubric=HELPFUL, input="What is the capital of France?", min_score=4)
'''


def grade(body):
    """The judge's verdict, from what it was asked: a dodge scores 2, anything else 5."""
    if "No idea" in json.dumps(body["messages"]):
        return Reply(text='{"score": 2, "reasoning": "It does not answer the question."}')
    return Reply(text='{"score": 5, "reasoning": "Correct and direct."}')


UNNEEDED = ("-p", "no:hypothesispytest", "-p", "no:langsmith_plugin", "-p", "no:schemathesis")


def run(pytester, *args):
    """pytest in a process of its own, in the pytester folder."""
    return pytester.runpytest_subprocess(*UNNEEDED, *args)


@pytest.fixture
def judged(provider, monkeypatch):
    """The scripted server as the judge of the inner pytest runs."""
    provider.default = grade
    monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return provider


def properties(path):
    """JUnit properties by test name."""
    root = ET.parse(path).getroot()
    return {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
            for case in root.iter("testcase")}


def test_assert_judged_fails_with_the_reasoning_reports_a_table_and_caches_verdicts(pytester, judged):
    pytester.makepyfile(test_app=HELPFUL_TESTS)
    first = run(pytester, "--jurist-judge", "openai/gpt-4o-mini", "--junitxml=out.xml")
    first.assert_outcomes(passed=1, failed=1)
    out = first.stdout.str()
    assert "judged 2/5, min_score 4 (judge openai/gpt-4o-mini)" in out
    assert "- helpful: 2/5: It does not answer the question." in out
    first.stdout.fnmatch_lines([
        "*= jurist: 2 judged assertion(s) =*",
        "test*rubrics*judge*score*min*result*cached",
        "test_app.py::test_answers*inline:helpful*openai/gpt-4o-mini*5*4*passed*0/1",
        "test_app.py::test_dodges*inline:helpful*openai/gpt-4o-mini*2*4*FAILED*0/1",
        "note: judge calls are recorded and cached in *.pytest_cache*jurist*store.db",
    ])
    props = properties(pytester.path / "out.xml")
    assert props["test_answers"]["jurist.1.score"] == "5.0" and props["test_answers"]["jurist.1.passed"] == "True"
    assert props["test_dodges"]["jurist.1.rubric.helpful"] == "2.0"
    assert json.loads(props["test_dodges"]["jurist.1"])["min_score"] == 4
    assert len(judged.requests) == 2

    again = run(pytester, "--jurist-judge", "openai/gpt-4o-mini")
    again.assert_outcomes(passed=1, failed=1)
    assert len(judged.requests) == 2  # the same answers: every verdict from the cache, no model call
    again.stdout.fnmatch_lines(["test_app.py::test_answers*passed*1/1", "test_app.py::test_dodges*FAILED*1/1"])


def test_the_offline_judge_is_the_default_and_says_when_it_cannot_compare(pytester):
    pytester.makepyfile(test_offline='''
EXPECTED = "Caffeine blocks adenosine receptors in the brain, so you do not feel sleepy."

def test_agrees(judge):
    result = judge("Caffeine blocks the brain's adenosine receptors, so you don't feel sleepy.",
                   "correctness.json", input="Why does coffee keep me awake?", expected=EXPECTED)
    assert result.rubric_scores[0].judge_model == "local/minilm" and judge.ref == "local/minilm"

def test_too_short(judge):
    judge("Paris.", "correctness.json", input="Capital of France?", expected="Paris")
''')
    result = run(pytester, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*1 rubric(s) could not be evaluated*",
        "*- correctness: evaluation_failed: Unsupported: the expected answer 'Paris' is too short to compare*",
        "test_offline.py::test_agrees*correctness.json*local/minilm*5*3.5*passed*",
        "note: verdicts are not kept between runs: pytest's cache is off*",
    ])


def test_require_calibration_fails_the_assertion_before_any_call(pytester, judged):
    pytester.makepyfile(test_gate='''
from jurist import assert_judged

def test_gated():
    assert_judged("Paris.", rubric={"id": "helpful", "name": "Helpful", "scoring_criteria": "1-5"},
                  input="Capital of France?", min_score=4, require_calibration=0.6)
''')
    result = run(pytester, "--jurist-judge", "openai/gpt-4o-mini")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the judge is not calibrated well enough on these rubrics*", "*jurist calibrate*"])
    assert judged.requests == []


def test_xdist_workers_share_the_bounds_and_report_to_one_table(pytester, judged):
    pytest.importorskip("xdist")
    judged.default = lambda body: Reply(text='{"score": 4, "reasoning": "fine"}', delay=0.3)
    pytester.makefile(".yaml", jurist="max_concurrency: 2\n")
    pytester.makepyfile(test_many='''
import pytest
from jurist import assert_judged

RUBRICS = [{"id": f"r{n}", "name": f"R{n}", "scoring_criteria": "1-5"} for n in range(3)]

@pytest.mark.parametrize("n", range(4))
def test_answer(n):
    assert_judged(f"Answer {n}.", rubric=RUBRICS, input=f"Question {n}?", min_score=4)
''')
    result = run(pytester, "-n", "2", "-p", "no:cacheprovider", "--jurist-judge",
                                           "openai/gpt-4o-mini")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*= jurist: 4 judged assertion(s) =*",
                                 "note: 2 workers each hold 1/2 of every endpoint's bounds*"])
    assert len(judged.requests) == 12
    assert judged.peak_in_flight <= 2  # max_concurrency 2 over both workers, not 2 each
