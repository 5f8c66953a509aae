"""Session and rubric ids and names: what the store and the file system take.

Ids are checked where they come in (a session file, a rubrics file), so a
batch refuses a bad one before any judge call rather than failing at the
store write after the judge was paid. An id must fit its column, hold no
control characters and be valid Unicode (PostgreSQL refuses NUL, a file
system refuses lone surrogates); a name must fit its column and hold no NUL.

A session's result file is ``<session id>_result.json`` when the id is made
of letters, digits, ``.``, ``_`` and ``-`` (at most 200); any other id is
made safe for file names, shortened, and followed by 12 hex digits of its
hash, so two session ids never share a result file (``a b`` and ``a_b``
once did).
"""

from __future__ import annotations

import hashlib
import re

_SAFE = re.compile(r"[A-Za-z0-9._-]{1,200}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
RESULT_SUFFIX = "_result.json"


def id_problem(value: str, max_length: int) -> str | None:
    """What keeps ``value`` from being an id (None: nothing)."""
    if not value.strip():
        return "is empty"
    if len(value) > max_length:
        return f"is {len(value)} characters long; the store takes at most {max_length}"
    if _CONTROL.search(value):
        return "contains a control character"
    return _unicode_problem(value)


def name_problem(value: str, max_length: int) -> str | None:
    """What keeps ``value`` from being a stored name (None: nothing)."""
    if len(value) > max_length:
        return f"is {len(value)} characters long; the store takes at most {max_length}"
    if "\x00" in value:
        return "contains a NUL character"
    return _unicode_problem(value)


def shorten(value: object, width: int = 60) -> object:
    """A long text cut for a message (anything else as it is)."""
    if isinstance(value, str) and len(value) > width:
        return value[:width - 1] + "…"
    return value


def _unicode_problem(value: str) -> str | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (it holds a lone surrogate)"
    return None


def result_name(session_id: str) -> str:
    """The name of a session's result file; distinct session ids get distinct names."""
    if _SAFE.fullmatch(session_id):
        return session_id + RESULT_SUFFIX
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{_UNSAFE.sub('_', session_id)[:180]}-{digest}{RESULT_SUFFIX}"
