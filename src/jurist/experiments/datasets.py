"""Dataset files: reading and checking them (JSONL or CSV), and their content version.

A dataset file holds one item per line (JSONL) or per row (CSV):

* ``id``: the item's id (text, or a whole number read as text), unique in the file;
* ``input``: the user's text, or (JSONL) a list of chat messages in the session format
  (``{"role": "user", "content": ...}``), the last one the user's turn the target answers;
* ``expected`` (optional): the reference answer, or (JSONL) a list of acceptable ones;
* ``metadata`` (optional): an object of the user's own (CSV: a JSON object's text).

Reading is strict: an unknown field or column (with the closest known name), a duplicate
id, an item without ``input``, an ``expected`` that is not text, a CSV header without
``id`` and ``input``: an InputError naming the file and the line. The file and its items
are bounded (:data:`MAX_FILE_BYTES`, :data:`MAX_ITEMS`, :data:`MAX_TEXT_CHARS`).

A dataset's version is the hash of its items' content (:func:`content_version`): the same
items, from JSONL or CSV, give the same version; any change gives a new one.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from pydantic import BaseModel, ConfigDict, ValidationError

from jurist.errors import InputError
from jurist.experiments.records import DatasetItem
from jurist.jsonfiles import did_you_mean, jsonl_objects, line_problem, loads, read_text, unknown_name
from jurist.rubrics.naming import id_problem, shorten
from jurist.rubrics.sessions import ChatSession, parse_session
from jurist.store.tables import SUBJECT_ID_LENGTH

MAX_FILE_BYTES = 100 * 1024 * 1024  # a dataset file
MAX_ITEMS = 100_000  # items in one dataset
MAX_LINE_CHARS = 2_000_000  # one JSONL line
MAX_TEXT_CHARS = 500_000  # an item's input, expected answers and metadata, as JSON
NAME_LENGTH = 100
VERSION_CHARS = 12  # hex digits of the content hash that name a version
FIELDS = ("id", "input", "expected", "metadata")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a dataset or an experiment (None: it can): letters, digits,
    ``.``, ``_`` and ``-``, starting with a letter or digit, at most :data:`NAME_LENGTH`."""
    if not _NAME.fullmatch(name):
        return "must be letters, digits, '.', '_' and '-', starting with a letter or a digit"
    if len(name) > NAME_LENGTH:
        return f"is {len(name)} characters long; at most {NAME_LENGTH}"
    return None


def check_name(name: str, what: str) -> str:
    """``name`` when it can name a ``what`` (dataset, experiment); else an InputError."""
    problem = name_problem(name)
    if problem is not None:
        raise InputError(f"the {what} name {shorten(name)!r} {problem}")
    return name


class _ItemLine(BaseModel):
    """One JSONL line as written (checked further by :func:`check_item`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: str | int
    input: str | list[dict[str, Any]]
    expected: str | list[str] | None = None
    metadata: dict[str, Any] | None = None


@dataclass
class Dataset:
    """A dataset file's items, in file order, and their content version."""

    source: str
    items: list[DatasetItem]

    @property
    def version(self) -> str:
        return content_version(self.items)


def content_version(items: Iterable[DatasetItem]) -> str:
    """The version of a list of items: the first :data:`VERSION_CHARS` hex digits of the
    SHA-256 of their canonical JSON (keys sorted), in order."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(json.dumps(item.model_dump(mode="json"), sort_keys=True, ensure_ascii=False,
                                 separators=(",", ":")).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()[:VERSION_CHARS]


def session_of(item: DatasetItem, turns: list[dict[str, Any]] | None = None, *,
               source: str | None = None) -> ChatSession:
    """The item's input as a chat session (its id the item's, its expected answers with it),
    followed by the target's ``turns`` (the last one its answer) when given."""
    lines = ([{"role": "user", "content": item.input}] if isinstance(item.input, str)
             else [dict(m) for m in item.input])
    lines.extend(turns or [])
    session = parse_session([json.dumps(m, ensure_ascii=False) for m in lines], source or f"item {item.id}",
                            item.id)
    session.expected = item.expected_answers
    return session


def check_item(raw: dict[str, Any], source: str, n: int | None = None) -> DatasetItem:
    """One item's fields (a JSONL line, a CSV row, an item made on the dashboard) as a checked
    item, or an InputError naming its place: ``source`` (a file, or what the item comes from)
    and line ``n`` where there is one. Everything a dataset file's line is checked for, but
    the ids of the other items (unique in a dataset: the caller knows them)."""
    if "input" not in raw and "id" in raw and not any(did_you_mean(str(k), FIELDS) == "input" for k in raw):
        raise InputError("the item has no input (the text or the messages the target answers)", file=source, line=n)
    try:
        line = _ItemLine.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        if err["type"] != "extra_forbidden" and err["loc"] and err["loc"][0] == "expected":
            raise InputError("expected must be text or a list of texts (the acceptable answers), "
                             f"got {_kind(raw.get('expected'))}", file=source, line=n) from None
        raise InputError(line_problem(exc, _ItemLine, "the item"), file=source, line=n) from None
    item_id = str(line.id) if not isinstance(line.id, bool) else None
    if item_id is None:
        raise InputError("id must be text or a whole number", file=source, line=n)
    problem = id_problem(item_id, SUBJECT_ID_LENGTH)
    if problem:
        raise InputError(f"id {shorten(item_id)!r} {problem}", file=source, line=n)
    if isinstance(line.input, str) and not line.input.strip():
        raise InputError("input is empty", file=source, line=n)
    if isinstance(line.input, list):
        _check_messages(line.input, source, n)
    if isinstance(line.expected, list) and not line.expected:
        raise InputError("expected is an empty list: give the acceptable answers, or leave expected out",
                         file=source, line=n)
    item = DatasetItem(id=item_id, input=line.input, expected=line.expected, metadata=line.metadata)
    size = len(json.dumps(item.model_dump(mode="json"), ensure_ascii=False))
    if size > MAX_TEXT_CHARS:
        raise InputError(f"the item holds {size:,} characters; an item holds at most {MAX_TEXT_CHARS:,}",
                         file=source, line=n)
    return item


