"""Small doors into the server: a wildcard host without a token, lone surrogates in request bodies,
and A/B tests started concurrently.

* ``--allowed-host '*'`` (any host name) without an API token let a page on any site whose name
  resolves to the server read ``/api/calls`` and write labels: refused when the server is built
  (``jurist serve`` and ``jurist proxy`` exit 2 with the fixes; ``create_app`` raises UsageError).
* A lone surrogate (``"\\ud800"``) decodes from JSON and then fails wherever the text is encoded:
  every write body holding one is a 422 that says where, before any route runs.
* Ten A/B tests of one prompt started at once gave 500s ("database is locked") and left several
  tests of the prompt running: route changes are made one at a time (SQLite and PostgreSQL).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from jurist.config import Settings
from jurist.errors import UsageError
from jurist.judges.templates import builtin
from jurist.models import script
from jurist.server import create_app
from tests.conftest import fresh_database
from tests.faults.test_exposure import COMMANDS, _command, _on_a_free_port, uvicorn_runs  # noqa: F401  (a fixture)
from tests.server.live import running

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
TOKEN = "d00r-t0ken"
RUBRICS = {"scale": [1, 5], "rubrics": [{"id": "helpful", "name": "Helpful", "scoring_criteria": "5 = very"}]}
JSON = {"Content-Type": "application/json"}


# -- a wildcard host needs a token ----------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_any_host_without_a_token_is_refused_at_start_up(command, uvicorn_runs, monkeypatch):
    runner = CliRunner()
    r = runner.invoke(_command(command[0]), [*_on_a_free_port(command), "--allowed-host", "*"],
                      env={"COLUMNS": "300"})
    assert r.exit_code == 2 and uvicorn_runs == [], r.output
    assert "without an API token" in r.output and "--allowed-host" in r.output and "JURIST_API_TOKEN" in r.output
    monkeypatch.setenv("JURIST_ALLOWED_HOSTS", "*")  # the same from the environment (or jurist.yaml)
    r = runner.invoke(_command(command[0]), _on_a_free_port(command), env={"COLUMNS": "300"})
    assert r.exit_code == 2 and uvicorn_runs == [] and "without an API token" in r.output, r.output
    monkeypatch.setenv("JURIST_API_TOKEN", TOKEN)  # with a token: a reverse proxy in front checks the names
    r = runner.invoke(_command(command[0]), [*_on_a_free_port(command), "--allowed-host", "*"])
    assert r.exit_code == 0 and len(uvicorn_runs) == 1, r.output


def test_create_app_refuses_any_host_without_a_token(tmp_path):
    with pytest.raises(UsageError, match="without an API token"):
        create_app(Settings(home=str(tmp_path / ".jurist"), allowed_hosts=["*"]))
    app = create_app(Settings(home=str(tmp_path / ".jurist"), allowed_hosts=["*"], api_token=TOKEN))
    evil = {"Host": "evil.example", "Origin": "http://evil.example"}
    with TestClient(app, base_url="http://evil.example") as c:
        label = {"item": "s1", "rubric": "helpful", "score": 3, "annotator": "evil"}
        assert c.post("/api/evaluation/labels", json=label, headers=evil).status_code == 401
        assert c.get("/api/evaluation/labels").json() == []


# -- lone surrogates ------------------------------------------------------------------------------


@pytest.fixture
def client(tmp_path):
    with TestClient(create_app(Settings(home=str(tmp_path / ".jurist"))), base_url="http://localhost",
                    raise_server_exceptions=False) as c:
        yield c


def _session(content: str) -> str:
    """A posted evaluation whose user turn's content is the JSON string literal ``content``."""
    return ('{"rubrics": %s, "session": [{"role": "user", "content": %s}, '
            '{"role": "assistant", "content": "Fine."}], "judge": "scripted/doors"}' % (json.dumps(RUBRICS), content))


