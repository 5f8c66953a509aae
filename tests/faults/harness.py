"""`jurist evaluate-batch` in a subprocess, and what it leaves behind: result files, store rows, calls.

Used by the fault tests (``tests/faults``) and by ``benchmarks/faults.py``. The
judge is any OpenAI-compatible server on 127.0.0.1 (``ProviderServer`` in a
test, ``python -m jurist.testing.provider_server`` in the benchmark).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import Connection

from jurist.errors import ConfigError
from jurist.store import Store
from jurist.store.tables import llm_calls

RUBRICS = {"version": "1.0", "rubrics": [
    {"id": "clarity", "name": "Clarity", "scoring_criteria": "1 = muddled, 5 = clear", "weight": 1},
    {"id": "accuracy", "name": "Accuracy", "scoring_criteria": "1 = wrong, 5 = right", "weight": 2},
]}
# Variables of the calling environment that would change the batch's judge or store.
_CLEARED = ("JURIST_JUDGE", "JURIST_DATABASE_URL", "JURIST_CONFIG", "JURIST_CACHE", "OPENAI_API_KEY",
            "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


def jurist_env(home: Path, **values: str) -> dict[str, str]:
    """This process's environment without its jurist and provider settings, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env.update(JURIST_HOME=str(home), COLUMNS="200", **values)
    return env


@dataclass
class Workspace:
    """Sessions, a rubrics file, an output folder and a store, for batches against a judge at ``base_url``."""

    root: Path
    url: str  # the store
    base_url: str  # the judge (OpenAI protocol)
    sessions: int = 40
    parallel: int = 8

    def __post_init__(self) -> None:
        self.sessions_dir = self.root / "sessions"
        self.out = self.root / "out"
        self.rubrics = self.root / "rubrics.json"
        self.sessions_dir.mkdir(parents=True, exist_ok=True)
        self.rubrics.write_text(json.dumps(RUBRICS))
        for i in range(self.sessions):
            (self.sessions_dir / f"s{i:04d}.jsonl").write_text(
                json.dumps({"role": "user", "content": f"Question {i}: why is the sky blue?"}) + "\n"
                + json.dumps({"role": "assistant", "content": f"Answer {i}: Rayleigh scattering."}) + "\n")

    @property
    def calls_per_run(self) -> int:
        return self.sessions * len(RUBRICS["rubrics"])

    def env(self) -> dict[str, str]:
        return jurist_env(self.root / "home", OPENAI_BASE_URL=self.base_url, OPENAI_API_KEY="test",
                          JURIST_JUDGE="openai/gpt-test", JURIST_DATABASE_URL=self.url)

    def command(self, *extra: str) -> list[str]:
        return [sys.executable, "-m", "jurist", "evaluate-batch", "--rubrics", str(self.rubrics),
                "--sessions-dir", str(self.sessions_dir), "--output-dir", str(self.out),
                "--parallel", str(self.parallel), *extra]

    def start(self, *extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(*extra), env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)

    def run(self, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(*extra), env=self.env(), capture_output=True, text=True,
                              timeout=timeout)

    def result_files(self) -> dict[str, str]:
        """{trace id: session id} of the result files."""
        files = {}
        for p in self.out.glob("*_result.json"):
            data = json.loads(p.read_text(encoding="utf-8"))
            files[data["trace_id"]] = data["session_id"]
        return files


@dataclass
class Agreement:
    """What a workspace's store and folder hold, compared."""

    opens: bool  # the store opens (a kill must never leave it unusable)
    rows: int  # rubric evaluations in the store
    files: int  # result files
    files_without_row: int
    rows_without_file: int
    sessions_scored_twice: int  # sessions with more than one evaluation row
    calls_made_twice: int  # requests answered (not from the cache) more than once on record

    @property
    def agree(self) -> bool:
        return self.opens and not (self.files_without_row or self.rows_without_file or self.sessions_scored_twice
                                   or self.calls_made_twice)


def agreement(ws: Workspace) -> Agreement:
    """Open the store and compare its rows with the result files."""
    files = ws.result_files() if ws.out.is_dir() else {}
    try:
        store = Store(ws.url)
    except ConfigError:
        return Agreement(False, 0, len(files), len(files), 0, 0, 0)
    try:
        stored = store.evaluations(kind="rubric", limit=None)
        rows = {e["trace_id"]: e["subject_id"] for e in stored}  # a result file names its trace
        twice = store.read(_calls_made_twice)
    finally:
        store.close()
    per_session: dict[str, int] = {}
    for e in stored:
        per_session[e["subject_id"]] = per_session.get(e["subject_id"], 0) + 1
    return Agreement(opens=True, rows=len(stored), files=len(files), files_without_row=len(set(files) - set(rows)),
                     rows_without_file=len(set(rows) - set(files)),
                     sessions_scored_twice=sum(1 for n in per_session.values() if n > 1), calls_made_twice=twice)


def _calls_made_twice(conn: Connection) -> int:
    """Request hashes answered by the judge (status ok, not from the cache) more than once."""
    answered = (select(llm_calls.c.request_hash).where(llm_calls.c.status == "ok", llm_calls.c.cached.is_(False))
                .group_by(llm_calls.c.request_hash).having(func.count() > 1))
    return len(conn.execute(answered).all())


def interruptible() -> None:
    """Run in a started child (``preexec_fn``): SIGINT back to its default, so Python turns it into
    KeyboardInterrupt as at a terminal. A test runner started in the background by a shell without job
    control ignores SIGINT, and a child inherits that: the signal a test sends would be lost."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wait_for(condition: Callable[[], bool], timeout: float, proc: subprocess.Popen[str] | None = None) -> bool:
    """Poll ``condition`` until true (True), ``timeout`` passes or ``proc`` ends (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.005)
    return False


def kill(proc: subprocess.Popen[str], sig: int = signal.SIGKILL, timeout: float = 60) -> tuple[int, str]:
    """Send ``sig``; return the exit code and what the process wrote to stderr."""
    if proc.poll() is None:
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


@dataclass
class Trial:
    """One trial: runs of a batch killed at random moments, then a run to the end."""

    kills: int  # runs killed (a run that ended before its moment is not counted)
    unmigrated: int  # of them, kills that left the store without its schema (during start-up or migration)
    final: subprocess.CompletedProcess[str]  # the rerun that finished the batch
    state: Agreement  # after that rerun


def kill_trial(ws: Workspace, moments: list[float]) -> Trial:
    """Run the batch once per moment, killing it (SIGKILL) that many seconds after its start,
    then rerun it to the end and compare store and folder."""
    kills = unmigrated = 0
    for moment in moments:
        proc = ws.start()
        try:
            proc.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            pass
        killed = proc.poll() is None
        code, err = kill(proc)
        if code not in (-signal.SIGKILL, 0):
            raise AssertionError(f"a run exited {code} before it was killed:\n{err}")
        if killed:
            kills += 1
            unmigrated += not _migrated(ws.url)
    final = ws.run()
    return Trial(kills, unmigrated, final, agreement(ws))


def _migrated(url: str) -> bool:
    """Whether the store has its schema (a version: the migrations are committed at once)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() is not None
    except Exception:  # no table, no database file
        return False
    finally:
        engine.dispose()


def first_runs(url: str, home: Path, processes: int = 2) -> list[subprocess.CompletedProcess[str]]:
    """``jurist logs`` in several processes started together on the store at ``url``."""
    env = jurist_env(home, JURIST_DATABASE_URL=url)
    procs = [subprocess.Popen([sys.executable, "-m", "jurist", "logs"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done
