"""Faults: `kill -9` at random moments of a batch (its first migration included), two batches on one
folder, first runs started together on a new store, on SQLite and PostgreSQL, and a batch against a
dead judge endpoint (the Host / Origin / body-size / token matrix is ``test_exposure.py``).

After every trial the store opens, its rows are the result files, no session was scored twice and no
call answered twice. Each loop is bounded in trials and in time (the whole suite runs in about a
minute on two cores); set ``JURIST_FAULTS_SEED`` to replay a run's kill moments. Traffic stays on
127.0.0.1 (the judge is a ``ProviderServer`` answering in 50 ms).
"""

import os
import random
import subprocess
import time

import pytest

from jurist.testing import Reply

from tests.conftest import fresh_database
from tests.faults.harness import RUBRICS, Workspace, agreement, first_runs, kill_trial

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
TRIALS, TRIAL_BUDGET = 4, 30.0  # kill trials per backend, and seconds after which no new trial starts
FIRST_RUNS = 3  # rounds of two first runs per backend
SEED = int(os.environ.get("JURIST_FAULTS_SEED") or random.SystemRandom().randrange(1_000_000))


@pytest.fixture
def judge(provider):
    provider.default = Reply(delay=0.05)
    return provider


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_9_at_random_moments_then_rerun(judge, tmp_path, backend):
    rng = random.Random(SEED)
    deadline = time.monotonic() + TRIAL_BUDGET
    kills = 0
    for trial in range(TRIALS):
        if trial >= 2 and time.monotonic() > deadline:
            break
        # Two runs killed between start-up (imports, the first migration) and the batch's end, then one more.
        moments = [rng.uniform(0.3, 1.8) for _ in range(2)]
        with fresh_database(backend, tmp_path, f"jurist_faults{trial}") as url:
            ws = Workspace(tmp_path / f"trial{trial}", url, judge.base_url)
            outcome = kill_trial(ws, moments)
        about = f"seed {SEED}, trial {trial}, kills at {[round(m, 3) for m in moments]} s"
        assert outcome.final.returncode == 0, f"{about}\n{outcome.final.stdout}{outcome.final.stderr}"
        assert outcome.state.agree and outcome.state.files == ws.sessions, f"{about}: {outcome.state}"
        kills += outcome.kills
    assert kills > 0


def test_two_batches_started_together_on_one_folder(judge, tmp_path):
    judge.default = Reply(delay=0.3)  # long enough that neither batch ends before the other starts
    ws = Workspace(tmp_path, f"sqlite:///{tmp_path}/j.db", judge.base_url)
    procs = [ws.start(), ws.start()]
    outcomes = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in outcomes)
    assert codes == [0, 2], outcomes
    refused = next(err for code, _, err in outcomes if code == 2)
    assert "another batch is writing to this folder (process" in refused
    state = agreement(ws)
    assert state.agree and state.files == ws.sessions, state
    assert len(judge.requests) == ws.calls_per_run  # before: 1,385 calls for 1,000


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_runs_started_together_on_a_new_store(tmp_path, backend):
    """`jurist logs & jurist logs` on a new store: before, one failed 6 times in 10 on SQLite."""
    for round_ in range(FIRST_RUNS):
        with fresh_database(backend, tmp_path, f"jurist_first{round_}") as url:
            runs = first_runs(url, tmp_path / "home")
            assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]


def test_a_dead_judge_endpoint_ends_a_200_session_batch_within_seconds(provider, tmp_path):
    """`jurist evaluate-batch` against an endpoint that accepts and never answers, breaker on (its
    defaults): without it, 200 sessions at 5 at once wait 40 rounds of timeouts (here 40 x 3 x 1 s)."""
    provider.default = Reply(hang=True)
    ws = Workspace(tmp_path, f"sqlite:///{tmp_path}/j.db", provider.base_url, sessions=200, parallel=5)
    env = {**ws.env(), "JURIST_TIMEOUT": "1", "JURIST_MAX_RETRIES": "2"}
    started = time.monotonic()
    done = subprocess.run(ws.command(), env=env, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    assert took < 30, took  # start-up, the first wave's timeouts, then every call fails at once
    assert "the judge endpoint was down" in done.stdout + done.stderr
    assert len(provider.requests) <= 3 * ws.parallel * len(RUBRICS["rubrics"])
    state = agreement(ws)
    assert state.agree and state.files == ws.sessions, state  # each failure is on file and on record
