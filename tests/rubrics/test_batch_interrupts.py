"""`jurist evaluate-batch` killed, terminated or interrupted: every result file has its store row,
the command says how to resume, and the rerun finishes the batch without scoring anything twice."""

import signal

import pytest

from jurist.rubrics.folder import LOCK_NAME
from jurist.testing import Reply

from tests.conftest import fresh_database
from tests.faults.harness import Workspace, agreement, kill, wait_for

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
RESUME = "interrupted; finished results are kept, rerun to resume"


@pytest.fixture
def workspace(provider, tmp_path, request):
    """40 sessions x 2 rubrics against a judge answering in 50 ms, with a new store."""
    provider.default = Reply(delay=0.05)
    backend = getattr(request, "param", "sqlite")
    with fresh_database(backend, tmp_path, "jurist_interrupt") as url:
        yield Workspace(tmp_path, url, provider.base_url)


def some_results(ws, n=3):
    return lambda: len(list(ws.out.glob("*_result.json"))) >= n


def finish_and_check(ws, provider):
    rerun = ws.run()
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    state = agreement(ws)
    assert state.agree and state.files == ws.sessions, state
    return rerun


@pytest.mark.parametrize("workspace", BACKENDS, indirect=True)
def test_kill_9_leaves_no_result_file_without_its_row(workspace, provider):
    """Before: the row waited in memory while the file was written at once (8 of 144 lost)."""
    ws = workspace
    proc = ws.start()
    assert wait_for(some_results(ws, 5), 60, proc), proc.communicate()
    code, _ = kill(proc, signal.SIGKILL)
    assert code == -signal.SIGKILL
    state = agreement(ws)
    assert state.files_without_row == 0 and state.files >= 5, state
    finish_and_check(ws, provider)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_save_what_is_done_and_say_how_to_resume(workspace, provider, sig, code):
    """Before: SIGTERM had no handler (exit 143, no message, rows lost)."""
    ws = workspace
    proc = ws.start()
    assert wait_for(some_results(ws), 60, proc), proc.communicate()
    returncode, err = kill(proc, sig)
    assert returncode == code and RESUME in err, err
    state = agreement(ws)
    assert state.agree and 0 < state.files < ws.sessions, state  # every row's file is in place, too
    assert not (ws.out / LOCK_NAME).exists()
    calls = len(provider.requests)
    rerun = finish_and_check(ws, provider)
    assert f"{ws.sessions - state.files} scored now" in rerun.stdout
    assert len(provider.requests) - calls <= ws.calls_per_run - 2 * state.files


def test_a_second_batch_on_the_folder_exits_2_naming_the_first(workspace, provider):
    """Before: both ran, crashing on the shared temporary file, with calls and rows scored twice."""
    ws = workspace
    provider.default = Reply(delay=0.5)  # the first batch takes 2.5 s, the second starts in about 1
    first = ws.start()
    assert wait_for(lambda: (ws.out / LOCK_NAME).exists(), 60, first), first.communicate()
    second = ws.run()
    assert second.returncode == 2
    assert f"another batch is writing to this folder (process {first.pid})" in second.stderr
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    state = agreement(ws)
    assert state.agree and state.files == ws.sessions, state
    assert len(provider.requests) == ws.calls_per_run
