"""The research export, the stored research records, the API's answer and a panel's
``to_json()`` keep the shapes they had before the record layer changed (files in
data/golden/, see tests/golden.py)."""

from tests.golden import compare
from tests.research.golden import DATA, produce_panel, produce_research


def test_research_export_and_records_keep_their_documented_shape() -> None:
    compare(produce_research(), DATA / "research.json")


def test_panel_result_json_keeps_its_shape() -> None:
    compare(produce_panel(), DATA / "panel.json")
