"""Rubrics with a check: decided without a model, strict when loaded, bounded when run."""

import json
import sys
import time

import pytest

from jurist.errors import InputError
from jurist.rubrics import evaluate
from jurist.rubrics.models import load_rubrics, parse_rubrics
from jurist.rubrics.sessions import ChatSession, Message
from tests.cli.test_cli import S1, env_for
from tests.conftest import run_cli


def rubrics(*checks, scale=(1, 5)):
    return parse_rubrics({"scale": list(scale), "rubrics": [
        {"id": f"c{n}", "name": f"Check {n}", "check": c} for n, c in enumerate(checks)]}, "checks.json",
        python_checks=True)


def session(answer, question="What is the capital of France?", expected=()):
    return ChatSession("s", [Message("user", question), Message("assistant", answer)], expected=tuple(expected))


async def scores(rubric_set, chat):
    result = await evaluate(rubric_set, chat, judge="local/minilm")
    return result, [(r["score"], r["status"], r["reasoning"]) for r in result["rubric_scores"]]


def load_problem(tmp_path, check, **extra):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"rubrics": [{"id": "fmt", "name": "Format", "check": check, **extra}]}, indent=2))
    with pytest.raises(InputError) as caught:
        load_rubrics(path)
    assert str(path) in str(caught.value)
    return str(caught.value)


async def test_text_checks_score_the_scale_ends_with_the_reason_and_no_model():
    rs = rubrics({"equals": "Paris"}, {"contains": ["capital", "Paris"]}, {"not_contains": ["As an AI", "sorry"]},
                 {"equals": "paris", "case_sensitive": False}, {"contains": "PARIS"})
    result, got = await scores(rs, session("  Paris  "))
    assert [s[:2] for s in got] == [(5.0, "scored"), (1.0, "scored"), (5.0, "scored"), (5.0, "scored"), (1.0, "scored")]
    assert got[0][2] == 'passed: the answer equals "Paris"'
    assert got[1][2] == 'failed: the answer does not contain "capital"'
    assert all(r["judge_model"] == "check" and r["tokens"] == {"input": 0, "output": 0}
               for r in result["rubric_scores"])
    assert result["summary"]["rubrics_evaluated"] == 5

    _, got = await scores(rs, session("Well, sorry: as an AI I think it is Paris, the capital."))
    assert [s[0] for s in got] == [1.0, 5.0, 1.0, 1.0, 1.0]
    assert got[2][2] == 'failed: the answer contains "sorry"'  # case sensitive: "As an AI" is not there


async def test_regex_and_json_schema_checks():
    schema = {"type": "object", "required": ["city", "population"], "additionalProperties": False,
              "properties": {"city": {"type": "string", "minLength": 1},
                             "population": {"type": "integer", "minimum": 0}}}
    rs = rubrics({"regex": r"^\d{4}-\d{2}-\d{2}$"}, {"json_schema": schema})
    _, got = await scores(rs, session('{"city": "Paris", "population": 2102650}'))
    assert got[0][:2] == (1.0, "scored") and "does not match" in got[0][2]
    assert got[1] == (5.0, "scored", "passed: the answer is JSON that validates against the schema")

    _, got = await scores(rs, session("2024-05-01"))
    assert got[0][0] == 5.0
    assert got[1] == (1.0, "scored", "failed: the answer is not JSON: Extra data (line 1, column 5)")
    _, got = await scores(rs, session(" 42\n"))
    assert got[1] == (1.0, "scored", "failed: the answer's JSON does not validate: $: expected object, got number")
    _, got = await scores(rs, session('{"city": "Paris", "population": -3, "mayor": "x"}'))
    assert got[1][2] == "failed: the answer's JSON does not validate: $.population: must be at least 0, got -3"
    _, got = await scores(rs, session("Here it is: {\"city\": \"Paris\"}"))
    assert got[1][0] == 1.0 and got[1][2].startswith("failed: the answer is not JSON: Expecting value")


async def test_a_catastrophic_regex_is_stopped_and_the_next_match_still_runs():
    rs = rubrics({"regex": r"^(a+)+$"}, {"regex": "a{3}"})
    started = time.monotonic()
    _, got = await scores(rs, session("a" * 40 + "!"))
    assert time.monotonic() - started < 10
    assert got[0] == (None, "evaluation_failed", "the regex took longer than 1 s (it was stopped)")
    assert got[1][:2] == (5.0, "scored")  # the worker was started again


def write_module(tmp_path, name, body):
    (tmp_path / f"{name}.py").write_text(body)
    sys.modules.pop(name, None)


async def test_python_checks_get_the_answer_the_input_and_the_expected_answers(tmp_path):
    write_module(tmp_path, "my_checks", """
import asyncio

def echo(answer, question, expected):
    return answer.endswith("."), f"answer={answer!r} input={question!r} expected={expected!r}"

def score(answer, question, expected):
    return 3.5

async def slow_ok(answer, question, expected):
    await asyncio.sleep(0)
    return True

def boom(answer, question, expected):
    raise ValueError("the answer broke me")

def vague(answer, question, expected):
    return "yes"

def too_high(answer, question, expected):
    return 9
""")
    rs = rubrics(*({"python": f"my_checks:{f}"} for f in ("echo", "score", "slow_ok", "boom", "vague", "too_high")))
    _, got = await scores(rs, session("Paris.", expected=["Paris", "paris"]))
    assert got[0] == (5.0, "scored", "passed: answer='Paris.' input='What is the capital of France?' "
                                     "expected=('Paris', 'paris')")
    assert got[1] == (3.5, "scored", "my_checks:score scored 3.5")
    assert got[2][:2] == (5.0, "scored")
    assert got[3] == (None, "evaluation_failed", "my_checks:boom raised ValueError: the answer broke me")
    assert got[4][:2] == (None, "evaluation_failed") and got[4][2].startswith("my_checks:vague returned str")
    assert got[5] == (None, "evaluation_failed", "my_checks:too_high returned the score 9, outside the scale 1..5")


