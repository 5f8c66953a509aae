"""Dataset files: strict reading (file:line, did-you-mean), versions by content, add/list/show/export."""

import json

import pytest
from typer.testing import CliRunner

from jurist.cli.main import app
from jurist.errors import InputError
from jurist.experiments.datasets import content_version, items_jsonl, read_dataset, session_of
from jurist.store import Store

ITEMS = [
    {"id": "q1", "input": "What is the capital of France?", "expected": "Paris"},
    {"id": "q2", "input": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2 + 2?"}],
     "expected": ["4", "four"], "metadata": {"topic": "math"}},
    {"id": 3, "input": "Say hello."},
]


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def invoke(*args):
    return CliRunner().invoke(app, list(args), prog_name="jurist", env={"COLUMNS": "300"})


def test_jsonl_items_are_read_with_their_messages_expected_answers_and_metadata(tmp_path):
    ds = read_dataset(write_jsonl(tmp_path / "d.jsonl", ITEMS))
    assert [i.id for i in ds.items] == ["q1", "q2", "3"]
    assert ds.items[1].expected_answers == ("4", "four") and ds.items[1].metadata == {"topic": "math"}
    session = session_of(ds.items[1], [{"role": "assistant", "content": "4"}])
    assert [m.role for m in session.messages] == ["system", "user", "assistant"]
    assert session.expected == ("4", "four") and session.session_id == "q2"


def test_csv_and_jsonl_of_the_same_items_are_the_same_version(tmp_path):
    jsonl = write_jsonl(tmp_path / "d.jsonl", [ITEMS[0], {"id": "q3", "input": "Hi", "metadata": {"a": 1}}])
    csv = tmp_path / "d.csv"
    csv.write_text('id,input,expected,metadata\nq1,"What is the capital of France?",Paris,\nq3,Hi,,"{""a"": 1}"\n',
                   encoding="utf-8")
    assert read_dataset(jsonl).version == read_dataset(csv).version


def test_a_changed_item_is_a_new_version_and_export_reads_back_the_same(tmp_path):
    ds = read_dataset(write_jsonl(tmp_path / "d.jsonl", ITEMS))
    changed = read_dataset(write_jsonl(tmp_path / "e.jsonl", [ITEMS[0], ITEMS[1], {"id": 3, "input": "Say hi."}]))
    assert ds.version != changed.version
    again = tmp_path / "again.jsonl"
    again.write_text("".join(items_jsonl(ds.items)), encoding="utf-8")
    assert read_dataset(again).version == ds.version == content_version(ds.items)


@pytest.mark.parametrize("rows, line, says", [
    ([ITEMS[0], {"id": "q2", "inptu": "x"}], 2, "unknown field 'inptu' (did you mean 'input'?)"),
    ([ITEMS[0], {"id": "q2", "input": "x", "expcted": "y"}], 2, "did you mean 'expected'?"),
    ([ITEMS[0], {"id": "q1", "input": "again"}], 2, "duplicate id 'q1': line 1 has it too"),
    ([{"id": "q1"}], 1, "the item has no input"),
    ([{"id": "q1", "input": "x", "expected": 4}], 1, "expected must be text or a list of texts"),
    ([{"id": "q1", "input": "x", "expected": ["a", 4]}], 1, "expected must be text or a list of texts"),
    ([{"id": "q1", "input": "x", "expected": []}], 1, "expected is an empty list"),
    ([{"id": "q1", "input": ""}], 1, "input is empty"),
    ([{"id": True, "input": "x"}], 1, "id"),
    ([{"id": "q1", "input": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}], 1,
     "the input's last message is a assistant turn"),
    ([{"id": "q1", "input": [{"role": "usr", "content": "a"}]}], 1, "input message 1: role 'usr'"),
    ([{"id": "q1", "input": [{"role": "user", "contnet": "a"}]}], 1, "did you mean 'content'?"),
    (["{not json"], 1, "not valid JSON"),
    ([{"id": "q1", "input": "x", "metadata": "m"}], 1, "metadata"),
])
def test_bad_items_name_the_file_and_the_line(tmp_path, rows, line, says):
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(InputError) as err:
        read_dataset(path)
    assert err.value.file == str(path) and err.value.line == line, str(err.value)
    assert says in str(err.value)


@pytest.mark.parametrize("text, line, says", [
    ("id,question\nq1,x\n", 1, "wrong CSV header: unknown column 'question'"),
    ("id,inpt\nq1,x\n", 1, "(did you mean 'input'?)"),
    ("id,expected\nq1,x\n", 1, "missing: input"),
    ("id,input,input\nq1,x,y\n", 1, "twice"),
    ("id,input\nq1,x\nq2\n", 3, "the row has 1 cells; the header has 2"),
    ('id,input\nq1,"multi\nline"\nq1,y\n', 4, "duplicate id 'q1': line 2 has it too"),
    ("id,input,metadata\nq1,x,{oops\n", 2, "metadata is not a JSON object"),
])
def test_bad_csv_files_name_the_line(tmp_path, text, line, says):
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        read_dataset(path)
    assert err.value.line == line and says in str(err.value), str(err.value)


def test_other_files_and_empty_ones_are_refused(tmp_path):
    (tmp_path / "d.json").write_text("[]")
    with pytest.raises(InputError, match=r"\.jsonl .* or \.csv"):
        read_dataset(tmp_path / "d.json")
    (tmp_path / "e.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no items"):
        read_dataset(tmp_path / "e.jsonl")


def test_add_list_show_export_through_the_command(tmp_path):
    data = write_jsonl(tmp_path / "qa.jsonl", ITEMS)
    added = invoke("datasets", "add", "qa", str(data))
    assert added.exit_code == 0, added.output
    assert "3 items, added as version 1" in added.output
    again = invoke("datasets", "add", "qa", str(data))
    assert "unchanged: the same content as version 1" in again.output
    write_jsonl(data, ITEMS[:2])
    second = invoke("datasets", "add", "qa", str(data))
    assert "2 items, added as version 2" in second.output
    listed = invoke("datasets", "list", "--json")
    versions = [json.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    assert [(v["number"], v["items"]) for v in versions] == [(1, 3), (2, 2)]
    shown = invoke("datasets", "show", "qa", "--version", "1", "--json")
    assert [i["id"] for i in json.loads(shown.stdout.splitlines()[-1])["items"]] == ["q1", "q2", "3"]
    out = tmp_path / "export.jsonl"
    exported = invoke("datasets", "export", "qa", "--version", versions[0]["dataset_version"], "-o", str(out))
    assert exported.exit_code == 0, exported.output
    assert read_dataset(out).version == versions[0]["dataset_version"]


def test_bad_files_and_unknown_names_exit_2_with_the_place(tmp_path):
    bad = write_jsonl(tmp_path / "bad.jsonl", [ITEMS[0], {"id": "q1", "input": "dup"}])
    result = invoke("datasets", "add", "qa", str(bad))
    assert result.exit_code == 2 and f"{bad}:2: duplicate id 'q1'" in result.output
    assert invoke("datasets", "add", "bad name", str(bad)).exit_code == 2
    missing = invoke("datasets", "show", "nope")
    assert missing.exit_code == 2 and "no dataset 'nope'" in missing.output
    with Store(f"sqlite:///{tmp_path}/.jurist/jurist.db") as store:
        assert store.dataset_versions() == []  # nothing stored from the bad file
