"""The checklist against PostgreSQL, the real HTTP provider server, and the `jurist tutor` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from jurist.checklist import ChecklistSession
from jurist.config import Settings
from jurist.models import script
from jurist.store import Store
from jurist.testing import Reply
from tests.conftest import run_cli

from .conftest import CAFFEINE, judge_reply


@pytest.mark.postgres
async def test_sessions_and_cards_on_postgresql(pg_url, checklist):
    settings = Settings.load()
    learner = f"pg-{uuid.uuid4().hex[:8]}"  # the database is shared by the test run
    store = Store(pg_url)
    try:
        script("judge", judge_reply(("adenosine", 0.95), ("tolerance", 0.75), feedback="two"))
        script("tutor", "ok")
        s = await ChecklistSession.start(checklist, store=store, settings=settings, learner=learner,
                                         tutor="scripted/tutor", judge="scripted/judge")
        await s.process_user_message("adenosine and upregulation")
        await s.finish()
    finally:
        store.close()
    again = Store(pg_url)
    try:
        script("judge", judge_reply())
        r = await ChecklistSession.resume(s.session_id, store=again, settings=settings)
        assert r.recalled_count == 2 and r.status == "ended" and len(r.visible_messages()) == 2
        cards = await r.scheduler.all_points(learner)
        assert len(cards) == 5 and {c.last_rating for c in cards} == {"Easy", "Good", "Again"}
        [ev] = await again.checklist_evaluations(s.session_id)
        assert ev.recalled == {"adenosine": 0.95, "tolerance": 0.75}
    finally:
        again.close()


def _responder(judge_text: str, tutor_text: str):
    def answer(payload: dict) -> Reply:
        return Reply(text=judge_text if payload["model"] == "x" else tutor_text)
    return answer


def _config(tmp_path, provider) -> None:
    (tmp_path / "jurist.yaml").write_text(
        f"providers:\n  fake:\n    type: openai\n    base_url: {provider.base_url}\n    api_key: test\n")


async def test_against_the_real_http_provider(provider, tmp_path, checklist):
    _config(tmp_path, provider)
    provider.default = _responder(judge_reply(("adenosine", 0.9), ("withdrawal", 0.7), feedback="HIDDEN-NOTE"),
                                  "What else do you remember?")
    store = Store(f"sqlite:///{tmp_path}/h.db")
    try:
        s = await ChecklistSession.start(checklist, store=store, settings=Settings.load(), tutor="fake/y",
                                         judge="fake/x")
        r = await s.process_user_message("It blocks adenosine; quitting gives headaches.")
        assert r.points_recalled_this_turn == ["adenosine", "withdrawal"] and r.response == "What else do you remember?"
        judge_req, tutor_req = (q["json"] for q in provider.requests)
        assert judge_req["model"] == "x" and judge_req["temperature"] == 0.3 and not judge_req.get("stream")
        assert judge_req["response_format"]["type"] == "json_schema"
        assert tutor_req["model"] == "y" and any("HIDDEN-NOTE" in m["content"] for m in tutor_req["messages"]
                                                 if m["role"] == "system")
        store.flush()
        assert {c["purpose"] for c in store.calls(limit=None, trace_id=s.session_id)} == {
            "checklist_batch", "checklist_tutor"}
    finally:
        store.close()


def _tutor_cli(*args: str, cwd, input: str):
    from jurist.cli.main import app

    if any(c.name == "tutor" for c in app.registered_commands):
        return run_cli("tutor", *args, cwd=cwd, input=input, timeout=120)
    # not wired into `jurist` yet: the same command on its own app
    code = ("import typer; from jurist.cli import tutor; app = typer.Typer(); tutor.register(app);\n"
            "@app.command('noop')\ndef noop(): pass\napp()")
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JURIST_JUDGE", "OPENAI", "ANTHROPIC"))}
    env["COLUMNS"] = "200"
    return subprocess.run([sys.executable, "-c", code, "tutor", *args], capture_output=True, text=True, cwd=cwd,
                          input=input, timeout=120, env=env)


def test_tutor_cli_in_a_subprocess(provider, tmp_path):
    _config(tmp_path, provider)
    provider.script(Reply(text=judge_reply(("adenosine", 0.95), feedback="HIDDEN-FEEDBACK-7")),
                    Reply(text="Nice. How long?"))
    provider.default = _responder(judge_reply(), "Tell me more.")
    out = _tutor_cli("--points", str(CAFFEINE), "--learner", "bo", "--judge", "fake/x", "--tutor", "fake/y",
                     cwd=tmp_path, input="It blocks adenosine receptors.\n\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert "tutor> Nice. How long?" in out.stdout
    assert "HIDDEN-FEEDBACK-7" not in out.stdout  # the hidden feedback is never shown
    # by default the learner sees the conversation only: no counts, no point ids
    assert "recalled" not in out.stdout and "adenosine" not in out.stdout
    sid = out.stdout.split("jurist tutor --session ")[1].split()[0]
    provider.script(Reply(text=judge_reply(("half_life", 0.8))), Reply(text="Good."))
    again = _tutor_cli("--session", sid, "--show-progress", cwd=tmp_path, input="About five hours.\n/end\n")
    assert again.returncode == 0, again.stderr
    assert "resuming session" in again.stdout and "1/5 recalled" in again.stdout
    assert "[2/5 recalled; this turn: half_life]" in again.stdout
    assert "session ended: 2/5" in again.stdout and "next review of withdrawal" in again.stdout


def test_tutor_cli_progress_says_when_a_message_was_not_judged(provider, tmp_path):
    _config(tmp_path, provider)
    provider.script(Reply(text="not json"), Reply(text="still not json"), Reply(text="Go on."))
    out = _tutor_cli("--points", str(CAFFEINE), "--judge", "fake/x", "--tutor", "fake/y", "--show-progress",
                     cwd=tmp_path, input="It blocks adenosine receptors.\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert "[0/5 recalled; this message was not judged: the judge's reply could not be parsed" in out.stdout


@pytest.mark.slow
def test_tutor_cli_progress_names_the_points_the_offline_judge_could_not_decide(provider, tmp_path):
    """The shipped offline judge puts the half-life point of this message inside its band
    (p(entails) 0.491 against 0.460 ± 0.035) and decides the adenosine point: recalled."""
    pytest.importorskip("tokenizers")
    _config(tmp_path, provider)
    provider.default = Reply(text="Go on.")
    out = _tutor_cli("--points", str(CAFFEINE), "--judge", "local/minilm", "--tutor", "fake/y",
                     "--show-progress", cwd=tmp_path,
                     input="Caffeine blocks adenosine receptors in the brain, so you don't feel sleepy. Its "
                           "half-life is about five hours in adults.\n/quit\n")
    assert "1/5 recalled; this turn: adenosine; the judge could not decide half_life: uncertain: " in out.stdout, (
        out.stdout + out.stderr)


def test_tutor_cli_hides_the_evaluation_at_the_end_too(provider, tmp_path):
    _config(tmp_path, provider)
    provider.script(Reply(text=judge_reply(("adenosine", 0.95))), Reply(text="Nice. How long?"))
    out = _tutor_cli("--points", str(CAFFEINE), "--judge", "fake/x", "--tutor", "fake/y", cwd=tmp_path,
                     input="It blocks adenosine receptors.\n/end\n")
    assert out.returncode == 0, out.stderr
    assert "tutor> Nice. How long?" in out.stdout and "session ended; next review 20" in out.stdout
    for shown in ("recalled", "adenosine", "withdrawal", "next review of", "Again", "Good"):
        assert shown not in out.stdout, shown


def test_tutor_cli_without_a_tutor_says_how(tmp_path):
    out = _tutor_cli("--points", str(CAFFEINE), cwd=tmp_path, input="")
    assert out.returncode == 2
    assert "no tutor model configured" in out.stderr and "--tutor" in out.stderr


def test_tutor_cli_bad_points_file(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"title": "x", "points": [{"id": "a"}]}))
    out = _tutor_cli("--points", str(tmp_path / "p.json"), "--tutor", "scripted/t", cwd=tmp_path, input="")
    assert out.returncode == 2 and "p.json" in out.stderr and "points[0]: missing field 'text'" in out.stderr
