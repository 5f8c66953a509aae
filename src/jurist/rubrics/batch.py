"""Batch scoring of a folder of sessions: resumable, streaming, bounded.

Session files are read one at a time as workers take them; each finished
session is written at once as ``<session_id>_result.json`` (atomically), so
an interrupted batch loses at most the sessions in progress. A rerun skips
sessions whose result exists (``force=True`` rescores all) and still counts
them in ``summary.json``.

The pieces both engines share live here: :func:`open_session`,
:func:`result_name` and :class:`BatchTally` (the summary and counts);
``ray_engine`` uses them in worker processes of a Ray cluster.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import ValidationError

from jurist.errors import EndpointDown, InputError
from jurist.jsonfiles import write_json
from jurist.rubrics.models import RubricSet
from jurist.rubrics.results import RubricResult
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


def open_session(path: Path, out: Path, force: bool) -> tuple[ChatSession, RubricResult | None]:
    """Load a session and, unless ``force``, the result it already has (blocking: run in a thread)."""
    session = load_session(path)
    target = out / result_name(session.session_id)
    if not force and target.exists():
        try:
            return session, RubricResult.model_validate_json(target.read_bytes())
        except (ValidationError, OSError):
            pass  # an unreadable result is rescored
    return session, None


async def score_session(evaluator: SessionEvaluator, session: ChatSession, out: Path) -> RubricResult:
    """Score one session and write its result file atomically."""
    result = await evaluator.evaluate(session)
    await asyncio.to_thread(write_json, out / result_name(session.session_id), result)
    return result


@dataclass
class BatchReport:
    summary: dict[str, Any]  # summary.json's content
    summary_path: Path
    scored: int  # sessions scored in this run
    skipped: int  # sessions that already had a result
    input_errors: list[str]
    evaluations_failed: int
    endpoint_down: int = 0  # sessions scored now with a rubric that failed at once: the judge endpoint was down

    @property
    def endpoint_note(self) -> str | None:
        """The line that says the judge endpoint was down, when it was."""
        if not self.endpoint_down:
            return None
        return (f"the judge endpoint was down: {self.endpoint_down} of {self.scored} sessions scored now failed "
                f"at once ({EndpointDown.__name__}); check the endpoint, then rescore them")

    @property
    def exit_code(self) -> int:
        if self.input_errors:
            return 2
        return 1 if self.evaluations_failed else 0


class BatchTally:
    """What both batch engines count: the summary, scored / skipped sessions,
    input errors and session ids already seen; reports progress."""

    def __init__(self, rubric_set: RubricSet, on_progress: ProgressFn | None = None) -> None:
        self.summary = SummaryBuilder(rubric_set)
        self.seen: dict[str, str] = {}
        self.scored = 0
        self.skipped = 0
        self.endpoint_down = 0
        self._on_progress = on_progress

    def _progress(self, name: str, status: str) -> None:
        if self._on_progress is not None:
            self._on_progress(name, status)

    def input_error(self, name: str, message: str) -> None:
        self.summary.add_input_error(message)
        self._progress(name, "input_error")

    def claim(self, session_id: str, path: str | Path) -> bool:
        """True for the first file with this session id; a later one is an input error."""
        if session_id in self.seen:
            self.input_error(session_id, f"{path}: session id {session_id!r} is also used by "
                                        f"{self.seen[session_id]}; skipped")
            return False
        self.seen[session_id] = str(path)
        return True

    def add_existing(self, session_id: str, result: RubricResult) -> None:
        self.summary.add(result)
        self.skipped += 1
        self._progress(session_id, "skipped")

    def add_scored(self, session_id: str, result: RubricResult) -> None:
        self.summary.add(result)
        self.scored += 1
        down = f"{EndpointDown.__name__}:"
        if any(rs.status != "scored" and (rs.reasoning or "").startswith(down) for rs in result.rubric_scores):
            self.endpoint_down += 1
        self._progress(session_id, result.status)

    async def finish(self, out: Path) -> BatchReport:
        """Write summary.json and return the report."""
        summary = self.summary.build()
        summary_path = out / "summary.json"
        await asyncio.to_thread(write_json, summary_path, summary)
        return BatchReport(summary.to_json(), summary_path, self.scored, self.skipped, self.summary.input_errors,
                           self.summary.evaluations_failed, self.endpoint_down)


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
    tally = BatchTally(evaluator.rubric_set, on_progress)
    todo: Iterator[Path] = iter(files)

    async def one(path: Path) -> None:
        try:
            session, existing = await asyncio.to_thread(open_session, path, out, force)
        except InputError as exc:
            tally.input_error(path.name, str(exc))
            return
        if not tally.claim(session.session_id, path):
            return
        if existing is not None:
            tally.add_existing(session.session_id, existing)
            return
        result = await score_session(evaluator, session, out)
        tally.add_scored(session.session_id, result)

    async def worker() -> None:
        for path in todo:  # workers share one iterator: files are opened as they are taken
            await one(path)

    await asyncio.gather(*(worker() for _ in range(min(parallel, len(files)))))
    return await tally.finish(out)