def test_a_lone_surrogate_in_a_body_is_a_422_that_says_where(client):
    text = json.dumps(builtin("rubric_judge").text)[1:-1]
    label = '{"item": "s1", "rubric": "helpful", "passed": true, %s}'
    cases = [
        ("POST", "/api/evaluate", _session('"a\\ud800b"'),
         "session.0.content: a lone surrogate (\\ud800) at character 2"),
        ("POST", "/api/evaluate", _session('"\\\\\\udfff"'),
         "session.0.content: a lone surrogate (\\udfff) at character 2"),
        ("PUT", "/api/prompts/rubric_judge", '{"text": "%s \\uDBFF"}' % text, "text: a lone surrogate (\\udbff)"),
        ("PUT", "/api/prompts/rubric_judge", '{"text": "%s", "note": "\\ud83d"}' % text, "note: a lone surrogate"),
        ("POST", "/api/evaluation/labels", label % '"annotator": "\\udc00"', "annotator: a lone surrogate"),
        ("POST", "/api/evaluation/labels", label % '"annotator": "a", "\\ud800": 1',
         "a field's name: a lone surrogate"),
    ]
    for method, path, body, words in cases:
        r = client.request(method, path, content=body.encode(), headers=JSON)
        assert r.status_code == 422 and r.headers["content-type"] == "application/json", (body, r.text)
        assert words in r.json()["detail"] and "both halves" in r.json()["detail"], (body, r.text)
    # a whole pair, or an escaped backslash before "ud800", is text: past the door, to the route
    paired = client.put("/api/prompts/rubric_judge", content=('{"text": "%s \\ud83d\\ude00"}' % text).encode(),
                        headers=JSON)
    assert paired.status_code == 201 and paired.json()["text"].endswith("\U0001F600"), paired.text
    escaped = client.put("/api/prompts/rubric_judge", content=('{"text": "%s \\\\ud800"}' % text).encode(),
                         headers=JSON)
    assert escaped.status_code == 201 and escaped.json()["text"].endswith("\\ud800"), escaped.text


def test_a_tool_name_that_is_an_object_is_refused_with_where(client):
    """A function name {"a": 1} in a tool call was judged as if it were text (or a 500 where it was read)."""
    script("doors", default=json.dumps({"score": 4, "reasoning": "fine"}))
    call = {"id": "c1", "type": "function", "function": {"name": {"a": 1}, "arguments": "{}"}}
    turns = [{"role": "user", "content": "What is the weather?"},
             {"role": "assistant", "content": "", "tool_calls": [call]},
             {"role": "tool", "tool_call_id": "c1", "content": "sunny"}, {"role": "assistant", "content": "Sunny."}]
    named = [turns[0], {"role": "tool", "tool_call_id": "c1", "name": {"a": 1}, "content": "sunny"}, turns[3]]
    for session, where in ((turns, "session:2: tool_calls[0].function.name"), (named, "session:2: name")):
        r = client.post("/api/evaluate", json={"rubrics": RUBRICS, "judge": "scripted/doors", "session": session})
        assert r.status_code == 422 and r.headers["content-type"] == "application/json", r.text
        assert where in r.json()["detail"], r.text


# -- concurrent A/B test starts -------------------------------------------------------------------

ROUNDS, STARTS = 6, 10  # rounds of ten starts at once (each round used to fail more often than not)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ten_ab_tests_started_at_once_end_with_one_running(backend, tmp_path: Path):
    with fresh_database(backend, tmp_path, "jurist_ab_doors") as url:
        app = create_app(Settings(database_url=url, home=str(tmp_path / ".jurist")))
        with running(app) as base:
            text = builtin("gate_quality").text
            for n in range(STARTS):
                r = httpx.put(f"{base}/api/prompts/gate_quality", json={"text": f"{text}\nversion {n + 2}\n"})
                assert r.status_code == 201, r.text
            for round_ in range(ROUNDS):
                gate = threading.Barrier(STARTS)

                def start(b: int) -> httpx.Response:
                    gate.wait()
                    return httpx.post(f"{base}/api/prompt-tests", timeout=60,
                                      json={"prompt": "gate_quality", "a": 1, "b": b, "calls": 10})

                with ThreadPoolExecutor(STARTS) as pool:
                    answers = list(pool.map(start, range(2, STARTS + 2)))
                assert [r.status_code for r in answers] == [201] * STARTS, [r.text for r in answers if
                                                                            r.status_code != 201]
                tests = httpx.get(f"{base}/api/prompt-tests", params={"prompt": "gate_quality"}).json()
                assert len(tests) == STARTS * (round_ + 1)
                running_now = [t["id"] for t in tests if t["running"]]
                assert len(running_now) == 1, f"round {round_}: {len(running_now)} tests of one prompt running"
                active = httpx.get(f"{base}/api/prompts/gate_quality/active").json()
                assert active["route"] == "test" and active["test_id"] == running_now[0]
                replaced = {t["ended_because"] for t in tests if not t["running"]}
                assert all(reason and reason.startswith("replaced by test ") for reason in replaced)
