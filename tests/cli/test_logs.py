"""`jurist logs` at 80 columns: whole words in every cell, a readable header, why a call failed."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from rich.console import Console

from jurist.cli.logs import _cost, calls_table, cost_total
from jurist.testing import Reply

from tests.cli.test_cli import FREE, S1, env_for
from tests.conftest import run_cli

def words_of(row: dict, wide: bool) -> set[str]:
    """Every word the table may show for one call (as `jurist logs --json` gives it)."""
    when = datetime.fromisoformat(row["created_at"])
    words = {*row["purpose"].split(), *row["model"].split(), *(row["error"] or "").split(), row["status"],
             f"{row['input_tokens']}/{row['output_tokens']}", "n/a", f"{row['latency_ms']:.0f}", "ms",
             f"{row['latency_ms'] / 1000:.1f}", "s", str(row["attempts"]), "attempts", "cached", "…", _cost(row),
             *(when.strftime("%Y-%m-%d %H:%M:%S") if wide else when.strftime("%m-%d %H:%M")).split()}
    if wide:
        words.add((row["trace_id"] or "")[:12])
    return words


def assert_whole_words(shown: str, rows: list[dict], width: int) -> None:
    """Every line fits ``width``; every word under the header rule is a word of the calls: none was
    split across lines (a piece of a word would not be one); the header's words are whole too."""
    known = set().union(*(words_of(r, width >= 100) for r in rows))
    lines = shown.splitlines()
    assert all(len(line) <= width for line in lines), max(lines, key=len)
    rule = next(i for i, line in enumerate(lines) if set(line.strip()) == {"─"})
    header = " ".join(lines[:rule]).split()
    # the cost under the tokens: the header "tokens in/out" over "cost" (the others on the second line)
    assert header == ["tokens", "in/out", "time", "call", "cost", "latency", "status",
                      *(["trace"] if width >= 100 else [])]
    if lines[-1].startswith("cost of these"):  # the total under the table
        assert " ".join(lines[-1:]) == cost_total(rows)
        lines = lines[:-1]
    body = " ".join(lines[rule + 1:]).split()
    assert body and all(w in known for w in body), [w for w in body if w not in known]


@pytest.fixture
def recorded(provider, tmp_path):
    """A store with calls that went well, failed at the endpoint and could not be parsed."""
    provider.script(Reply(text='{"score": 4, "reasoning": "fine"}'), Reply(status=500),
                    Reply(text="I would rather not say."))
    env = env_for(provider, tmp_path, JURIST_MAX_RETRIES="0", JURIST_RETRY_ON_PARSE_FAILURE="0")
    run_cli("evaluate", "--rubrics", FREE, "--session", S1, env=env, cwd=tmp_path)
    provider.script(Reply(text="SCORE: 3"), Reply(text="SCORE: 5"))
    run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--no-cache", env=env, cwd=tmp_path)
    rows = [json.loads(line) for line in
            run_cli("logs", "--json", env=env, cwd=tmp_path).stdout.splitlines()]
    assert {r["status"] for r in rows} == {"ok", "error", "parse_error"}
    return env, rows


@pytest.mark.parametrize("width", [80, 100, 200])
def test_logs_reads_at_any_width(recorded, tmp_path, width):
    env, rows = recorded
    shown = run_cli("logs", env={**env, "COLUMNS": str(width)}, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    store, title, table = shown.stdout.split("\n", 2)
    assert store == f"store: sqlite:///{tmp_path / '.jurist' / 'jurist.db'}" and title == f"last {len(rows)} calls"
    assert_whole_words(table, rows, width)
    flat = " ".join(table.split())
    assert "ModelUnavailable:" in flat and "failed on its side (500)" in flat.replace(" │", "")


def test_the_table_alone_at_80_columns_with_long_values():
    """Long errors, retries, cached calls, a long purpose: still whole words at 80 columns."""
    now = datetime(2026, 5, 1, 12, 0, 3)
    rows = [
        {"created_at": now, "purpose": "research_plan_meta_review", "model": "anthropic/claude-haiku-4-5",
         "input_tokens": 123456, "output_tokens": 7890, "latency_ms": 123456.7, "attempts": 5, "status": "error",
         "cached": False, "trace_id": "0123456789abcdef", "params": {},
         "error": "RateLimited: anthropic/claude-haiku-4-5 answered 429 after 5 attempts; lower max_in_flight or "
                  "requests_per_minute for this provider in jurist.yaml, or wait and rerun; the provider said: "
                  "Rate limit reached for requests per minute on your organization, please retry later"},
        {"created_at": now, "purpose": "checklist_batch", "model": "ollama/qwen3:14b", "input_tokens": 10,
         "output_tokens": 2, "latency_ms": 3.2, "attempts": 1, "status": "ok", "cached": True,
         "trace_id": None, "params": {}, "error": None},
    ]
    console = Console(width=80, record=True, file=open("/dev/null", "w"), color_system=None)
    console.print(calls_table(rows, console.width))
    shown = console.export_text()
    as_json = [{**r, "created_at": r["created_at"].isoformat()} for r in rows]
    assert_whole_words(shown, as_json, 80)
    assert "5 attempts" in shown and "cached" in shown
    assert " …" in shown and "organization" not in shown  # a long error is cut at a word, with a mark


def test_no_calls_says_so(tmp_path):
    shown = run_cli("logs", cwd=tmp_path, env={"JURIST_HOME": str(tmp_path / ".jurist")})
    assert shown.returncode == 0 and shown.stdout.splitlines()[1:] == ["no calls"]
    assert shown.stdout.startswith("store: sqlite:///")
    shown = run_cli("logs", "--status", "error", cwd=tmp_path, env={"JURIST_HOME": str(tmp_path / ".jurist")})
    assert shown.stdout.splitlines()[1:] == ["no calls matching these filters"]


def test_status_failed_is_every_failure_and_unknown_statuses_are_refused(recorded, tmp_path):
    env, rows = recorded
    failed = [json.loads(line) for line in
              run_cli("logs", "--json", "--status", "failed", env=env, cwd=tmp_path).stdout.splitlines()]
    assert sorted(r["id"] for r in failed) == sorted(r["id"] for r in rows if r["status"] != "ok")
    assert {r["status"] for r in failed} == {"error", "parse_error"}
    only_errors = run_cli("logs", "--json", "--status", "error", env=env, cwd=tmp_path)
    assert {json.loads(line)["status"] for line in only_errors.stdout.splitlines()} == {"error"}
    assert "--status failed shows every failed call" in only_errors.stderr
    for wrong, hint in (("fail", " (did you mean 'failed'?)"), ("errors", " (did you mean 'error'?)"),
                        ("bogus", "")):
        shown = run_cli("logs", "--status", wrong, env=env, cwd=tmp_path)
        assert shown.returncode == 2 and shown.stdout == ""
        message = " ".join(shown.stderr.split())
        assert f"--status '{wrong}' is not a call status{hint}" in message
        assert "use one of: ok, error, parse_error, failed" in message


def test_the_accepted_statuses_are_the_call_records():
    from typing import get_args

    from jurist.models.base import CallStatus
    from jurist.store.queries import call_status_filters, call_statuses

    assert call_statuses() == get_args(CallStatus) == ("ok", "error", "parse_error")
    assert call_status_filters() == ("ok", "error", "parse_error", "failed")
