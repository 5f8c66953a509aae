"""What `jurist` costs before a command runs, and what it shows while it waits."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from jurist.cli import common
from jurist.models import local

from tests.conftest import EXAMPLES, run_cli

SRC = Path(__file__).resolve().parents[2] / "src"
# (not pydantic: typer itself imports it to read a command's parameters when it is installed)
HEAVY = ("fastapi", "sqlalchemy", "aiohttp", "scipy", "plotly", "numpy", "openai", "anthropic", "uvicorn",
         "asyncio", "yaml", "jurist.config", "jurist.store", "jurist.server", "jurist.models")


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from jurist.cli.main import main\n"
        "for argv in (['jurist', '--help'], ['jurist', 'evaluate-batch', '--help'], ['jurist', 'demo', '--help']):\n"
        "    sys.argv = argv\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "serve" in done.stdout and "--engine" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_waiting_says_when_the_local_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[str] = []

    class Status:
        def update(self, text: str) -> None:
            shown.append(text)

    @contextlib.contextmanager
    def status(what: str, spinner: str) -> Iterator[Status]:
        shown.append(what)
        yield Status()

    monkeypatch.setattr(common.err_console, "status", status)
    monkeypatch.setattr(local, "_model", None)
    with common.waiting("scoring s1.jsonl"):
        local._load_model()
        local._load_model()  # loaded: nothing more to say
    assert shown == ["scoring s1.jsonl", common.LOADING_LOCAL, "scoring s1.jsonl"]
    assert local.set_load_notice(None) is None  # the notice went with the spinner


def test_evaluate_shows_a_spinner_on_a_terminal(tmp_path: Path) -> None:
    env = {"JURIST_HOME": str(tmp_path / ".jurist"), "TTY_COMPATIBLE": "1"}
    r = run_cli("evaluate", "--rubrics", str(EXAMPLES / "rubrics.json"), "--session",
                str(EXAMPLES / "sessions" / "s1.jsonl"), cwd=tmp_path, env=env)
    # 1: a rubric the offline judge could not decide (uncertain) is a failed evaluation; the spinner is the point
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "scoring s1.jsonl with local/minilm" in r.stderr


@pytest.mark.parametrize("command", [["evaluate", "--session", str(EXAMPLES / "sessions" / "s1.jsonl")],
                                     ["evaluate-batch", "--sessions-dir", str(EXAMPLES / "sessions"),
                                      "--output-dir", "out"],
                                     ["demo"]])
def test_without_the_local_extra_commands_say_which_to_install(tmp_path: Path, command: list[str]) -> None:
    if command[0] != "demo":
        command = [command[0], "--rubrics", str(EXAMPLES / "rubrics.json"), *command[1:]]
    code = (
        "import sys\n"
        "sys.modules['tokenizers'] = None  # as if the extra were not installed\n"
        "from jurist.cli.main import main\n"
        "sys.argv = ['jurist', *sys.argv[1:]]\n"
        "main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200", "JURIST_HOME": str(tmp_path / ".jurist")}
    env.pop("JURIST_JUDGE", None)
    done = subprocess.run([sys.executable, "-c", code, *command], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert 'pip install "jurist[local]"' in done.stderr and "missing: tokenizers" in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "jurist-demo").exists()  # stopped before any work