async def test_expected_in_a_text_check_needs_an_expected_answer():
    rs = rubrics({"contains": "{expected}", "case_sensitive": False}, {"equals": "{expected}"})
    _, got = await scores(rs, session("It is Paris.", expected=["Lyon", "paris"]))
    assert got[0] == (5.0, "scored", 'passed: the answer contains "paris"')
    assert got[1][:2] == (1.0, "scored")
    _, got = await scores(rs, session("It is Paris."))
    assert got == [(None, "evaluation_failed", "no expected answer")] * 2


@pytest.mark.parametrize(("check", "extra", "problem"), [
    ({"contians": "x"}, {}, "check: unknown check kind 'contians' (did you mean 'contains'?)"),
    ({"equals": "a", "contains": "b"}, {}, "check: one kind per check, not equals and contains"),
    ({"regex": "(unclosed"}, {}, "check: regex: not a valid pattern: missing ), unterminated subpattern"),
    ({"regex": "a" * 1001}, {}, "check: regex: the pattern has 1,001 characters; at most 1,000"),
    ({"json_schema": {"type": "string", "pattern": "^a"}}, {}, "check: json_schema: unknown schema keyword 'pattern'"),
    ({"json_schema": {"properties": {"n": {"type": "int"}}}}, {}, "properties.n.type: a type is one of"),
    ({"python": "no_such_module_here:f"}, {}, "check: python: cannot import 'no_such_module_here'"),
    ({"python": "json:no_such_function"}, {}, "check: python: module 'json' has no 'no_such_function'"),
    ({"python": "not a target"}, {}, 'check: python: give "module:function"'),
    ({"contains": ""}, {}, "check: contains: an empty text is in every answer"),
    ({"json_schema": {}, "case_sensitive": False}, {}, "case_sensitive applies to equals"),
    ({"contains": "x"}, {"scoring_criteria": "1-5"}, "a rubric with a check has no scoring_criteria or items"),
    ({"contains": "x"}, {"require_calibration": {"min_kappa": 0.6}}, "a check needs no model"),
])
def test_a_bad_check_is_refused_when_the_file_is_loaded(tmp_path, check, extra, problem):
    message = load_problem(tmp_path, check, **extra)
    assert "rubric 'fmt'" in message and problem in message, message


def test_a_check_that_cannot_be_imported_exits_2_before_any_call(provider, tmp_path):
    path = tmp_path / "checks.json"
    path.write_text(json.dumps({"rubrics": [
        {"id": "mine", "name": "Mine", "check": {"python": "missing_checks:is_polite"}}]}))
    r = run_cli("evaluate", "--rubrics", str(path), "--session", S1, env=env_for(provider, tmp_path), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "cannot import 'missing_checks'" in r.stderr.replace("\n", "") and str(path) in r.stderr.replace("\n", "")
    assert provider.requests == []


async def test_checks_make_no_model_call(provider):
    from tests.rubrics.test_against_server import settings_for

    rs = rubrics({"contains": "Paris"}, {"regex": "^Paris"}, {"json_schema": {"type": "string"}})
    result = await evaluate(rs, session("Paris"), judge="fake/judge-1", settings=settings_for(provider))
    assert [r["score"] for r in result["rubric_scores"]] == [5.0, 5.0, 1.0]
    assert provider.requests == []


def test_a_python_check_sent_over_http_is_refused_before_anything_is_imported(tmp_path, provider):
    from fastapi.testclient import TestClient

    from jurist.config import Settings
    from jurist.server import create_app

    write_module(tmp_path, "side_effect_checks", "open('imported.txt', 'w').close()\ndef f(a, i, e):\n    return True\n")
    settings = Settings.load(home=str(tmp_path / ".jurist"), judge="fake/judge-1",
                             providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}})
    body = {"rubrics": [{"id": "mine", "name": "Mine", "check": {"python": "side_effect_checks:f"}}],
            "session": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        r = client.post("/api/evaluate", json=body)
    assert r.status_code == 422
    assert "a python check runs code on this machine" in r.text
    assert not (tmp_path / "imported.txt").exists() and provider.requests == []
    with pytest.raises(InputError, match="a python check runs code"):
        parse_rubrics(body["rubrics"], "request body: rubrics")
    assert parse_rubrics(body["rubrics"], "mine.py", python_checks=True).rubrics[0].compiled_check.kind == "python"


def test_a_set_level_calibration_bar_does_not_apply_to_checks():
    rs = parse_rubrics({"require_calibration": {"min_kappa": 0.5}, "rubrics": [
        {"id": "c", "name": "C", "check": {"contains": "x"}},
        {"id": "j", "name": "J", "scoring_criteria": "1-5"}]}, "x.json")
    assert rs.requirement_for(rs.rubrics[0]) is None and rs.requirement_for(rs.rubrics[1]) is not None
