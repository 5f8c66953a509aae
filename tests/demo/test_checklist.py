"""The offline checklist demo."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from jurist.demo.checklist import run_checklist_demo
from jurist.config import Settings
from jurist.store import Store


@pytest.mark.slow
async def test_demo_runs_offline_and_completes(tmp_path):
    pytest.importorskip("tokenizers")
    out = io.StringIO()
    settings = Settings.load()
    code = await run_checklist_demo(Console(file=out, width=160), settings, tmp_path / "demo")
    text = out.getvalue()
    assert code == 0, text
    assert "recalled this turn: none  (0/5)" in text
    assert text.count(" due ") == 5 and "What can you tell me about" in text
    completed = "completed, 5/5" in text
    if not completed:  # the offline judge could not decide on a point: the demo says so, with the reason
        said = ("the judge gave no verdict: uncertain:" in text
                or "the judge could not decide tolerance (still unchecked): uncertain:" in text)
        assert said and "ended, 4/5 points recalled" in text, text
    store = Store(settings.database)
    try:
        [session] = await store.checklist_sessions(learner="demo-learner")
        assert session.status == ("completed" if completed else "ended")
    finally:
        store.close()
