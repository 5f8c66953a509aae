"""The `jurist` command end to end, against a scripted server on 127.0.0.1."""

import json

from jurist.testing import Reply

from tests.conftest import EXAMPLES, run_cli
from tests.rubrics.test_batch import make_sessions

FREE = str(EXAMPLES / "rubrics_freeform.json")
S1 = str(EXAMPLES / "sessions" / "s1.jsonl")


def env_for(server, tmp_path, **extra):
    env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key",
           "JURIST_HOME": str(tmp_path / ".jurist"), "JURIST_JUDGE": "openai/gpt-4o-mini"}
    env.update(extra)
    return env


def test_evaluate_writes_result_json(provider, tmp_path):
    provider.default = Reply(text="SCORE: 4\nREASONING: The user was clear.")
    out = tmp_path / "result.json"
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--output", str(out),
                env=env_for(provider, tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    assert result["session_id"] == "s1" and result["summary"]["percentage"] == 80.0
    assert result["judge_model"] == "openai/gpt-4o-mini"
    assert provider.requests[0]["json"]["model"] == "gpt-4o-mini"


def test_evaluate_exit_1_when_a_rubric_failed(provider, tmp_path):
    provider.default = Reply(text="I refuse to score.")
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, env=env_for(provider, tmp_path), cwd=tmp_path)
    assert r.returncode == 1
    assert "evaluation_failed" in r.stdout


