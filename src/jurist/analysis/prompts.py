"""Every judge and generator prompt with its versions; new versions; diffs.

Version 1 of a prompt is the template file shipped with jurist
(``src/jurist/templates/<name>.txt``) unless the ``prompts`` table holds a
version 1 of that name; later versions live in the table. An application's
own prompts (a research pipeline's planner, retrieval and synthesis prompts)
join the lab by :func:`register_prompt`: their version 1 is the first text
registered, stored in the table. A version's hash is
:attr:`PromptTemplate.hash`, the hash every judge call records, so scores can
be grouped by the prompt version that produced them.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import re
from datetime import datetime, timezone
from importlib.resources import files
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import IntegrityError, OperationalError

from jurist.errors import InputError, NotFound, StoreError
from jurist.jsonfiles import unknown_name
from jurist.judges.templates import BUILTIN_SOURCE, PromptTemplate, builtin, placeholders_of
from jurist.store import Store
from jurist.store import analysis as q

MAX_PROMPT_CHARS = 100_000
_ATTEMPTS = 3  # a concurrent writer may take the same next version number


@functools.lru_cache(maxsize=1)
def shipped_prompts() -> dict[str, PromptTemplate]:
    """The templates shipped with jurist, by name (version 1 of each prompt); read once."""
    names = sorted(e.name[: -len(".txt")] for e in (files("jurist") / "templates").iterdir()
                   if e.name.endswith(".txt"))
    return {name: builtin(name) for name in names}


# The prompt lab's records, served as they are by /api/prompts (no docstrings: the API schema keeps its text).


class PromptVersionInfo(BaseModel):  # one version of a prompt: its number, hash and where it comes from
    model_config = ConfigDict(frozen=True)

    version: int
    hash: str = Field(description="the template hash judge calls record (sha256 of the text, 16 hex digits)")
    created_at: datetime | None = Field(description="None for the text shipped with jurist")
    note: str | None
    source: Literal["shipped", "stored"]


class PromptInfo(BaseModel):  # a prompt with its versions, oldest first
    model_config = ConfigDict(frozen=True)

    name: str
    latest_version: int
    versions: list[PromptVersionInfo]


class PromptText(PromptVersionInfo):  # one version of a prompt with its text
    name: str
    text: str


def _shipped_entry(tmpl: PromptTemplate) -> PromptVersionInfo:
    return PromptVersionInfo(version=1, hash=tmpl.hash, created_at=None, note="shipped with jurist", source="shipped")


def _stored_entry(row: q.PromptVersion) -> PromptVersionInfo:
    return PromptVersionInfo(version=row.version, hash=row.hash, created_at=row.created_at, note=row.note,
                             source="stored")


def _merge(shipped: dict[str, PromptTemplate], rows: list[q.PromptVersion]) -> dict[str, list[PromptVersionInfo]]:
    by_name: dict[str, list[PromptVersionInfo]] = {}
    for name, tmpl in shipped.items():
        by_name[name] = [_shipped_entry(tmpl)]
    for row in rows:
        versions = by_name.setdefault(row.name, [])
        if row.version == 1:  # a stored version 1 replaces the shipped file
            versions[:] = [v for v in versions if v.version != 1]
        versions.append(_stored_entry(row))
    for versions in by_name.values():
        versions.sort(key=lambda v: v.version)
    return dict(sorted(by_name.items()))


async def list_prompts(store: Store) -> list[PromptInfo]:
    """Every prompt with its versions, by name."""
    shipped = await asyncio.to_thread(shipped_prompts)
    rows = await store.aread(q.list_prompt_versions)
    return [PromptInfo(name=name, latest_version=versions[-1].version, versions=versions)
            for name, versions in _merge(shipped, rows).items()]


async def prompt_versions(store: Store, name: str) -> PromptInfo:
    """One prompt with its versions (as in :func:`list_prompts`); NotFound for an unknown name."""
    shipped = await asyncio.to_thread(shipped_prompts)
    rows = await store.aread(q.list_prompt_versions, name)
    merged = _merge({name: shipped[name]} if name in shipped else {}, rows)
    if name not in merged:
        raise NotFound(f"no prompt named {name!r}; known prompts: {', '.join(shipped)}")
    return PromptInfo(name=name, latest_version=merged[name][-1].version, versions=merged[name])


async def prompt_version(store: Store, name: str, version: int) -> PromptText:
    """One version with its text."""
    row = await store.aread(q.get_prompt_version, name, version)
    if row is not None:
        return PromptText(**_stored_entry(row).model_dump(), name=name, text=row.text)
    if version == 1:
        shipped = await asyncio.to_thread(shipped_prompts)
        if name in shipped:
            return PromptText(**_shipped_entry(shipped[name]).model_dump(), name=name, text=shipped[name].text)
    known = await prompt_versions(store, name)  # NotFound for an unknown name
    raise NotFound(f"prompt {name!r} has no version {version}; versions: "
                   f"{', '.join(str(v.version) for v in known.versions)}")


def _check_placeholders(name: str, text: str, base_text: str) -> None:
    given = placeholders_of(text, f"prompt {name}")
    expected = placeholders_of(base_text, f"prompt {name}")
    missing, unknown = sorted(expected - given), sorted(given - expected)
    if missing or unknown:
        parts = []
        if missing:
            parts.append("missing " + ", ".join("{" + m + "}" for m in missing))
        if unknown:
            parts.append("; ".join(unknown_name(u, sorted(expected), "placeholder", "{{{}}}") for u in unknown))
        raise InputError(
            f"the new version of {name!r} must use the same placeholders as version 1: {'; '.join(parts)} "
            "(write literal braces as {{ }})"
        )


async def create_prompt_version(store: Store, name: str, text: str, note: str | None = None) -> PromptText:
    """Store ``text`` as the next version of prompt ``name``; returns it as :func:`prompt_version` does.

    The name must be a known prompt, the text non-empty, under
    :data:`MAX_PROMPT_CHARS`, and use exactly the placeholders of its first version.
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError("the prompt text is empty")
    if len(text) >= MAX_PROMPT_CHARS:
        raise InputError(f"the prompt text has {len(text):,} characters; the limit is {MAX_PROMPT_CHARS - 1:,}")
    if note is not None and len(note) > 2000:
        raise InputError("the note is longer than 2,000 characters")
    info = await prompt_versions(store, name)  # NotFound for an unknown name
    base = await prompt_version(store, name, info.versions[0].version)
    _check_placeholders(name, text, base.text)
    shipped_has = any(v.source == "shipped" for v in info.versions)
    version = await _insert_next(store, name, text, note, after=1 if shipped_has else 0)
    return await prompt_version(store, name, version)


