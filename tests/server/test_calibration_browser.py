"""The calibration page in Debian's chromium: the κ of the headers stays a κ and says which κ it is."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.judges.calibration import JudgeIdentity
from jurist.server import create_app
from jurist.store import Store
from tests.calibrations import store_calibration
from tests.server.live import running
from tests.server.test_browser import page  # noqa: F401  (a fixture: Debian's chromium, nothing leaves the machine)
from tests.server.test_labels import ANA, BEN, _seed

KAPPA, CAPITAL_KAPPA = "κ", "Κ"  # U+03BA, U+039A (what text-transform: uppercase makes of κ)


@pytest.fixture
def labelled(tmp_path: Path) -> Iterator[Store]:
    """A store with scored sessions, people's labels and a stored calibration (made before any
    browser starts: Playwright's sync API holds an event loop)."""
    store = Store(f"sqlite:///{tmp_path / 'cal.db'}")
    ids = _seed(store)
    store_calibration(store, JudgeIdentity("openai/m", "rubric_judge", "abc123", "helpful"), 0.72)
    with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as c:
        for who, labels in (("ana", ANA), ("ben", BEN)):
            for sid, value in labels.items():
                r = c.post("/api/evaluation/labels", json={"evaluation_id": ids[sid], "rubric": "helpful",
                                                           "score": value, "annotator": who})
                assert r.status_code == 201, r.text
    try:
        yield store
    finally:
        store.close()


def test_the_stored_calibrations_name_their_kappa(labelled: Store):
    with TestClient(create_app(Settings(), store=labelled), base_url="http://localhost") as c:
        html = c.get("/evaluation/calibration").text
    header = html.split('id="stored-calibrations"', 1)[1].split("</thead>", 1)[0]
    assert f'Cohen&#39;s <span class="symbol">{KAPPA}</span> (quadratic)' in header or \
        f"Cohen's <span class=\"symbol\">{KAPPA}</span> (quadratic)" in header, header
    assert "pass/fail labels the same as plain Cohen" in header


def test_kappa_is_not_upper_cased_in_a_browser(labelled: Store, page):  # noqa: F811
    """Headers are upper-cased by CSS; κ upper-cased is Κ, read as a K."""
    with running(create_app(Settings(), store=labelled)) as base:
        page.goto(f"{base}/evaluation/calibration")
        headers = page.locator("#stored-calibrations th").all_inner_texts()  # as shown: after the CSS
        shown = page.locator("main").inner_text()
    assert any(KAPPA in h and "QUADRATIC" in h for h in headers), headers
    assert CAPITAL_KAPPA not in shown and KAPPA in shown