def _kind(value: object) -> str:
    return "a list holding something else" if isinstance(value, list) else type(value).__name__


def _check_messages(messages: list[dict[str, Any]], source: str, n: int | None) -> None:
    """An input given as chat messages: each one a session turn, the last one the user's."""
    if not messages:
        raise InputError("input is an empty list of messages", file=source, line=n)
    try:
        session = parse_session([json.dumps(m, ensure_ascii=False) for m in messages], source, "input")
    except InputError as exc:
        where = f"input message {exc.line}: " if exc.line is not None else "input: "
        raise InputError(where + exc.reason, file=source, line=n) from None
    if session.messages[-1].role != "user":
        raise InputError(f"the input's last message is a {session.messages[-1].role} turn; it must be the user's "
                         "turn the target answers", file=source, line=n)


def _jsonl_items(text: str, source: str) -> Iterator[tuple[int, DatasetItem]]:
    for n, obj in jsonl_objects(io.StringIO(text), source, max_line=MAX_LINE_CHARS):
        yield n, check_item(obj, source, n)


def _csv_items(text: str, source: str) -> Iterator[tuple[int, DatasetItem]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise InputError(f"not a CSV header: {exc}", file=source, line=1) from None
    names = [h.strip().lstrip("\ufeff") for h in header]
    for name in names:
        if name not in FIELDS:
            raise InputError(f"wrong CSV header: {unknown_name(name, FIELDS, 'column')}", file=source, line=1)
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"wrong CSV header: the column {name!r} is there twice", file=source, line=1)
        seen.add(name)
    missing = [f for f in ("id", "input") if f not in seen]
    if missing:
        raise InputError(f"wrong CSV header: it needs the columns id and input (missing: {', '.join(missing)}); "
                         f"the columns are {', '.join(FIELDS)}", file=source, line=1)
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"not valid CSV: {exc}", file=source, line=start) from None
        n, start = start, reader.line_num + 1
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(names):
            raise InputError(f"the row has {len(row)} cells; the header has {len(names)}", file=source, line=n)
        raw: dict[str, Any] = {}
        for name, cell in zip(names, row):
            if name in ("expected", "metadata") and cell == "":
                continue
            raw[name] = cell
        if "metadata" in raw:
            try:
                raw["metadata"] = loads(raw["metadata"], source, n)
            except json.JSONDecodeError as exc:
                raise InputError(f"metadata is not a JSON object: {exc.msg}", file=source, line=n) from None
        yield n, check_item(raw, source, n)


def read_dataset(path: str | Path) -> Dataset:
    """A dataset file (``.jsonl`` or ``.csv``), checked; an InputError names the file and the line."""
    p = Path(path)
    source = str(p)
    suffix = p.suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise InputError("a dataset file is .jsonl (one JSON object a line) or .csv (columns id, input, "
                         "expected, metadata)", file=source)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read the dataset: {exc.strerror}", file=source) from None
    if not p.is_file():
        raise InputError("not a regular file", file=source)
    if size > MAX_FILE_BYTES:
        raise InputError(f"the file has {size:,} bytes; a dataset file has at most {MAX_FILE_BYTES:,}", file=source)
    text = read_text(p, "the dataset")
    rows = _csv_items(text, source) if suffix == ".csv" else _jsonl_items(text, source)
    items: list[DatasetItem] = []
    lines: dict[str, int] = {}
    for n, item in rows:
        if item.id in lines:
            raise InputError(f"duplicate id {shorten(item.id)!r}: line {lines[item.id]} has it too", file=source,
                             line=n)
        lines[item.id] = n
        items.append(item)
        if len(items) > MAX_ITEMS:
            raise InputError(f"more than {MAX_ITEMS:,} items; split the dataset", file=source, line=n)
    if not items:
        raise InputError("the dataset has no items", file=source)
    return Dataset(source, items)


def items_jsonl(items: Iterable[DatasetItem]) -> Iterator[str]:
    """The items as JSONL lines (``expected`` and ``metadata`` written when there are some):
    what :func:`read_dataset` reads back as the same items (the same version)."""
    for item in items:
        yield json.dumps(item.model_dump(mode="json", exclude_none=True), ensure_ascii=False) + "\n"
