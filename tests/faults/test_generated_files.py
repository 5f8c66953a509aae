"""Every reader of a user's file, fed generated bad files: it loads the file, or raises jurist's
typed error (a :class:`~jurist.errors.JuristError`) whose message names the file. Never another
exception: no RecursionError, UnicodeDecodeError, ValueError or OverflowError out of a reader,
and so no traceback from the command that reads it (a few cases run through ``jurist`` itself:
exit 2, the file named, no traceback).

The files are the bundled examples changed by :mod:`tests.faults.generated` (a wrong type, a
boolean or a huge number, an unknown field, a lone surrogate in any place), random bytes, invalid
UTF-8, deep nesting, and a fixed case nested 100,000 deep for each reader.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from jurist.analysis.answers import load_answers
from jurist.analysis.calibrate_panel import load_research_items
from jurist.analysis.labels import load_labels
from jurist.checklist.points import load_checklist
from jurist.config import Settings
from jurist.errors import JuristError
from jurist.judges.templates import from_file
from jurist.research.config import load_research_config
from jurist.rubrics.models import load_rubrics
from jurist.rubrics.sessions import load_session

from tests.conftest import run_cli
from tests.faults.generated import (DEEP, PROPERTY, Raw, at, characters, dump, json_file, jsonl_file, mutated,
                                    nested, places, replaced, splice_bytes)

EXAMPLES = Path(__file__).resolve().parents[2] / "src" / "jurist" / "examples"


def _json(name: str) -> Any:
    return json.loads((EXAMPLES / name).read_text(encoding="utf-8"))


def _jsonl(name: str) -> list[Any]:
    return [json.loads(line) for line in (EXAMPLES / name).read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def _yaml(name: str) -> Any:
    return yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))


SETTINGS_EXAMPLE = {"judge": "openai/gpt-4o-mini", "timeout": 30, "max_retries": 2, "cache": True,
                    "score_scale": [1, 5], "aliases": {"fast": "openai/gpt-4o-mini"},
                    "providers": {"local": {"type": "openai", "base_url": "http://127.0.0.1:8080/v1"}},
                    "allowed_hosts": ["example.org"], "max_body_bytes": 4096}


class Reader:
    """A public reader of one kind of file: its loader, the file's suffix and a valid example's value."""

    def __init__(self, name: str, suffix: str, load: Callable[[Path], object], example: Any, lines: bool = False):
        self.name, self.suffix, self.load, self.example, self.lines = name, suffix, load, example, lines

    def __repr__(self) -> str:
        return self.name

    def files(self) -> st.SearchStrategy[bytes]:
        if self.lines:
            return jsonl_file(self.example)
        if self.suffix == ".yaml":  # JSON text is YAML; block-style YAML too
            return st.one_of(json_file(self.example), mutated(self.example).map(_block_yaml))
        return json_file(self.example)


def _block_yaml(value: Any) -> bytes:
    """A value as block-style YAML (what a person writes), where YAML can write it."""
    try:
        return yaml.safe_dump(value, allow_unicode=True).encode("utf-8", "surrogatepass")
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return b"judge: [unclosed\n"


JSON_READERS = [
    Reader("rubrics", ".json", load_rubrics, _json("rubrics.json")),
    Reader("checklist", ".json", load_checklist, _json("checklists/caffeine.json")),
    Reader("session", ".jsonl", load_session, _jsonl("sessions/s1.jsonl"), lines=True),
    Reader("labels", ".jsonl", load_labels, _jsonl("labels/labels.jsonl")[:6], lines=True),
    Reader("answers", ".jsonl", load_answers, _jsonl("pairwise/brief.jsonl"), lines=True),
    Reader("research items", ".jsonl", lambda p: load_research_items(p, "answer"),
           _jsonl("labels/research/answer_items.jsonl")[:2], lines=True),
    Reader("research settings", ".yaml", load_research_config, _yaml("research/research.yaml")),
    Reader("jurist.yaml", ".yaml", Settings.load, SETTINGS_EXAMPLE),
]
TEMPLATE = Reader("template", ".txt", from_file, None)


def loads_or_names_the_file(reader: Reader, path: Path) -> None:
    """The property: the reader returns, or raises a JuristError naming ``path``; anything else
    (another exception) fails the test with its traceback."""
    try:
        reader.load(path)
    except JuristError as exc:
        assert str(path) in str(exc), f"{reader.name}: the error does not name the file: {exc}"


@pytest.mark.parametrize("reader", JSON_READERS, ids=repr)
def test_a_generated_bad_file_loads_or_is_a_typed_error_naming_it(reader, tmp_path):
    path = tmp_path / f"generated{reader.suffix}"

    @PROPERTY
    @given(reader.files())
    def check(data: bytes) -> None:
        path.write_bytes(data)
        loads_or_names_the_file(reader, path)

    check()


@pytest.mark.parametrize("reader", [*JSON_READERS, TEMPLATE], ids=repr)
@pytest.mark.parametrize("shape", ["arrays", "objects"])
def test_a_file_nested_100000_deep_is_a_typed_error_naming_it(reader, shape, tmp_path):
    path = tmp_path / f"deep{reader.suffix}"
    deep = nested(DEEP, objects=shape == "objects")
    if reader.lines:  # a line of the file holds it where a text goes
        first = dict(reader.example[0])
        key = next(k for k, v in first.items() if isinstance(v, str))
        deep = json.dumps({**first, key: "X"}).replace('"X"', deep)
    elif reader is TEMPLATE:
        deep = "{chat_session} " + deep
    path.write_text(deep + "\n", encoding="utf-8")
    loads_or_names_the_file(reader, path)


@pytest.mark.parametrize("reader", JSON_READERS, ids=repr)
@pytest.mark.parametrize("number", ["9" * 5000, "1e400", "-" + "9" * 400, "NaN", "true"])
def test_a_number_no_reader_can_hold_is_read_or_a_typed_error_naming_it(reader, number, tmp_path):
    """In the first place of the example that holds text (a wrong type, and a number to trip on)."""
    path = tmp_path / f"number{reader.suffix}"
    lines = reader.example if reader.lines else [reader.example]
    place = next(p for p in places(lines[0]) if isinstance(at(lines[0], p), str))
    lines = [replaced(lines[0], place, Raw(number)), *lines[1:]]
    path.write_text("\n".join(dump(v) for v in lines) + "\n")
    loads_or_names_the_file(reader, path)


#: What each field of a file is swapped for, one field at a time.
SWAPS = [Raw("1e400"), Raw("-Infinity"), Raw("NaN"), Raw("9" * 5000), Raw("-" + "9" * 400), "a\ud800b", "\udcff",
         "a\x00b", True, None, {}, [], Raw(nested(200)), {"unknown": 1}]


@pytest.mark.parametrize("reader", JSON_READERS, ids=repr)
def test_every_field_of_a_file_swapped_for_each_bad_value_loads_or_names_the_file(reader, tmp_path):
    path = tmp_path / f"swapped{reader.suffix}"
    lines = reader.example[:2] if reader.lines else [reader.example]
    for n, line in enumerate(lines):
        for place in places(line):
            for bad in SWAPS:
                changed = [replaced(v, place, bad) if i == n else v for i, v in enumerate(lines)]
                path.write_text("\n".join(dump(v) for v in changed) + "\n")
                loads_or_names_the_file(reader, path)


TEMPLATE_TEXT = "Judge {rubric_name}.\n{rubric_description}\n<chat_session>\n{chat_session}\n</chat_session>\n"


@PROPERTY
@given(st.one_of(
    st.text(characters, max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),  # surrogates: not UTF-8
    st.binary(max_size=200),
    st.integers(0, 2**32).map(lambda seed: splice_bytes(TEMPLATE_TEXT.encode(), seed)),
    st.text(st.sampled_from("{}!:.[]0a_ \n"), max_size=40).map(str.encode),  # braces every which way
))
def test_a_generated_template_file_loads_or_is_a_typed_error_naming_it(tmp_path, data):
    path = tmp_path / "template.txt"
    path.write_bytes(data)
    loads_or_names_the_file(TEMPLATE, path)


# -- through the command ---------------------------------------------------------------------

FREE = str(EXAMPLES / "rubrics_freeform.json")
S1 = str(EXAMPLES / "sessions" / "s1.jsonl")


def _refused(r, path: Path) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert path.name in r.stderr, r.stderr


def test_the_command_refuses_deep_rubrics_a_deep_session_and_a_template_not_utf8(tmp_path):
    env = {"JURIST_HOME": str(tmp_path / ".jurist"), "JURIST_JUDGE": "openai/gpt-4o-mini",
           "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "k"}  # never called
    rubrics = tmp_path / "deep_rubrics.json"
    rubrics.write_text(nested(DEEP, objects=True))
    _refused(run_cli("evaluate", "--rubrics", str(rubrics), "--session", S1, env=env, cwd=tmp_path), rubrics)

    session = tmp_path / "deep_session.jsonl"
    session.write_text('{"role": "user", "content": ' + nested(DEEP) + "}\n")
    _refused(run_cli("evaluate", "--rubrics", FREE, "--session", str(session), env=env, cwd=tmp_path), session)

    template = tmp_path / "latin1_template.txt"
    template.write_bytes("Évaluez {rubric_name} : {chat_session}".encode("latin-1"))
    _refused(run_cli("evaluate", "--rubrics", FREE, "--session", S1, "--template", str(template), env=env,
                     cwd=tmp_path), template)


def test_the_command_refuses_a_jurist_yaml_not_utf8_or_nested_deep(tmp_path):
    config = tmp_path / "jurist.yaml"
    for data in ("judge: café\n".encode("latin-1"), nested(DEEP).encode(), b"timeout: " + b"9" * 5000 + b"\n"):
        config.write_bytes(data)
        _refused(run_cli("logs", env={"JURIST_HOME": str(tmp_path / ".jurist")}, cwd=tmp_path), config)


LAUGHS = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for n, p in zip("bcdefgh", "abcdefg"))


@pytest.mark.parametrize("reader", [r for r in JSON_READERS if r.suffix == ".yaml"], ids=repr)
@pytest.mark.parametrize("text", [LAUGHS, "research: &a {evaluators: *a}\naliases: &b {x: *b}\n"],
                         ids=["aliases of aliases", "an alias of itself"])
def test_yaml_aliases_are_read_at_once_not_expanded(reader, text, tmp_path):
    """Eight levels of aliases, ten each, name 10**8 values; walking them took 27 s."""
    path = tmp_path / "aliases.yaml"
    path.write_text(text)
    started = time.monotonic()
    loads_or_names_the_file(reader, path)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("name, text", [
    ("labels.jsonl", '{"item": "s1", "rubric": "safety", "label": NaN, "annotator": "ana"}\n'),
    ("labels.jsonl", '{"item": "s1", "rubric": "safety", "label": Infinity, "annotator": "ana"}\n'),
    ("labels.jsonl", '{"item": "s1", "rubric": "safety", "label": 1e400, "annotator": "ana"}\n'),
    ("jurist.yaml", "timeout: 1e400\n"),
    ("jurist.yaml", "score_scale: [1, .inf]\n"),
    ("jurist.yaml", "breaker_cooldown: .inf\n"),
    ("rubrics.json", '{"version": {"major": 1}, "rubrics": [{"id": "a", "name": "A", "scoring_criteria": "x"}]}'),
    ("rubrics.json", '{"version": true, "rubrics": [{"id": "a", "name": "A", "scoring_criteria": "x"}]}'),
], ids=["label NaN", "label Infinity", "label 1e400", "timeout 1e400", "scale to infinity", "cooldown infinite",
        "version an object", "version true"])
def test_a_value_of_the_wrong_kind_is_refused_not_read_as_another(name, text, tmp_path):
    """Read as it was, each was silently wrong: a NaN label in the calibration, a time-out never
    reached, a rubrics version written as Python's ``{'major': 1}``."""
    reader = {"labels.jsonl": JSON_READERS[3], "jurist.yaml": JSON_READERS[7], "rubrics.json": JSON_READERS[0]}[name]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(JuristError) as refused:
        reader.load(path)
    assert str(path) in str(refused.value)