def test_bad_input_exit_2_with_file_and_line(provider, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": "wizard", "content": "x"}\n')
    r = run_cli("evaluate", "--rubrics", FREE, "--session", str(bad), env=env_for(provider, tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and f"{bad}:2: role 'wizard'" in r.stderr.replace("\n", "")
    assert provider.requests == []


def test_template_with_unknown_placeholder_fails_before_any_call(provider, tmp_path):
    t = tmp_path / "t.txt"
    t.write_text("{rubric_name}\n{chat_session}\n{user_name}")
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--template", str(t),
                env=env_for(provider, tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and "{user_name}" in r.stderr and provider.requests == []


def test_batch_then_logs_show_every_call(provider, tmp_path):
    provider.default = Reply(text='{"score": 5, "reasoning": "fine"}', delay=0.02)
    provider.script(Reply(status=429, headers={"Retry-After": "0"}))
    sessions = make_sessions(tmp_path / "s", 6)
    env = env_for(provider, tmp_path)
    r = run_cli("evaluate-batch", "--rubrics", FREE, "--sessions-dir", str(sessions), "--output-dir",
                str(tmp_path / "out"), "--parallel", "3", "--max-concurrency", "2", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "6/6" in r.stdout and provider.peak_in_flight <= 2
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["batch_summary"]["average_score"] == 5.0
    logs = run_cli("logs", "-n", "100", "--json", env=env, cwd=tmp_path)
    rows = [json.loads(line) for line in logs.stdout.splitlines()]
    assert len(rows) == 12 and all(r["purpose"] == "rubric_judge" and r["status"] == "ok" for r in rows)
    assert sum(r["attempts"] for r in rows) == len(provider.requests) == 13
    table = run_cli("logs", "-n", "5", "--status", "ok", env=env, cwd=tmp_path)
    assert table.returncode == 0 and "rubric_judge" in table.stdout and "openai/gpt-4o-mini" in table.stdout
    # a rerun of the finished batch costs no calls
    r = run_cli("evaluate-batch", "--rubrics", FREE, "--sessions-dir", str(sessions), "--output-dir",
                str(tmp_path / "out"), env=env, cwd=tmp_path)
    assert r.returncode == 0 and len(provider.requests) == 13 and "6 already done" in r.stdout


def test_alias_from_jurist_yaml(provider, tmp_path):
    (tmp_path / "jurist.yaml").write_text(
        "aliases:\n  fast: mine/small-model\n"
        f"providers:\n  mine:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: k\n"
    )
    provider.default = Reply(text="SCORE: 3")
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--judge", "fast", cwd=tmp_path,
                env={"JURIST_HOME": str(tmp_path / ".jurist")})
    assert r.returncode == 0, r.stderr
    assert provider.requests[0]["json"]["model"] == "small-model"


def test_missing_key_and_unknown_model_say_how_to_fix(tmp_path):
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--judge", "openai/gpt-4o-mini", cwd=tmp_path)
    assert r.returncode == 2 and "OPENAI_API_KEY" in r.stderr
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--judge", "strong", cwd=tmp_path)
    assert r.returncode == 2 and "aliases:" in r.stderr
    r = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--judge", "nosuch/model", cwd=tmp_path)
    assert r.returncode == 2 and "unknown provider 'nosuch'" in r.stderr


def test_bad_jurist_yaml(tmp_path):
    (tmp_path / "jurist.yaml").write_text("max_concurrency: -3\n")
    r = run_cli("logs", cwd=tmp_path)
    assert r.returncode == 2 and "max_concurrency" in r.stderr and "jurist.yaml" in r.stderr


def test_text_that_looks_like_rich_markup_is_printed_as_text(provider, tmp_path):
    """A role ``[/bold]``, a session id ``[/]`` and a judge's reasoning with ``[/]`` once crashed
    the CLI with a MarkupError; they are data, printed as they are."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": "[/bold]", "content": "x"}\n')
    env = env_for(provider, tmp_path)
    r = run_cli("evaluate", "--rubrics", FREE, "--session", str(bad), env=env, cwd=tmp_path)
    assert r.returncode == 2 and "[/bold]" in r.stderr and "MarkupError" not in r.stderr
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"session_id": "[/]", "role": "user", "content": "hi"}\n'
                   '{"session_id": "[/]", "role": "assistant", "content": "hello"}\n')
    provider.default = Reply(text='{"score": 4, "reasoning": "closes a tag [/] and opens [bold]"}')
    r = run_cli("evaluate", "--rubrics", FREE, "--session", str(odd), env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "closes a tag [/] and opens [bold]" in r.stdout.replace("\n", "") or "[/]" in r.stdout
    r = run_cli("logs", env=env, cwd=tmp_path)
    assert r.returncode == 0 and "MarkupError" not in r.stderr, r.stderr


def test_version_prints_the_packages_version(tmp_path):
    import jurist

    r = run_cli("--version", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == f"jurist {jurist.__version__}"


def run_in_a_terminal(*args: str, env: dict[str, str], cwd) -> tuple[int, str]:
    """Run `jurist ARGS` with stdout on a pseudo-terminal (stderr on a pipe); its exit code and what
    the terminal showed."""
    import os
    import pty
    import subprocess
    import sys

    from tests.conftest import _CLEARED

    full_env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    full_env.update(COLUMNS="200", **env)
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "jurist", *args], stdout=child, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=full_env, cwd=cwd)
    os.close(child)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child side is closed: all read
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    proc.communicate(timeout=120)
    return proc.returncode, shown.decode("utf-8", "replace")


def test_evaluate_pipe_gets_json_only_a_terminal_the_table(provider, tmp_path):
    """`jurist evaluate ... | jq` works: piped, stdout is the result as JSON and nothing else; on a
    terminal it is the table; --json asks for the JSON on a terminal too."""
    provider.default = Reply(text='{"score": 4, "reasoning": "Clear [bold]answers[/bold] throughout."}')
    env = env_for(provider, tmp_path)
    piped = run_cli("evaluate", "--rubrics", FREE, "--session", S1, env=env, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    result = json.loads(piped.stdout)  # the whole of stdout parses
    assert result["session_id"] == "s1" and result["summary"]["percentage"] == 80.0
    assert result["rubric_scores"][0]["reasoning"] == "Clear [bold]answers[/bold] throughout."
    code, shown = run_in_a_terminal("evaluate", "--rubrics", FREE, "--session", S1, env=env, cwd=tmp_path)
    assert code == 0
    assert "session s1" in shown and "total 4/5 (80%)" in shown and "Clear [bold]answers[/bold]" in shown
    assert '"rubric_scores"' not in shown
    code, shown = run_in_a_terminal("evaluate", "--rubrics", FREE, "--session", S1, "--json", env=env, cwd=tmp_path)
    assert code == 0 and json.loads(shown)["summary"]["percentage"] == 80.0
    # with --output the file holds the result and stdout shows the table, piped or not
    out = tmp_path / "r.json"
    written = run_cli("evaluate", "--rubrics", FREE, "--session", S1, "-o", str(out), env=env, cwd=tmp_path)
    assert written.returncode == 0 and "total 4/5 (80%)" in written.stdout and f"result written to {out}" in written.stderr
    assert json.loads(out.read_text())["summary"]["percentage"] == 80.0


def test_a_batch_with_failures_says_why_and_where_to_look(provider, tmp_path):
    """Errors from the endpoint and replies that cannot be parsed: the batch groups the reasons with
    their counts and names the `jurist logs` commands that list the calls, which do."""
    import itertools

    turn = itertools.count()

    def reply(request):  # per rubric call, in turn: a 500, an unparsable reply, a score
        kind = next(turn) % 3
        if kind == 0:
            return Reply(status=500)
        return Reply(text="I would rather not score this.") if kind == 1 else Reply(text='{"score": 4, "reasoning": "ok"}')

    provider.default = reply
    sessions = make_sessions(tmp_path / "s", 4)
    env = env_for(provider, tmp_path, JURIST_MAX_RETRIES="0", JURIST_RETRY_ON_PARSE_FAILURE="0", COLUMNS="80")
    r = run_cli("evaluate-batch", "--rubrics", FREE, "--sessions-dir", str(sessions), "--output-dir",
                str(tmp_path / "out"), "--parallel", "1", env=env, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    failed = [rs["reasoning"] for f in (tmp_path / "out").glob("*_result.json")
              for rs in json.loads(f.read_text())["rubric_scores"] if rs["status"] != "scored"]
    errors = sum(x.startswith("ModelUnavailable:") for x in failed)
    unparsed = sum(x.startswith("the judge's reply could not be parsed") for x in failed)
    assert errors and unparsed and errors + unparsed == len(failed)
    text = " ".join(r.stdout.split())  # the terminal's lines, unwrapped
    assert f"why the {len(failed)} rubric evaluations failed:" in text
    assert f"{errors} × ModelUnavailable: openai/gpt-4o-mini at {provider.base_url} failed on its side (500)" in text
    assert f"{unparsed} × the judge's reply could not be parsed (no re-ask" in text
    lines = r.stdout.splitlines()  # each command on a line of its own, whole, to copy
    assert "  jurist logs --status error --purpose rubric_judge" in lines
    assert "  jurist logs --status parse_error --purpose rubric_judge" in lines
    for status, count, what in (("error", errors, "ModelUnavailable"), ("parse_error", unparsed, "found neither")):
        shown = run_cli("logs", "--status", status, "--purpose", "rubric_judge", "--json", env=env, cwd=tmp_path)
        rows = [json.loads(line) for line in shown.stdout.splitlines()]
        assert len(rows) == count and all(what in row["error"] for row in rows)
        table = run_cli("logs", "--status", status, "--purpose", "rubric_judge", env=env, cwd=tmp_path)
        assert what in table.stdout  # the table says why each call failed