async def _insert_next(store: Store, name: str, text: str, note: str | None, *, after: int = 0,
                       unless_stored: bool = False) -> int:
    """Store ``text`` as the next version of ``name`` (above ``after``); its number. With
    ``unless_stored``, a text already stored under ``name`` is not stored again: its version is returned."""
    tmpl = PromptTemplate(name=name, version="", text=text)

    def insert_next(conn: Any) -> int:
        if unless_stored:
            same = [r.version for r in q.list_prompt_versions(conn, name) if r.hash == tmpl.hash]
            if same:
                return same[0]
        latest = q.latest_prompt_version(conn, name) or 0
        version = max(latest, after) + 1
        q.insert_prompt_version(conn, q.PromptText(name=name, version=version, text=text, hash=tmpl.hash, note=note,
                                                   created_at=datetime.now(timezone.utc)))
        return version

    for attempt in range(_ATTEMPTS):
        try:
            return int(await store.awrite(insert_next))
        except (IntegrityError, OperationalError) as exc:
            # Two writers took the same number (PostgreSQL: unique violation; SQLite: the
            # second writer's snapshot is stale, "database is locked"): read again and retry.
            if isinstance(exc, OperationalError) and "lock" not in str(exc) and "busy" not in str(exc):
                raise StoreError(f"could not save the prompt version: {str(exc).splitlines()[0]}") from None
            if attempt == _ATTEMPTS - 1:
                raise StoreError(f"another version of {name!r} was being saved at the same time; "
                                 "try again") from None
    raise AssertionError("unreachable")  # pragma: no cover


PROMPT_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


async def register_prompt(store: Store, name: str, text: str, *, owner: str = "the application") -> PromptTemplate:
    """Put an application's own prompt (a research pipeline's planner, say) in the prompt lab.

    The first text registered under ``name`` is its version 1; a later text that is not stored
    yet (the application's code changed it) becomes the next version. From then on the lab
    lists it, takes new versions of it (``PUT /api/prompts/{name}``, the same placeholders)
    and routes calls of it: the template returned is what :meth:`PromptRouter.resolve
    <jurist.prompt_router.PromptRouter.resolve>` routes to the active version or an A/B test's
    arm. InputError for a bad name, a name of jurist's own prompts, or an empty or unreadable text."""
    if not isinstance(name, str) or not PROMPT_NAME.match(name):
        raise InputError(f"prompt name {name!r} must be 1 to 200 letters, digits, '_', '.' or '-'")
    if name in await asyncio.to_thread(shipped_prompts):
        raise InputError(f"{name!r} is the name of one of jurist's own prompts: name the application's prompt "
                         "differently")
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"prompt {name!r} is empty")
    if len(text) >= MAX_PROMPT_CHARS:
        raise InputError(f"prompt {name!r} has {len(text):,} characters; the limit is {MAX_PROMPT_CHARS - 1:,}")
    placeholders_of(text, f"prompt {name}")  # braces that do not make a template are an InputError
    version = await _insert_next(store, name, text, f"registered by {owner}", unless_stored=True)
    return PromptTemplate(name=name, version=str(version), text=text, source=BUILTIN_SOURCE)


def diff_lines(a_text: str, b_text: str, context: int = 3) -> list[tuple[str, str]]:
    """A unified diff of two texts as ``(op, line)`` pairs: op is ``" "`` (same), ``"-"`` (only
    in a), ``"+"`` (only in b) or ``"@"`` (a hunk header such as ``@@ -3,4 +3,5 @@``)."""
    out: list[tuple[str, str]] = []
    lines = difflib.unified_diff(a_text.splitlines(), b_text.splitlines(), lineterm="", n=context)
    for line in lines:
        if line.startswith(("---", "+++")) and not out:
            continue  # the file headers
        if line.startswith("@@"):
            out.append(("@", line))
        else:
            out.append((line[:1] or " ", line[1:]))
    return out


async def hash_labels(store: Store) -> dict[str, str]:
    """Every known prompt hash -> ``"<name> v<version>"`` (shipped and stored)."""
    shipped = await asyncio.to_thread(shipped_prompts)
    labels = {t.hash: f"{n} v1" for n, t in shipped.items()}
    for h, (name, version) in (await store.aread(q.prompt_hash_labels)).items():
        labels[h] = f"{name} v{version}"
    return labels
