"""Terminal escapes: what a judge, a file or a user wrote is printed by the CLI, never acted on.

A judge's reasoning holding ``ESC]0;...BEL`` (set the window title), ``ESC[2J`` (clear the screen), an
OSC 8 link or an 8-bit CSI reaches the terminal as its visible text only, in ``jurist evaluate``'s
table, in its JSON, on a colour terminal, in a batch's output and in an error message. The CLI runs
as a user runs it, against a judge on 127.0.0.1.
"""

import json
import subprocess
import sys

import pytest

from jurist.testing import Reply

from tests.faults.harness import RUBRICS, jurist_env

TITLE, CLEAR, BLINK = "\x1b]0;owned\x07", "\x1b[2J", "\x1b[5;35m"
LINK = "\x1b]8;;https://evil.example/\x1b\\click here\x1b]8;;\x1b\\"
REASONING = f"Fine {TITLE}answer {CLEAR}with {LINK} and {BLINK}more\x9b2J\x07 end\x7f."
# What a terminal acts on: ESC, BEL, the 8-bit CSI / OSC / ST, DEL, a carriage return.
ACTED_ON = ("\x1b]", "\x1b[2J", "\x1b[5;35m", "\x1b\\", "\x07", "\x9b", "\x9d", "\x9c", "\x7f", "\r")


@pytest.fixture
def workspace(provider, tmp_path):
    provider.default = Reply(text=json.dumps({"score": 3, "reasoning": REASONING}))
    (tmp_path / "rubrics.json").write_text(json.dumps(RUBRICS))
    (tmp_path / "s1.jsonl").write_text(json.dumps({"role": "user", "content": "hi"}) + "\n"
                                       + json.dumps({"role": "assistant", "content": "hello"}) + "\n")
    env = jurist_env(tmp_path / "home", OPENAI_BASE_URL=provider.base_url, OPENAI_API_KEY="test",
                     JURIST_JUDGE="openai/gpt-test", JURIST_DATABASE_URL=f"sqlite:///{tmp_path}/j.db")
    return tmp_path, env


def jurist(env, *args, **extra_env):
    return subprocess.run([sys.executable, "-m", "jurist", *args], env={**env, **extra_env}, capture_output=True,
                          text=True, timeout=120)


def assert_inert(out: str) -> None:
    found = [seq for seq in ACTED_ON if seq in out]
    assert not found, f"printed raw: {found!r} in {out!r}"


@pytest.mark.parametrize("colour", [{}, {"FORCE_COLOR": "1", "TERM": "xterm-256color"}], ids=["plain", "colour"])
def test_the_evaluate_table_prints_no_escape_from_the_reasoning(workspace, colour):
    root, env = workspace
    run = jurist(env, "evaluate", "--rubrics", str(root / "rubrics.json"), "--session", str(root / "s1.jsonl"),
                 "--output", str(root / "result.json"), **colour)
    assert run.returncode == 0, run.stderr
    assert_inert(run.stdout + run.stderr)
    shown = " ".join(run.stdout.split())
    for visible in ("Fine", "answer", "click", "here", "more", "end."):
        assert visible in shown
    if colour:
        assert "\x1b[" in run.stdout  # the table's own colours are still there
    else:
        assert "\x1b" not in run.stdout
    # result.json keeps what the judge wrote: only the printing is made safe
    assert json.loads((root / "result.json").read_text())["rubric_scores"][0]["reasoning"] == REASONING


def test_evaluate_json_escapes_every_control_character(workspace):
    root, env = workspace
    run = jurist(env, "evaluate", "--rubrics", str(root / "rubrics.json"), "--session", str(root / "s1.jsonl"),
                 "--json")
    assert run.returncode == 0, run.stderr
    assert_inert(run.stdout)
    assert json.loads(run.stdout)["rubric_scores"][0]["reasoning"] == REASONING  # the same text, escaped


def test_a_batch_prints_no_escape_from_a_file_name(workspace):
    root, env = workspace
    sessions = root / "sessions"
    sessions.mkdir()
    (sessions / f"a{TITLE}{CLEAR}.jsonl").write_text((root / "s1.jsonl").read_text())
    run = jurist(env, "evaluate-batch", "--rubrics", str(root / "rubrics.json"), "--sessions-dir", str(sessions),
                 "--output-dir", str(root / "out"), FORCE_COLOR="1")
    assert_inert(run.stdout + run.stderr)
    assert ".jsonl" in run.stdout  # the file is named, in the progress bar and the report


def test_an_error_names_the_file_without_its_escapes(workspace):
    root, env = workspace
    run = jurist(env, "evaluate", "--rubrics", str(root / f"r{TITLE}{CLEAR}.json"), "--session",
                 str(root / "s1.jsonl"))
    assert run.returncode != 0
    assert_inert(run.stdout + run.stderr)
    assert "r" in run.stderr and ".json" in run.stderr
