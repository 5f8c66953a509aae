"""The checklist's stored turns, API traces and socket frames keep their JSON (see tests/checklist/golden.py)."""

from __future__ import annotations

from tests.checklist.golden import GOLDEN, produce
from tests.golden import compare


def test_checklist_session_output_matches_the_golden_file():
    compare(produce(), GOLDEN)
