"""`jurist experiment compare A B` on a real store: exit codes, JSON, the gate, the markdown summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jurist.store import Store
from tests.conftest import run_cli
from tests.experiments.compare_data import item, run
from tests.experiments.compare_data import seed as seed_store

IDS = [f"q{i:02d}" for i in range(20)]
HOSTILE = "[bold red]boom[/] | <script>alert(1)</script> \x1b]0;pwned\x07 `x`"


def seed(url: str, runs: dict[str, tuple[dict, list]]) -> None:
    with Store(url) as store:
        seed_store(store, runs, IDS)


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    good = {i: (5.0, 4.0) for i in IDS}
    worse = dict(good, **{i: (2.0, 4.0) for i in IDS[:8]})
    hostile = run("odd", good)
    hostile[0] = item("odd", IDS[0], {"correct": 1.0, "concise": 1.0}, answer=HOSTILE)
    seed(url, {"base": ({}, run("base", good)), "worse": ({}, run("worse", worse)),
               "same": ({}, run("same", good)), "odd": ({}, hostile),
               "other-judge": ({"judges": ["openai/other"]}, run("other-judge", worse))})
    return url


def compare(url: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    return run_cli("experiment", "compare", *args, "--db", url, "--resamples", "300", env=env, cwd=cwd)


def test_a_regression_fails_the_gate_and_is_named(store_url: str, tmp_path: Path):
    done = compare(store_url, "base", "worse", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["regressions"] == IDS[:8] and data["gate"] is None
    correct = next(m for m in data["metrics"] if m["key"] == "correct")
    assert correct["difference"] == -1.2 and correct["significant_drop"] is True
    assert correct["scores"]["p_adjusted"] < 0.05 and correct["flips"]["p_value"] == pytest.approx(2 * 0.5**8)
    row = next(r for r in data["items"] if r["item_id"] == "q00")
    assert row["input"] == "Question q00?" and row["difference"] == -1.5 and row["change"] == "regression"

    # the gate, with the summary to a file and to GitHub's step summary (appended)
    step = tmp_path / "step.md"
    step.write_text("earlier step\n", encoding="utf-8")
    summary = tmp_path / "out" / "comparison.md"
    gated = compare(store_url, "base", "worse", "--fail-on-regression", "--max-regressions", "8",
                    "--summary", str(summary), env={"GITHUB_STEP_SUMMARY": str(step)})
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "gate failed" in gated.stdout and "Correct: a significant drop of -1.2" in gated.stdout
    assert "item(s) went from pass to fail" not in gated.stdout  # 8 regressions are allowed here
    assert "q00" in gated.stdout and "regression" in gated.stdout
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## jurist experiment compare: base → worse")
    assert "### Regressions (pass → fail): 8" in text and "**Gate: failed.**" in text
    assert "| Correct | 20 | 5 | 3.8 | -1.2 [" in text
    assert step.read_text(encoding="utf-8") == "earlier step\n" + text


def test_no_drop_passes_the_gate(store_url: str):
    done = compare(store_url, "base", "same", "--fail-on-regression")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gate passed" in done.stdout and "0 regression(s)" in done.stdout


def test_unlike_runs_are_refused_with_exit_2_unless_allowed(store_url: str, tmp_path: Path):
    refused = compare(store_url, "base", "other-judge")
    assert refused.returncode == 2 and "--allow-different" in refused.stderr and "judge models" in refused.stderr
    report = tmp_path / "report.json"
    allowed = compare(store_url, "base", "other-judge", "--allow-different", "--output", str(report))
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout.lstrip().startswith("NOT LIKE WITH LIKE")
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["allowed_different"] is True and "judge models" in data["different"][0]
    missing = compare(store_url, "base", "nope")
    assert missing.returncode == 2 and "no experiment named 'nope'" in missing.stderr and "worse" in missing.stderr


def test_what_the_runs_wrote_is_shown_as_text(store_url: str, tmp_path: Path):
    summary = tmp_path / "odd.md"
    done = compare(store_url, "base", "odd", "--summary", str(summary))
    assert done.returncode == 0, done.stderr
    assert "[bold red]boom[/]" in done.stdout  # rich markup shown, not applied
    assert "\x1b]0;" not in done.stdout and "\x07" not in done.stdout  # no terminal escape gets through
    text = summary.read_text(encoding="utf-8")
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "\\[bold red\\]boom\\[/\\] \\| " in text  # no markdown table cell is broken


def test_too_few_pairs_say_so(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'few.db'}"
    seed(url, {"a": ({}, run("a", {i: (5.0, 5.0) for i in IDS[:3]})),
               "b": ({}, run("b", {i: (1.0, 1.0) for i in IDS[:3]}))})
    report = tmp_path / "few.json"
    gated = compare(url, "a", "b", "--fail-on-regression", "--max-regressions", "3", "--output", str(report))
    assert gated.returncode == 0 and "not enough pairs" in gated.stdout
    data = json.loads(report.read_text(encoding="utf-8"))
    assert all(m["scores"]["p_value"] is None and m["scores"]["note"].startswith("not enough pairs")
               for m in data["metrics"])
    assert data["gate"] == {"passed": True, "reasons": [], "max_regressions": 3}
