"""Labels files: loaded and validated like every input, problems named by file and line."""

from __future__ import annotations

import json

import pytest

from jurist.analysis import labels as labels_mod
from jurist.analysis.labels import load_labels
from jurist.errors import InputError
from tests.conftest import EXAMPLES


def _write(tmp_path, *lines: str):
    p = tmp_path / "labels.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


GOOD = json.dumps({"item": "s1", "rubric": "mechanism", "label": 4, "annotator": "ana"})


def test_the_shipped_example_labels_load():
    ls = load_labels(EXAMPLES / "labels" / "labels.jsonl")
    assert len({lab.item for lab in ls.labels}) == 12
    assert {lab.annotator for lab in ls.labels} == {"ana", "ben"}
    assert {lab.rubric for lab in ls.labels} == {"mechanism", "safety", "practical"}
    assert len(ls.labels) == 72 and ls.lines[0] == 1


def test_several_annotators_notes_pass_fail_comments_and_blank_lines(tmp_path):
    p = _write(tmp_path, "# two people", GOOD, "",
               json.dumps({"item": "s1", "rubric": "mechanism", "label": 3, "annotator": "ben", "note": "thin"}),
               json.dumps({"item": "s2", "rubric": "safety", "label": False, "annotator": "ana"}))
    ls = load_labels(p)
    assert [lab.annotator for lab in ls.labels] == ["ana", "ben", "ana"]
    assert ls.lines == [2, 4, 5]
    assert ls.labels[1].note == "thin" and not ls.labels[1].is_pass_fail
    assert ls.labels[2].is_pass_fail and ls.labels[2].label is False
    assert ls.where(2) == (str(p), 5)


@pytest.mark.parametrize("line,message", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "each line must be a JSON object"),
    ('{"item": "s1", "rubric": "mechanism", "annotator": "ana"}', "missing field 'label'"),
    ('{"item": "s1", "rubric": "mechanism", "label": 3, "annotator": "ana", "colour": "red"}', "unknown field 'colour'"),
    ('{"item": "s1", "rubric": "mechanism", "label": 3, "anotator": "ana"}',
     "unknown field 'anotator' (did you mean 'annotator'?)"),
    ('{"item": "s1", "rubric": "mechanism", "label": 3, "annotator": "ana", "nots": "x"}',
     "unknown field 'nots' (did you mean 'note'?)"),
    ('{"item": "s1", "rubric": "mechanism", "label": "good", "annotator": "ana"}', "label"),
    ('{"item": "s 1", "rubric": "mechanism", "label": 3, "annotator": "ana"}', "item"),
    ('{"item": "s1", "rubric": "mechanism", "label": 3, "annotator": ""}', "annotator"),
])
def test_a_bad_line_names_file_and_line(tmp_path, line, message):
    p = _write(tmp_path, GOOD, line)
    with pytest.raises(InputError) as exc:
        load_labels(p)
    assert exc.value.file == str(p) and exc.value.line == 2
    assert message in str(exc.value) and str(exc.value).startswith(f"{p}:2: ")


def test_one_annotator_labels_an_item_and_rubric_once(tmp_path):
    p = _write(tmp_path, GOOD, GOOD)
    with pytest.raises(InputError, match=r":2: 'ana' already labelled item 's1' for rubric 'mechanism' on line 1"):
        load_labels(p)


def test_empty_missing_oversized_files_and_long_lines(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="no labels"):
        load_labels(_write(tmp_path, "# nothing yet"))
    with pytest.raises(InputError, match="cannot read labels"):
        load_labels(tmp_path / "absent.jsonl")
    p = _write(tmp_path, GOOD, json.dumps({"item": "s1", "rubric": "safety", "label": 2, "annotator": "x" * 100}))
    monkeypatch.setattr(labels_mod, "MAX_LINE_CHARS", 100)
    with pytest.raises(InputError, match=r":2: line longer than 100 characters"):
        load_labels(p)
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"item": "s\xe9"}\n')
    with pytest.raises(InputError, match="not UTF-8"):
        load_labels(bad)
    monkeypatch.setattr(labels_mod, "MAX_LABELS_BYTES", 10)
    with pytest.raises(InputError, match="larger than 10 bytes"):
        load_labels(p)
