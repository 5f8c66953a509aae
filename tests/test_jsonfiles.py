"""Reading and writing jurist's JSON files."""

import json

import pytest

from jurist.errors import InputError
from jurist.jsonfiles import read_json, write_json


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
