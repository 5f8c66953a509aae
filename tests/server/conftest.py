"""Fixtures for the server tests: a checklist folder and an app on fakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.server import create_app
from tests.server.fakes import FakeFactory

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
