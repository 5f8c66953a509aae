"""`jurist evaluate`, `evaluate-batch` and `logs` on the examples, judged by the real server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.realserver.conftest import EXAMPLES, MODEL, write_config

pytestmark = pytest.mark.realserver

ITEMS = [r["items"] for r in json.loads((EXAMPLES / "rubrics.json").read_text())["rubrics"]]


def logged(env: dict[str, str], cwd: Path) -> list[dict]:
    out = run_cli("logs", "-n", "100", "--json", env=env, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_evaluate_an_example_through_the_openai_reference(llama, tmp_path) -> None:
    write_config(tmp_path, llama.base_url)
    env = {"OPENAI_BASE_URL": llama.base_url, "JURIST_HOME": str(tmp_path / ".jurist")}
    r = run_cli("evaluate", "--rubrics", str(EXAMPLES / "rubrics.json"), "--session",
                str(EXAMPLES / "sessions" / "s5.jsonl"), "--judge", f"openai/{MODEL}", "-o", "result.json",
                env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    scores = json.loads((tmp_path / "result.json").read_text())["rubric_scores"]
    assert [s["status"] for s in scores] == ["scored"] * 3  # every verdict parsed: the schema holds the item ids
    assert [[i["id"] for i in s["items"]] for s in scores] == [[i["id"] for i in items] for items in ITEMS]
    calls = logged(env, tmp_path)
    # json_schema was refused (a 500) inside the first call; every call went out as llama.cpp takes a schema
    assert len(calls) == 3 and {c["params"]["structured_output"] for c in calls} == {"json_object_schema"}
    assert all(c["model"] == f"openai/{MODEL}" and c["status"] == "ok" for c in calls)
    assert all(c["input_tokens"] > 100 and c["output_tokens"] > 5 for c in calls)


def test_evaluate_batch_on_the_examples_and_the_logs(llama, tmp_path) -> None:
    write_config(tmp_path, llama.base_url, judge=f"llamacpp/{MODEL}")
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    for name in ("s2.jsonl", "s5.jsonl"):
        shutil.copy(EXAMPLES / "sessions" / name, sessions / name)
    env = {"JURIST_HOME": str(tmp_path / ".jurist")}
    r = run_cli("evaluate-batch", "--rubrics", str(EXAMPLES / "rubrics_freeform.json"), "--sessions-dir",
                str(sessions), "--output-dir", "out", "--parallel", "2", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob("s*.json"))
               if p.name != "summary.json"]
    statuses = [s["status"] for res in results for s in res["rubric_scores"]]
    assert statuses == ["scored"] * 4  # every verdict parsed
    assert summary["batch_summary"]["total_sessions"] == 2 and summary["failures"]
    calls = logged(env, tmp_path)
    judge_calls = [c for c in calls if c["purpose"] == "rubric_judge"]
    assert len(judge_calls) == 4 and all(c["params"]["structured_output"] == "json_object_schema"
                                         for c in judge_calls)
    assert all(c["input_tokens"] > 100 and c["output_tokens"] > 5 and c["latency_ms"] > 0 for c in judge_calls)
    table = run_cli("logs", "-n", "3", env=env, cwd=tmp_path)
    assert table.returncode == 0 and f"llamacpp/{MODEL}" in table.stdout
    assert f"{judge_calls[0]['input_tokens']}/{judge_calls[0]['output_tokens']}" in table.stdout
