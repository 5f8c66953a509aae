import json

import pytest

from jurist.errors import InputError
from jurist.rubrics import load_rubrics

from tests.conftest import EXAMPLES


def write(tmp_path, data, name="r.json"):
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def rubric(**kw):
    base = {"id": "r1", "name": "Clarity", "description": "d", "scoring_criteria": "1-5", "weight": 1}
    base.update(kw)
    return base


def test_examples_load():
    rs = load_rubrics(EXAMPLES / "rubrics.json")
    assert [r.id for r in rs.rubrics] == ["mechanism", "safety", "practical"]
    assert all(r.item_based for r in rs.rubrics)
    free = load_rubrics(EXAMPLES / "rubrics_freeform.json")
    assert free.rubrics[0].scale == (1.0, 5.0)  # taken from the level mapping
    assert "3: The goal is reached" in free.rubrics[0].criteria_text()


def test_bare_list_and_default_scale(tmp_path):
    rs = load_rubrics(write(tmp_path, [rubric()]), default_scale=(0, 10))
    assert rs.scale == (0.0, 10.0) and rs.version == "1.0"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"rubrics": [{"name": "x", "scoring_criteria": "c"}]}, r"rubrics\[0\]: missing field 'id'"),
        ({"rubrics": [rubric(), rubric()]}, "duplicate rubric id"),
        ({"rubrics": [rubric(weight=0)]}, "rubric 'r1': weight: weight must be greater than 0"),
        ({"rubrics": [rubric(weight=-1)]}, "weight must be greater than 0"),
        ({"rubrics": [rubric(scoring_criteria="  ")]}, "scoring_criteria is empty"),
        ({"rubrics": [rubric(scoring_criteria={})]}, "scoring_criteria is empty"),
        ({"rubrics": [rubric(scoring_criteria={"low": "x"})]}, "keys must be score levels"),
        ({"rubrics": [rubric(name="")]}, "name"),
        ({"rubrics": []}, '"rubrics" is empty'),
        ({"items": []}, 'expected an object with a "rubrics" list'),
        ({"rubrics": [rubric(items=[{"id": "a", "text": "t", "points": 0}])]}, "points must not be 0"),
        ({"rubrics": [rubric(items=[{"id": "a", "text": "t", "points": -1}])]}, "at least one with positive points"),
        ({"rubrics": [rubric(items=[{"id": "a", "text": "t", "points": 1}, {"id": "a", "text": "u", "points": 1}])]},
         "duplicate item id"),
        ({"scale": [5, 1], "rubrics": [rubric()]}, "scale"),
    ],
)
def test_bad_rubrics_name_file_and_field(tmp_path, data, message):
    p = write(tmp_path, data)
    with pytest.raises(InputError, match=message) as info:
        load_rubrics(p)
    assert info.value.file == str(p)
    assert str(p) in str(info.value)


def test_invalid_json_reports_line(tmp_path):
    p = write(tmp_path, '{\n  "rubrics": [\n    {"id": "x",,}\n  ]\n}')
    with pytest.raises(InputError) as info:
        load_rubrics(p)
    assert info.value.line == 3


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="cannot read rubrics"):
        load_rubrics(tmp_path / "missing.json")


def test_a_misspelt_field_is_an_error_naming_the_line_and_the_closest_name(tmp_path):
    # written out so that the typo has a line of its own
    p = write(tmp_path, '{\n  "rubrics": [\n    {"id": "r1", "name": "Clarity", "scoring_criteria": "1-5",\n'
                        '     "weigth": 2}\n  ]\n}\n')
    with pytest.raises(InputError) as info:
        load_rubrics(p)
    assert str(info.value) == f"{p}:4: rubric 'r1': unknown field 'weigth' (did you mean 'weight'?)"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"rubrics": [rubric()], "scael": [1, 5]}, r"unknown field 'scael' \(did you mean 'scale'\?\)"),
        ({"rubrics": [rubric(items=[{"id": "a", "text": "t", "pionts": 1}])]},
         r"rubric 'r1': items\[0\]: unknown field 'pionts' \(did you mean 'points'\?\)"),
        ({"rubrics": [rubric(colour="red")]}, r"rubric 'r1': unknown field 'colour' \(fields: id, name, "),
    ],
)
def test_unknown_fields_anywhere_are_errors(tmp_path, data, message):
    with pytest.raises(InputError, match=message):
        load_rubrics(write(tmp_path, data))


@pytest.mark.parametrize(
    "data, where",
    [
        ({"rubrics": [rubric(weight=True)]}, "rubric 'r1': weight"),
        ({"rubrics": [rubric(weight=False)]}, "rubric 'r1': weight"),
        ({"rubrics": [rubric(items=[{"id": "a", "text": "t", "points": True}])]}, r"rubric 'r1': items\[0\].points"),
        ({"scale": [False, 5], "rubrics": [rubric()]}, r"scale\[0\]"),
        ({"require_calibration": {"min_kappa": True}, "rubrics": [rubric()]}, r"require_calibration.min_kappa"),
    ],
)
def test_booleans_are_not_numbers(tmp_path, data, where):
    with pytest.raises(InputError, match=f"{where}: expected a number, got (true|false)"):
        load_rubrics(write(tmp_path, data))


def test_metadata_is_free(tmp_path):
    rs = load_rubrics(write(tmp_path, {"metadata": {"owner": "ana"},
                                       "rubrics": [rubric(metadata={"source": "HealthBench", "n": 3})]}))
    assert rs.rubrics[0].weight == 1.0 and rs.rubrics[0].metadata == {"source": "HealthBench", "n": 3}
