"""docs/testing-your-app.md runs as written: its files, its commands, then its GitHub Actions workflow.

Each block preceded by ``<!-- file: NAME -->`` is written to an empty folder; every ``bash``
block then runs there in order (``<!-- exit: N -->`` before one says the exit status it must
have; 0 otherwise), against a scripted OpenAI-compatible server on 127.0.0.1 that is both the
app's model and the judge (``OPENAI_BASE_URL``). Then the workflow's steps run in a fresh
workspace as GitHub would run them: the pull request's files at the top (the app after the
page's edit), the base branch's (the app as first written) under the second checkout's
``path``; ``setup-python`` and ``pip install`` are what this venv already is. The comparison
must fail the job, and its summary must reach ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jurist.testing.provider_server import ProviderServer, Reply
from tests.conftest import REPO

PAGE = REPO / "docs" / "testing-your-app.md"
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\s*$")
FILE = re.compile(r"<!--\s*file:\s*(?P<name>[^ ]+?)\s*-->")
EXIT = re.compile(r"<!--\s*exit:\s*(?P<code>\d+)\s*-->")
TIMEOUT_S = 300
BIN = Path(sys.executable).parent  # jurist, pytest: the venv running these tests


def blocks(page: Path) -> Iterator[tuple[int, str, str, str]]:
    """(line, language, text, the marker line before it) for each fenced block."""
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group("lang"):
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            before = next((lines[j] for j in range(start - 2, -1, -1) if lines[j].strip()), "")
            yield start, m.group("lang"), "\n".join(body) + "\n", before
        i += 1


def page_files() -> dict[str, str]:
    return {FILE.search(before).group("name"): text  # type: ignore[union-attr]
            for _, _, text, before in blocks(PAGE) if FILE.search(before)}


CAPITALS = {json.loads(line)["input"]: json.loads(line)["expected"]
            for line in page_files()["questions.jsonl"].splitlines()}


def _text(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False)


def responder(body: dict[str, Any]) -> Reply:
    """The app's model and the judge. The app: the capital in a sentence, or the name alone when its
    prompt asks for that. The judge: an answer agrees when it names the expected capital; it is a
    full sentence when it says "The capital of"."""
    messages = body.get("messages") or []
    system = next((m.get("content") for m in messages if m.get("role") == "system"), "") or ""
    if "geography assistant" in str(system):
        question = messages[-1]["content"]
        capital = CAPITALS[question]
        capital = capital if isinstance(capital, str) else capital[0]
        if "name only" in system:
            return Reply(text=capital)
        country = question.removeprefix("What is the capital of ").rstrip("?")
        return Reply(text=f"The capital of {country} is {capital}.")
    prompt = _text(messages)
    session = prompt.rsplit("<chat_session", 1)[-1] if "<chat_session" in prompt else prompt
    if "Answers in a full sentence" in prompt:
        met, item = "The capital of" in session, "sentence"
    else:
        met, item = any(str(c if isinstance(c, str) else c[0]) in session for c in CAPITALS.values()), "agrees"
    return Reply(text=json.dumps({"items": [{"id": item, "met": met, "reasoning": "scripted verdict"}]}))


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer(responder) as s:
        yield s


def environment(tmp_path: Path, server: ProviderServer, workspace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_", "OPENAI_", "ANTHROPIC_", "GITHUB_"))}
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "data"), PATH=f"{BIN}:{env.get('PATH', '')}",
               OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key",
               JURIST_DATABASE_URL=f"sqlite:///{workspace / 'jurist.db'}", NO_COLOR="1", COLUMNS="200")
    return env


def run(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


def write_files(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_page_runs_as_written(tmp_path: Path, server: ProviderServer):
    work = tmp_path / "work"
    work.mkdir()
    files = page_files()
    assert {"questions.jsonl", "app.py", "rubrics.json", "test_app.py"} <= set(files)
    assert len(files["questions.jsonl"].splitlines()) == 20
    write_files(work, files)
    env = environment(tmp_path, server, work)
    ran = 0
    for line, lang, text, before in blocks(PAGE):
        if lang != "bash":
            continue
        expected = int(EXIT.search(before).group("code")) if EXIT.search(before) else 0
        done = run(text, work, env)
        assert done.returncode == expected, (f"{PAGE.name}:{line} exited {done.returncode}, not {expected}\n"
                                             f"$ {text}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        ran += 1
        if "experiment compare" in text:
            assert "gate failed" in done.stdout and "Answers in a full sentence" in done.stdout, done.stdout
    assert ran >= 5
    summary = (work / "comparison.md").read_text(encoding="utf-8")
    assert "## jurist experiment compare: baseline → terse" in summary
    assert "### Regressions (pass → fail): 20" in summary and "**Gate: failed.**" in summary


def test_the_workflow_runs_as_github_would(tmp_path: Path, server: ProviderServer):
    files = page_files()
    workflow = yaml.safe_load(files.pop(".github/workflows/llm-regression.yml"))
    job = next(iter(workflow["jobs"].values()))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    pr_files = dict(files, **{"app.py": files["app.py"].replace("Answer in one full sentence.",
                                                               "Answer with the name only.")})
    assert pr_files["app.py"] != files["app.py"]  # the page's sed edits this line
    env = environment(tmp_path, server, workspace)
    github = {"secrets.OPENAI_API_KEY": "test-key", "github.workspace": str(workspace),
              "github.event.pull_request.base.sha": "base-sha"}

    def expand(value: str) -> str:
        return re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", lambda m: github[m.group(1)], value)

    env.update({k: expand(str(v)) for k, v in job["env"].items()})
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "step_summary.md")
    checkouts, results, failed = 0, [], False
    for step in job["steps"]:
        uses = step.get("uses", "")
        if uses.startswith("actions/checkout@"):
            where = workspace / step.get("with", {}).get("path", ".")
            write_files(where, files if checkouts else pr_files)  # the pull request first, then the base
            checkouts += 1
            continue
        if uses.startswith("actions/setup-python@") or step.get("run", "").startswith("pip install"):
            continue  # the venv running this test is that Python with those packages
        if failed and step.get("if") != "always()":
            continue  # as GitHub skips the steps after a failed one, unless they run always
        cwd = workspace / step.get("working-directory", ".")
        done = run(expand(step["run"]), cwd, env)
        results.append((step.get("name") or step["run"], done))
        failed = failed or done.returncode != 0
    assert checkouts == 2
    exits = {name: done.returncode for name, done in results}
    shown = "\n".join(f"{name}: exit {d.returncode}\n{d.stdout[-2000:]}\n{d.stderr[-2000:]}" for name, d in results)
    # the pull request's terser prompt fails the comparison, and the tests (run although it failed)
    assert list(exits.values()) == [0, 0, 0, 1, 1] and list(exits)[-2:] == ["Compare", "Tests"], shown
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "## jurist experiment compare: base → pull-request" in summary
    assert "**Gate: failed.**" in summary
    assert (workspace / "comparison.md").read_text(encoding="utf-8").strip() == summary.strip()
    shutil.rmtree(workspace, ignore_errors=True)
