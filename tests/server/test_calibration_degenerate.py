"""The dashboard's calibration page says a stored fit is degenerate instead of showing its threshold."""

from __future__ import annotations

from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.server import create_app
from jurist.store import Store
from jurist.store.calibrations import list_calibrations, save_calibrations
from jurist.judges.calibration import JudgeIdentity
from tests.calibrations import store_calibration

REASON = ("threshold 0 is degenerate: it is at the bottom of the scale (0-1), so every item passes; Cohen's κ at it "
          "is 0.000, no better than chance")


def test_a_degenerate_stored_fit_is_listed_as_no_threshold(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'cal.db'}")
    try:
        cal = store_calibration(store, JudgeIdentity("local/minilm", "gate_quality", "abc", "quality"), 0.0)
        [row] = store.read(list_calibrations)
        degenerate = row.model_copy(update={
            "id": "degenerate-fit", "threshold_fit": "agreement", "threshold_agreement": 0.5625,
            "figures": {"threshold": {"threshold": 0.0, "fit": "agreement", "degenerate": REASON}}})
        store.write(save_calibrations, [degenerate])
        with TestClient(create_app(Settings(), store=store), base_url="http://localhost") as client:
            page = client.get("/evaluation/calibration").text
            listed_api = {c["id"]: c for c in client.get("/api/evaluation/calibrations").json()}
    finally:
        store.close()
    listed = page[page.index('data-calibration="degenerate-fit"'):]
    listed = listed[:listed.index("</tr>")]
    assert '<span class="degenerate">none: threshold 0 is degenerate: it is at the bottom of the scale' in listed
    assert "≥ 0" not in listed
    other = page[page.index(f'data-calibration="{cal}"'):]
    assert "degenerate" not in other[:other.index("</tr>")]
    assert listed_api["degenerate-fit"]["threshold"] is None
    assert listed_api["degenerate-fit"]["threshold_degenerate"] == REASON
    assert listed_api[cal]["threshold_degenerate"] is None
