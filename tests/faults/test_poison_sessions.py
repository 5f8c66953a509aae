"""Poison inputs: a session file that once stopped a whole batch with a traceback (a lone surrogate,
a tool name that is an object, content nested 100,000 deep) is that session's failure, listed in
``summary.json`` with its file and reason, and the batch goes on; a rubrics file nested 100,000
deep or a template that is not UTF-8 is exit 2 naming the file.

Runs the real ``jurist evaluate-batch`` against a ``ProviderServer`` on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import os
import threading

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.errors import InputError
from jurist.jsonfiles import MAX_JSON_DEPTH, parse_json
from jurist.rubrics.models import load_rubrics
from jurist.rubrics.sessions import load_session
from jurist.server import create_app
from jurist.testing import Reply

from tests.faults.harness import RUBRICS, Workspace

GOOD = 6
DEEP = 100_000
USER = json.dumps({"role": "user", "content": "Why is the sky blue?"})

# file name -> (its text, words its reason holds)
POISON = {
    "surrogate.jsonl": (USER + '\n{"role": "assistant", "content": "a\\ud800b"}\n', ":2: a lone surrogate"),
    "low_surrogate.jsonl": ('{"role": "user", "content": "x \\udc00 y"}\n', ":1: a lone surrogate"),
    "tool_name.jsonl": (USER + '\n{"role": "tool", "content": "42", "name": {"a": 1}}\n', ":2: name:"),
    "call_name.jsonl": (USER + '\n{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", '
                        '"function": {"name": {"a": 1}, "arguments": "{}"}}]}\n',
                        ":2: tool_calls[0].function.name must be text"),
    "deep.jsonl": (USER + '\n{"role": "assistant", "content": ' + "[" * DEEP + "]" * DEEP + "}\n",
                   f":2: nested more than {MAX_JSON_DEPTH} arrays or objects deep"),
    "deep_metadata.jsonl": (USER + '\n{"role": "assistant", "content": "ok", "metadata": '
                            + '{"a": ' * 500 + "1" + "}" * 500 + "}\n",
                            f":2: nested more than {MAX_JSON_DEPTH} arrays or objects deep"),
}


@pytest.fixture
def workspace(provider, tmp_path):
    provider.default = Reply(text='{"score": 4, "reasoning": "clear"}')
    ws = Workspace(tmp_path, f"sqlite:///{tmp_path}/j.db", provider.base_url, sessions=GOOD, parallel=3)
    return ws


def _summary(ws: Workspace) -> dict:
    return json.loads((ws.out / "summary.json").read_text(encoding="utf-8"))


def test_poison_sessions_are_their_own_failures_and_the_batch_goes_on(workspace):
    ws = workspace
    for name, (text, _) in POISON.items():
        (ws.sessions_dir / name).write_text(text, encoding="utf-8")
    for run in range(2):  # a rerun goes past the same files again
        done = ws.run(timeout=120)
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]  # input errors: exit 2
        summary = _summary(ws)
        errors = summary["failures"]["input_errors"]
        assert len(errors) == len(POISON), errors
        for name, (_, words) in POISON.items():
            listed = [e for e in errors if f"/{name}:" in e]
            assert len(listed) == 1 and words in listed[0], (name, errors)
        assert summary["batch_summary"]["total_sessions"] == GOOD
        assert len(list(ws.out.glob("*_result.json"))) == GOOD
        if run:
            assert f"{GOOD} already done" in done.stdout


def test_the_reason_names_the_line_of_a_whole_json_file(tmp_path):
    rubrics = tmp_path / "rubrics.json"
    rubrics.write_text('{"version": "1.0",\n "rubrics": [\n  {"id": "c", "name": "C\\ud83d",'
                       ' "scoring_criteria": "1-5"}]}', encoding="utf-8")
    with pytest.raises(InputError, match=r"rubrics.json:3: a lone surrogate \(\\ud83d\)"):
        load_rubrics(rubrics)
    rubrics.write_text('{"rubrics": [{"id": "c", "name": "C\\ud83d\\ude00", "scoring_criteria": "1-5"}]}')
    assert load_rubrics(rubrics).rubrics[0].name == "C\U0001f600"  # a pair is one character
    assert parse_json('"\\\\ud800"', "x") == "\\ud800"  # an escaped backslash, no surrogate
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert parse_json(nested, "x") == json.loads(nested)  # the bound itself is taken
    with pytest.raises(InputError, match="nested more than"):
        parse_json("[" + nested + "]", "x")


def test_a_session_read_directly_refuses_a_lone_surrogate(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(POISON["surrogate.jsonl"][0], encoding="utf-8")
    with pytest.raises(InputError, match=r"s.jsonl:2: a lone surrogate \(\\ud800\)"):
        load_session(path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_in_place_of_a_session_file_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "s.jsonl")
    out: list[BaseException] = []

    def read() -> None:
        try:
            load_session(tmp_path / "s.jsonl")
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out.append(exc)

    reader = threading.Thread(target=read, daemon=True)  # a hung open cannot keep the test run alive
    reader.start()
    reader.join(1.0)
    assert out, "opening a FIFO in place of a session waited for a writer"
    assert isinstance(out[0], InputError) and "s.jsonl: not a regular file" in str(out[0]), out


@pytest.mark.parametrize("which", ["rubrics", "template"])
def test_a_deep_rubrics_file_or_a_template_not_utf8_is_exit_2_naming_the_file(workspace, which):
    ws = workspace
    extra: list[str] = []
    if which == "rubrics":
        bad = ws.rubrics
        bad.write_text('{"version": "1.0", "rubrics": ' + "[" * DEEP + "]" * DEEP + "}", encoding="utf-8")
    else:
        bad = ws.root / "judge.txt"
        bad.write_bytes("Rate {chat_session} for {rubric_name}: caf\u00e9".encode("latin-1"))
        extra = ["--template", str(bad)]
    done = ws.run(*extra, timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    said = " ".join((done.stdout + done.stderr).split())
    assert bad.name in said and ("nested more than" in said or "not UTF-8" in said), said[-2000:]


def _app(tmp_path, provider):
    settings = Settings.load(home=str(tmp_path / ".jurist"), judge="fake/judge-1",
                             providers={"fake": {"type": "openai", "base_url": provider.base_url, "api_key": "k"}})
    return TestClient(create_app(settings), base_url="http://localhost", raise_server_exceptions=False)


@pytest.mark.parametrize("session, words", [
    ('[{"role": "user", "content": "a\\ud800b"}]', "a lone surrogate"),
    ('[{"role": "user", "content": "hi"}, {"role": "tool", "content": "x", "name": {"a": 1}}]', "name:"),
    ('[{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "1", "type": "function", '
     '"function": {"name": {"a": 1}, "arguments": "{}"}}]}]', "function.name must be text"),
])
def test_a_posted_poison_session_is_refused_not_a_500(tmp_path, provider, session, words):
    body = '{"rubrics": %s, "session": %s}' % (json.dumps(RUBRICS), session)
    with _app(tmp_path, provider) as c:
        r = c.post("/api/evaluate", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text[:500]
    assert words in r.json()["detail"], r.text[:500]
    assert provider.requests == []


@pytest.mark.parametrize("content, said", [
    ([1], "content part 1 must be text or an object (a text or image part), got int"),
    (["ok", None], "content part 2 must be text or an object"),
    ([{"type": "text", "text": 5}], 'content part 1: "text" must be text, got int'),
])
def test_a_content_part_that_is_not_a_part_is_an_error_not_dropped(content, said):
    """"content": [1] was dropped from the transcript without a word."""
    from jurist.errors import InputError
    from jurist.rubrics.sessions import parse_session

    with pytest.raises(InputError, match=re.escape(said)):
        parse_session([json.dumps({"role": "user", "content": content})], "s.jsonl", "s")
