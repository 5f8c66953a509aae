"""Batch scoring of a folder of sessions: resumable, streaming, bounded.

Session files are read one at a time as workers take them; each finished
session is written at once as ``<session_id>_result.json`` (atomically), so
an interrupted batch loses at most the sessions in progress. A rerun skips
sessions whose result exists (``force=True`` rescores all) and still counts
them in ``summary.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from jurist.errors import InputError
from jurist.jsonfiles import write_json
from jurist.rubrics.scoring import SessionEvaluator
from jurist.rubrics.sessions import ChatSession, load_session
from jurist.rubrics.summary import SummaryBuilder

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
ProgressFn = Callable[[str, str], None]  # (session id or file, status)


def result_name(session_id: str) -> str:
    return f"{_UNSAFE.sub('_', session_id)[:200]}_result.json"


def session_files(sessions_dir: Path) -> list[Path]:
    if not sessions_dir.is_dir():
        raise InputError("sessions folder not found", file=str(sessions_dir))
    names = sorted(e.name for e in os.scandir(sessions_dir) if e.is_file() and e.name.endswith(".jsonl"))
    if not names:
        raise InputError("no *.jsonl session files in this folder", file=str(sessions_dir))
    return [sessions_dir / n for n in names]


def _open(path: Path, out: Path, force: bool) -> tuple[ChatSession, dict[str, Any] | None]:
    """Load a session and, unless ``force``, the result it already has."""
    session = load_session(path)
    target = out / result_name(session.session_id)
    if not force and target.exists():
        try:
            return session, json.loads(target.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, OSError):
            pass  # an unreadable result is rescored
    return session, None


@dataclass
class BatchReport:
    summary: dict[str, Any]
    summary_path: Path
    scored: int  # sessions scored in this run
    skipped: int  # sessions that already had a result
    input_errors: list[str]
    evaluations_failed: int

    @property
    def exit_code(self) -> int:
        if self.input_errors:
            return 2
        return 1 if self.evaluations_failed else 0


async def run_batch(
    evaluator: SessionEvaluator,
    sessions_dir: str | Path,
    output_dir: str | Path,
    *,
    parallel: int = 5,
    force: bool = False,
    on_progress: ProgressFn | None = None,
) -> BatchReport:
    """Score every ``*.jsonl`` in ``sessions_dir``; ``parallel`` sessions at once."""
    if parallel < 1:
        raise InputError(f"--parallel must be at least 1, got {parallel}")
    files = session_files(Path(sessions_dir))
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = SummaryBuilder(evaluator.rubric_set)
    seen: dict[str, Path] = {}
    counts = {"scored": 0, "skipped": 0}
    todo: Iterator[Path] = iter(files)

    def progress(name: str, status: str) -> None:
        if on_progress is not None:
            on_progress(name, status)

    async def one(path: Path) -> None:
        try:
            session, existing = await asyncio.to_thread(_open, path, out, force)
        except InputError as exc:
            summary.add_input_error(str(exc))
            progress(path.name, "input_error")
            return
        if session.session_id in seen:
            summary.add_input_error(
                f"{path}: session id {session.session_id!r} is also used by {seen[session.session_id]}; skipped"
            )
            progress(session.session_id, "input_error")
            return
        seen[session.session_id] = path
        if existing is not None:
            summary.add(existing)
            counts["skipped"] += 1
            progress(session.session_id, "skipped")
            return
        result = await evaluator.evaluate(session)
        await asyncio.to_thread(write_json, out / result_name(session.session_id), result)
        summary.add(result)
        counts["scored"] += 1
        progress(session.session_id, result["status"])

    async def worker() -> None:
        for path in todo:  # workers share one iterator: files are opened as they are taken
            await one(path)

    await asyncio.gather(*(worker() for _ in range(min(parallel, len(files)))))
    data = summary.build()
    summary_path = out / "summary.json"
    await asyncio.to_thread(write_json, summary_path, data)
    return BatchReport(data, summary_path, counts["scored"], counts["skipped"], summary.input_errors,
                       summary.evaluations_failed)
