"""Faults: a 200-session `jurist evaluate-batch` against a judge that never answers, and against one that
answers 500 to everything, ends in seconds: the endpoint's breaker opens after the first wave of calls,
whichever clock cut them (the attempt's own timeout or the rubric's), and after the retries of calls that
got server errors. Every session has a result that says why it failed, and a rerun once the judge is back
scores them all. The judge is a ``ProviderServer`` on 127.0.0.1.
"""

import json
import subprocess
import time
from pathlib import Path

import yaml

from jurist.config import Settings
from jurist.testing import Reply

from tests.faults.harness import RUBRICS, Workspace, agreement

SESSIONS, PARALLEL = 200, 5
FIRST_WAVE = PARALLEL * len(RUBRICS["rubrics"])  # calls in flight when the batch starts


def batch(ws: Workspace, settings: dict[str, object], timeout: float = 180) -> tuple[subprocess.CompletedProcess[str],
                                                                                        float]:
    """Run the batch with ``settings`` in a jurist.yaml; return the run and the seconds it took."""
    config = ws.root / "jurist.yaml"
    config.write_text(yaml.safe_dump(settings))
    started = time.monotonic()
    done = subprocess.run(ws.command(), env={**ws.env(), "JURIST_CONFIG": str(config)}, capture_output=True,
                          text=True, timeout=timeout)
    return done, time.monotonic() - started


def reasons(out: Path) -> list[str]:
    """The reason of every rubric of every result file."""
    found = []
    for p in out.glob("*_result.json"):
        data = json.loads(p.read_text(encoding="utf-8"))
        assert data["status"] == "failed", data
        found += [rs["reasoning"] for rs in data["rubric_scores"]]
    return found


def rerun_scores_them_all(ws: Workspace, provider, settings: dict[str, object]) -> None:
    provider.default = Reply(text='{"score": 4, "reasoning": "fine"}')
    done, _ = batch(ws, settings)
    assert done.returncode == 0, done.stdout + done.stderr
    statuses = [json.loads(p.read_text())["status"] for p in ws.out.glob("*_result.json")]
    assert statuses == ["scored"] * SESSIONS


def test_a_hung_judge_cut_by_the_rubric_clock_opens_the_breaker(provider, tmp_path):
    """The rubric's clock runs out before the attempt's (as 60 s and 60 s did: the outer one fired first):
    the calls it cuts count as time-outs. Before, none counted: 40 rounds of rubric timeouts, one per
    ``PARALLEL`` sessions, and every call reached the judge."""
    provider.default = Reply(hang=True)
    ws = Workspace(tmp_path, f"sqlite:///{tmp_path}/j.db", provider.base_url, sessions=SESSIONS, parallel=PARALLEL)
    settings = {"timeout": 10, "rubric_timeout": 1, "max_retries": 2}  # the breaker at its defaults
    done, took = batch(ws, settings)
    assert done.returncode == 1, done.stdout + done.stderr
    assert took < 15, took  # start-up, one rubric timeout, then every call fails at once
    assert "the judge endpoint was down" in done.stdout + done.stderr
    assert len(provider.requests) <= FIRST_WAVE
    state = agreement(ws)
    assert state.agree and state.files == SESSIONS, state  # each failure is on file and on record
    why = reasons(ws.out)
    assert len(why) == SESSIONS * len(RUBRICS["rubrics"])
    assert all(r == "timed out after 1 s" or r.startswith("EndpointDown: ") for r in why), set(why)
    assert sum(r.startswith("EndpointDown: ") for r in why) >= len(why) - FIRST_WAVE
    assert "calls in a row got no answer" in next(r for r in why if r.startswith("EndpointDown"))
    rerun_scores_them_all(ws, provider, settings)


def test_an_always_500_judge_opens_the_breaker_after_the_retries(provider, tmp_path):
    """Before, a server error was an answer that kept the breaker closed: every call made all its
    attempts (here 200 x 2 x 5 = 2,000 requests)."""
    provider.default = Reply(status=500, message="internal error")
    ws = Workspace(tmp_path, f"sqlite:///{tmp_path}/j.db", provider.base_url, sessions=SESSIONS, parallel=PARALLEL)
    settings = {"max_retries": 4, "backoff_base": 0.05, "backoff_max": 0.2}
    done, took = batch(ws, settings)
    assert done.returncode == 1, done.stdout + done.stderr
    assert took < 15, took
    assert "the judge endpoint was down" in done.stdout + done.stderr
    assert len(provider.requests) <= FIRST_WAVE * (4 + 1)  # the first wave's attempts, then none
    state = agreement(ws)
    assert state.agree and state.files == SESSIONS, state  # each failure is on file and on record
    why = reasons(ws.out)
    assert len(why) == SESSIONS * len(RUBRICS["rubrics"])
    down = [r for r in why if r.startswith("EndpointDown: ")]
    assert len(down) >= len(why) - FIRST_WAVE
    assert all(r in down or "500" in r for r in why), set(why)
    assert "calls in a row got a server error" in down[0]
    rerun_scores_them_all(ws, provider, settings)


def test_a_retry_fits_in_a_rubrics_time_by_default():
    """The attempt's timeout is under the rubric's, so a hung judge's first calls time out on their own
    clock, well within the rubric's (before: 60 s and 60 s, and the rubric's clock fired first)."""
    s = Settings()
    assert 2 * s.timeout <= s.rubric_timeout
