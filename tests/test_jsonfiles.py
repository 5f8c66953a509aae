"""Reading and writing jurist's JSON files."""

import json

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jurist.errors import InputError
from jurist.jsonfiles import (Number, Whole, did_you_mean, error_problem, key_line, known_fields, line_problem,
                              read_json, unknown_name, validation_problems, write_json)


def test_write_json_writes_what_json_dumps_with_indent_writes(tmp_path):
    data = {
        "session_id": "s-é-中",
        "score": 4.0, "percentage": 83.33333333333334, "count": 3, "none": None, "ok": True,
        "nested": {"list": [1, 2.5, "three", {"deep": []}], "empty": {}},
        "text": 'quote " backslash \\ newline \n tab \t control \x01',
    }
    path = tmp_path / "r.json"
    write_json(path, data)
    assert path.read_text(encoding="utf-8") == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    assert not (tmp_path / "r.json.tmp").exists()
    assert read_json(path, "a result") == data


def test_read_json_names_the_file_and_line_of_bad_json(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "a": 1,\n  oops\n}\n')
    with pytest.raises(InputError, match="not valid JSON") as info:
        read_json(bad, "a rubric set")
    assert "bad.json" in str(info.value)
    with pytest.raises(InputError, match="cannot read"):
        read_json(tmp_path / "missing.json", "a rubric set")


# -- strict inputs: one wording for every format's validation errors ----------------------------


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")

    points: Number
    count: Whole = 1


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    items: list[_Item] | None = None
    by_name: dict[str, _Item] = {}
    fail_action: str = Field(default="continue", alias="failAction")


def _error(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        _Doc.model_validate(data)
    return info.value


def test_did_you_mean_finds_typos_and_shortened_names():
    assert did_you_mean("contnet", ["role", "content", "name"]) == "content"
    assert did_you_mean("intent", ["intent_alignment", "query_coverage"]) == "intent_alignment"
    assert did_you_mean("colour", ["role", "content"]) is None
    assert unknown_name("colour", ["role", "content"]) == "unknown field 'colour' (fields: role, content)"
    assert unknown_name("rubric_nme", ["rubric_name"], "placeholder", "{{{}}}") == (
        "unknown placeholder {rubric_nme} (did you mean {rubric_name}?)")


def test_known_fields_follow_lists_dicts_optionals_and_aliases():
    assert known_fields(_Doc, []) == ["items", "by_name", "failAction"]
    assert known_fields(_Doc, ["items", 0]) == ["points", "count"]
    assert known_fields(_Doc, ["by_name", "x"]) == ["points", "count"]
    assert known_fields(_Doc, ["nowhere"]) == []


def test_problems_name_the_place_the_field_and_the_field_meant():
    assert error_problem(_error({"failaction": "x"}).errors()[0], _Doc) == (
        "unknown field 'failaction' (did you mean 'failAction'?)")
    assert validation_problems(_error({"items": [{"points": 1, "cuont": 2}]}), _Doc) == [
        "items[0]: unknown field 'cuont' (did you mean 'count'?)"]
    # the typo is the problem: the field it misses is not reported as well
    assert validation_problems(_error({"by_name": {"a": {"pionts": 1}}}), _Doc) == [
        "by_name.a: unknown field 'pionts' (did you mean 'points'?)"]
    assert line_problem(_error({"by_name": {"a": {"pionts": 1}}}), _Doc, "doc") == (
        "by_name.a: unknown field 'pionts' (did you mean 'points'?)")
    assert validation_problems(_error({"items": [{}]}), _Doc, ["top"]) == ["top.items[0]: missing field 'points'"]


@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_not_numbers(value):
    problems = validation_problems(_error({"items": [{"points": value, "count": value}]}), _Doc)
    word = str(value).lower()
    assert problems == [f"items[0].points: expected a number, got {word} (booleans are not numbers)",
                        f"items[0].count: expected a number, got {word} (booleans are not numbers)"]
    assert _Item.model_validate({"points": "2.5", "count": "3"}).count == 3  # numbers as text are still read


def test_key_line_finds_a_key_written_once():
    text = '{\n  "rubrics": [\n    {"weigth": 2,\n     "note": "a \\"weigth\\": in text"}\n  ]\n}\n'
    assert key_line(text, "weigth") == 3
    assert key_line("a: 1\nb:\n  judg: x\n", "judg") == 3
    assert key_line('{"a": 1, "a": 2}', "a") is None  # written twice: no one line
    assert key_line("{}", "a") is None
