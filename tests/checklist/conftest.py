"""Helpers for the checklist tests: a store, settings and the caffeine checklist."""

from __future__ import annotations

import json

import pytest

from jurist.checklist import load_checklist
from jurist.config import Settings
from jurist.store import Store
from tests.conftest import EXAMPLES

CAFFEINE = EXAMPLES / "checklists" / "caffeine.json"


def judge_reply(*recalled: tuple[str, float], feedback: str = "") -> str:
    return json.dumps({"recalledPoints": [{"id": i, "confidence": c, "observation": f"said {i}"} for i, c in recalled],
                       "feedback": feedback})


@pytest.fixture
def checklist():
    return load_checklist(CAFFEINE)


@pytest.fixture
def settings(tmp_path):
    return Settings.load()


@pytest.fixture
def store(tmp_path):
    s = Store(f"sqlite:///{tmp_path}/c.db")
    yield s
    s.close()
