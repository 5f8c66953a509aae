"""Finding checklist (points) files by name, safely.

A name is a bare file stem such as ``caffeine``: letters, digits, ``-`` and
``_`` only, so a request can never reach outside the checklist folders.
Folders are searched in order: the configured ones first, then
``examples/checklists`` as shipped with jurist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from jurist.checklist.points import load_checklist as load_points
from jurist.errors import InputError

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class Checklist:
    name: str
    path: Path
    title: str
    total_points: int


def bundled_dir() -> Path:
    """``examples/checklists`` as shipped with jurist."""
    return Path(str(files("jurist") / "examples" / "checklists"))


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


def find_checklist(name: str, folders: list[Path]) -> Checklist | None:
    """The checklist called ``name`` in the first folder that has it, else None.

    Raises InputError when the name is malformed or the file is not a checklist.
    """
    if not valid_name(name):
        raise InputError(
            f"invalid checklist name {name!r}: use letters, digits, '-' and '_' only (for example 'caffeine')"
        )
    for folder in folders:
        path = folder / f"{name}.json"
        if path.is_file():
            return load_checklist(name, path)
    return None


def load_checklist(name: str, path: Path) -> Checklist:
    """Read ``path`` with the checklist capability's own loader (InputError when invalid)."""
    data = load_points(path)
    return Checklist(name=name, path=path, title=data.title, total_points=len(data.points))


@lru_cache(maxsize=None)
def _bundled_checklist(path: Path) -> bool:
    """Whether a file shipped with jurist is a checklist (its folder also holds the demo's
    scripted learner, which is not one); read once per process, as the shipped files do not change."""
    try:
        load_points(path)
    except InputError:
        return False
    return True


def list_checklists(folders: list[Path]) -> list[str]:
    """Names of the checklist files in the folders (first folder wins on a clash). A file of
    the configured folders is named even when it is not a valid checklist (the tutor's index
    says why); of the files shipped with jurist, only the checklists."""
    names: list[str] = []
    bundled = bundled_dir()
    for folder in folders:
        if folder.is_dir():
            for p in sorted(folder.glob("*.json")):
                if valid_name(p.stem) and p.stem not in names and (folder != bundled or _bundled_checklist(p)):
                    names.append(p.stem)
    return names


@dataclass(frozen=True)
class ChecklistEntry:
    """One checklist as the tutor's index lists it: its title and size, or why it cannot be read."""

    name: str
    title: str | None = None
    total_points: int | None = None
    problem: str | None = None


def describe_checklists(folders: list[Path]) -> list[ChecklistEntry]:
    """Every checklist the folders hold (first folder wins on a clash), read: a file that is
    not a valid checklist is listed with the reason."""
    out = []
    for name in list_checklists(folders):
        try:
            found = find_checklist(name, folders)
        except InputError as exc:
            out.append(ChecklistEntry(name, problem=str(exc)))
            continue
        if found is not None:
            out.append(ChecklistEntry(name, found.title, found.total_points))
    return out
