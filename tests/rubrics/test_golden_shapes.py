"""result.json, summary.json, the stored rubric payload and the API's answer keep the shapes
they had before the record layer changed (files in data/golden/, see tests/golden.py)."""

from tests.golden import compare
from tests.rubrics.golden import GOLDEN, produce


def test_rubric_files_keep_their_documented_shape() -> None:
    compare(produce(), GOLDEN)
