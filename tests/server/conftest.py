"""Fixtures for the server tests: a checklist folder and an app on fakes; the proxy on the real gate, live."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.models import script
from jurist.server import create_app
from tests.server.fakes import FakeFactory
from tests.server.live import running
from tests.server.test_proxy import PASS

#: The gate of the Responses and Messages API tests: the quality evaluator, judged by scripted/judge.
API_GATE = {"evaluate_feedback_enabled": True, "judge": "scripted/judge", "evaluator": "quality"}

POINTS = {
    "title": "Caffeine <b>basics</b>",
    "points": [
        {"id": "adenosine", "text": "Caffeine blocks adenosine receptors."},
        {"id": "half-life", "text": "Its half-life is about five hours."},
        {"id": "tolerance", "text": "Regular use builds tolerance."},
    ],
}


@pytest.fixture
def checklist_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "checklists"
    folder.mkdir()
    (folder / "caffeine.json").write_text(json.dumps(POINTS))
    (folder / "broken.json").write_text("{not json")
    return folder


@pytest.fixture
def factory() -> FakeFactory:
    return FakeFactory()


@pytest.fixture
def client(checklist_dir: Path, factory: FakeFactory):
    """The app with the tutor's progress shown (the operator's choice; off by default)."""
    app = create_app(Settings(tutor_progress=True), checklist_dirs=[checklist_dir], session_factory=factory)
    with TestClient(app, base_url="http://localhost") as c:
        yield c


@pytest.fixture
def quiet_client(checklist_dir: Path, factory: FakeFactory):
    """The app as it starts by default: the tutor shows the learner the conversation only."""
    app = create_app(Settings(), checklist_dirs=[checklist_dir], session_factory=factory)
    with TestClient(app, base_url="http://localhost") as c:
        yield c


@pytest.fixture
def api_proxy(provider, isolated: Path) -> Iterator[str]:
    """The proxy on the real gate (:data:`API_GATE`; the judge passes unless a test scripts it) in front
    of ``provider``, served on 127.0.0.1: its base URL."""
    script("judge", default=PASS)
    app = create_app(Settings(home=str(isolated / ".jurist")), upstream=provider.base_url, gate_config=API_GATE)
    with running(app) as base:
        yield base
