"""Batch scoring of a folder of sessions: resumable, streaming, bounded, crash-safe.

Session files are read one at a time as workers take them; each finished
session's store row is committed and then its ``<session_id>_result.json``
is put in place (:mod:`jurist.rubrics.folder`), so a batch killed at any
moment loses at most the sessions in progress, and every result file has its
row. A rerun skips sessions whose result was scored, scores again those whose
result failed or partly failed (``retry_failed``; the rubrics that were scored
come from the call cache) and those whose result file cannot be read, and
still counts them all in ``summary.json``; ``force=True`` rescores all. One
batch at a time writes to a folder.

Its calls are charged to the cost budget of the caller's block
(:func:`jurist.models.cost.charged_to`, ``--max-cost``), else to one of its own:
``summary.json``'s ``cost`` says what this run's calls cost. When the budget is
spent no new call starts (``Model`` refuses it: :class:`~jurist.models.cost.BudgetExceeded`),
the calls in flight finish (their answers go to the call cache, so a rerun does not pay
for them again), a session that had a call refused is not saved, no other session is
scored, those left are counted (``sessions_not_scored``), and a rerun with a larger
budget resumes, as after Ctrl-C.

Within a dry run (:func:`jurist.models.cost.expecting`, ``--dry-run``) the batch
goes through the sessions it would score, judging each with every call counted
and none made, and writes nothing: no result, no summary, no store row.

The pieces both engines share live here: :func:`open_session`,
:func:`result_name`, :func:`needs_scoring` and :class:`BatchTally` (the
summary and counts); ``ray_engine`` uses them in worker processes of a Ray
cluster.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from pydantic import ValidationError

from jurist.errors import ConfigError, EndpointDown, InputError, StoreError
from jurist.jsonfiles import write_json
from jurist.models.cost import (BudgetExceeded, CostBudget, active_budget, active_dry_run, charged_to,
                               load_prices)
from jurist.judges.outcome import OK
from jurist.rubrics.folder import ResultFolder
from jurist.rubrics.models import RubricSet
from jurist.rubrics.naming import result_name
from jurist.rubrics.results import RubricResult
from jurist.rubrics.scoring import ScoredSession, SessionEvaluator
from jurist.rubrics.sessions import ChatSession, load_session
from jurist.rubrics.summary import SummaryBuilder, batch_cost

ProgressFn = Callable[[str, str], None]  # (session id or file, status)

__all__ = ["BatchReport", "BatchTally", "EXIT_BUDGET", "ProgressFn", "needs_scoring", "open_session", "refused_call",
           "result_name", "run_batch", "score_session", "session_files"]


def session_files(sessions_dir: Path) -> list[Path]:
    if not sessions_dir.is_dir():
        raise InputError("sessions folder not found", file=str(sessions_dir))
    names = sorted(e.name for e in os.scandir(sessions_dir) if e.is_file() and e.name.endswith(".jsonl"))
    if not names:
        raise InputError("no *.jsonl session files in this folder", file=str(sessions_dir))
    return [sessions_dir / n for n in names]


def open_session(path: Path, out: Path, force: bool, *,
                 allow_private_image_urls: bool = False) -> tuple[ChatSession, RubricResult | None]:
    """Load a session and, unless ``force``, the result it already has (blocking: run in a thread).

    A result file that cannot be read as a result of this session (``[]``, ``{}``, a
    half-written file, another session's result) counts as none: the session is scored.
    A session that cannot be read for any reason is an InputError naming its file (a bug in
    reading one bad file is that file's failure, never the batch's).
    """
    try:
        session = load_session(path, allow_private_image_urls=allow_private_image_urls)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"the session could not be read: {failure_of(exc)}", file=str(path)) from exc
    if force:
        return session, None
    try:
        result = RubricResult.model_validate_json((out / result_name(session.session_id)).read_bytes())
    except (ValidationError, ValueError, OSError):
        return session, None
    return session, result if result.session_id == session.session_id else None


def refused_call(result: RubricResult) -> bool:
    """Whether a rubric of ``result`` failed because the cost budget was spent (its call was not made)."""
    refused = f"{BudgetExceeded.__name__}:"
    return any(rs.status != OK and (rs.reasoning or "").startswith(refused) for rs in result.rubric_scores)


def failure_of(exc: BaseException) -> str:
    """An unexpected exception as a failure reason: its type and message, the message shortened."""
    message = str(exc)
    return f"{type(exc).__name__}: {message[:REASON_CHARS]}" if message else type(exc).__name__


def needs_scoring(existing: RubricResult | None, retry_failed: bool) -> bool:
    """Whether a session with this result (None: none) is scored in this run."""
    return existing is None or (retry_failed and existing.status != "scored")


async def score_session(evaluator: SessionEvaluator, session: ChatSession, out: Path) -> RubricResult:
    """Score one session; commit its store row, then write its result file atomically."""
    scored = await evaluator.score(session)
    await ResultFolder(out, evaluator.store).write(scored)
    return scored.result


@dataclass
class BatchReport:
    summary: dict[str, Any]  # summary.json's content
    summary_path: Path
    scored: int  # sessions scored in this run
    skipped: int  # sessions that already had a result
    input_errors: list[str]
    evaluations_failed: int
    endpoint_down: int = 0  # sessions scored now with a rubric that failed at once: the judge endpoint was down
    retried: int = 0  # of the sessions scored, those whose earlier result had failed
    # why rubric evaluations failed: a reason of each kind -> how many failed so, most frequent first
    # (reasons that differ only in their numbers are one kind; see BatchTally.count_failures)
    failure_reasons: dict[str, int] = field(default_factory=dict)
    # sessions left unscored because the cost budget was spent (a rerun resumes with them)
    budget_stopped: int = 0

    @property
    def budget_note(self) -> str | None:
        """The line that says the cost budget stopped the batch, when it did."""
        if not self.budget_stopped:
            return None
        cost = self.summary.get("cost") or {}
        return (f"the cost budget of ${cost.get('max_cost_usd', 0):g} was reached: {self.budget_stopped} sessions "
                "were not scored; rerun with a larger --max-cost to resume (calls already made come from the cache)")

    @property
    def endpoint_note(self) -> str | None:
        """The line that says the judge endpoint was down, when it was."""
        if not self.endpoint_down:
            return None
        return (f"the judge endpoint was down: {self.endpoint_down} of {self.scored} sessions scored now failed "
                f"at once ({EndpointDown.__name__}); check the endpoint, then rerun: failed sessions are scored again")

    @property
    def exit_code(self) -> int:
        if self.input_errors:
            return 2
        if self.budget_stopped:
            return EXIT_BUDGET
        return 1 if self.evaluations_failed else 0


#: The exit code of a batch the cost budget stopped (resumable: rerun with a larger budget).
EXIT_BUDGET = 3


MAX_REASONS = 50  # distinct failure reasons a batch tells apart; the rest are counted as OTHER_REASONS
REASON_CHARS = 2000  # a failure reason is told apart by its first characters
OTHER_REASONS = "(other reasons)"
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")  # a count, a duration, a status: not an id's digits


def reason_kind(reason: str) -> str:
    """A failure reason with its standalone numbers masked: reasons that differ only in a count,
    a duration or a status code (``fail at once for 29.5 s more``) are one kind."""
    return _NUMBER.sub("#", reason[:REASON_CHARS])


class BatchTally:
    """What both batch engines count: the summary, scored / skipped sessions,
    input errors, failure reasons and session ids already seen; reports progress."""

    def __init__(self, rubric_set: RubricSet, on_progress: ProgressFn | None = None) -> None:
        self.summary = SummaryBuilder(rubric_set)
        self.seen: dict[str, str] = {}
        self.names: dict[str, tuple[str, str]] = {}  # result file name, case folded -> (session id, file)
        self.scored = 0
        self.skipped = 0
        self.endpoint_down = 0
        self.retried = 0
        self.budget_stopped = 0  # sessions not scored: the cost budget was spent
        self.failure_kinds: Counter[str] = Counter()  # reason_kind -> count
        self._examples: dict[str, str] = {}  # reason_kind -> its first reason
        self._on_progress = on_progress

    def _progress(self, name: str, status: str) -> None:
        if self._on_progress is not None:
            self._on_progress(name, status)

    def input_error(self, name: str, message: str) -> None:
        self.summary.add_input_error(message)
        self._progress(name, "input_error")

    def claim(self, session_id: str, path: str | Path) -> bool:
        """True for the first file with this session id; a later one is an input error, and so
        is a session whose result file would be another's on a case-insensitive file system."""
        if session_id in self.seen:
            self.input_error(session_id, f"{path}: session id {session_id!r} is also used by "
                                        f"{self.seen[session_id]}; skipped")
            return False
        name = result_name(session_id)
        other = self.names.get(name.casefold())
        if other is not None:
            self.input_error(session_id, f"{path}: session id {session_id!r} and {other[0]!r} (in {other[1]}) "
                                        f"would share the result file {name} where case does not count; "
                                        "rename one; skipped")
            return False
        self.seen[session_id] = str(path)
        self.names[name.casefold()] = (session_id, str(path))
        return True

    def count_failures(self, result: RubricResult) -> None:
        """Count the reason of each rubric of ``result`` that was not scored (the summary counts
        the failures; this says why)."""
        for rs in result.rubric_scores:
            if rs.status == OK or rs.rubric_id not in self.summary.per_rubric:  # as the summary counts
                continue
            reason = (rs.reasoning or rs.file_status).strip()
            kind = reason_kind(reason)
            if kind not in self.failure_kinds and len(self.failure_kinds) >= MAX_REASONS:
                kind = reason = OTHER_REASONS
            self._examples.setdefault(kind, reason)
            self.failure_kinds[kind] += 1

    def not_scored(self, session_id: str) -> None:
        """A session left unscored because the cost budget was spent."""
        self.budget_stopped += 1
        self._progress(session_id, "not scored (budget)")

    def add_existing(self, session_id: str, result: RubricResult) -> None:
        self.summary.add(result)
        self.count_failures(result)
        self.skipped += 1
        self._progress(session_id, "skipped")

    def add_scored(self, session_id: str, result: RubricResult, *, retried: bool = False) -> None:
        self.summary.add(result)
        self.count_failures(result)
        self.scored += 1
        down = f"{EndpointDown.__name__}:"
        if any(rs.status != OK and (rs.reasoning or "").startswith(down) for rs in result.rubric_scores):
            self.endpoint_down += 1
        self.retried += retried
        self._progress(session_id, result.status)

    async def finish(self, out: Path, budget: CostBudget | None = None) -> BatchReport:
        """Write summary.json (with the cost of the run's calls, from ``budget``) and return the report."""
        cost = None if budget is None else batch_cost(budget, sessions_not_scored=self.budget_stopped)
        summary = self.summary.build(cost)
        summary_path = out / "summary.json"
        await asyncio.to_thread(write_json, summary_path, summary)
        return BatchReport(summary.to_json(), summary_path, self.scored, self.skipped, self.summary.input_errors,
                           self.summary.evaluations_failed, endpoint_down=self.endpoint_down, retried=self.retried,
                           failure_reasons={self._examples[k]: n for k, n in self.failure_kinds.most_common()},
                           budget_stopped=self.budget_stopped)


async def run_batch(
    evaluator: SessionEvaluator,
    sessions_dir: str | Path,
    output_dir: str | Path,
    *,
    parallel: int = 5,
    force: bool = False,
    retry_failed: bool = True,
    on_progress: ProgressFn | None = None,
) -> BatchReport:
    """Score every ``*.jsonl`` in ``sessions_dir``; ``parallel`` sessions at once.

    Sessions with a scored result are skipped (``force``: rescored); sessions whose result
    failed are scored again unless ``retry_failed`` is false. A session that cannot be read
    or judged (a bad line, a value out of bounds, anything that goes wrong before its judge's
    verdicts) is listed in ``summary.json``'s ``input_errors`` with its file and reason, and
    the batch goes on. Interrupted (cancelled), the batch lets the sessions being saved finish
    first.
    """
    if parallel < 1:
        raise InputError(f"--parallel must be at least 1, got {parallel}")
    files = session_files(Path(sessions_dir))
    if active_dry_run() is not None:
        return await _dry_run(evaluator, files, Path(output_dir), parallel, force, retry_failed, on_progress)
    await asyncio.to_thread(load_prices)  # off the event loop, before the first call's record needs it
    budget = active_budget() or CostBudget()  # the caller's (--max-cost), else a running total of its own
    folder = ResultFolder(output_dir, evaluator.store)
    await folder.take()
    try:
        with charged_to(budget):
            return await _run(evaluator, files, folder, parallel, force, retry_failed, on_progress, budget)
    finally:
        await folder.release()


async def _claimed(evaluator: SessionEvaluator, path: Path, out: Path, force: bool,
                   tally: BatchTally) -> tuple[ChatSession, RubricResult | None] | None:
    """The session of ``path`` and the result it has, when it opens and no other file of the batch
    holds its id; else None, counted in ``tally``."""
    try:
        session, existing = await asyncio.to_thread(open_session, path, out, force,
                                                    allow_private_image_urls=evaluator.allow_private_image_urls)
    except InputError as exc:
        tally.input_error(path.name, str(exc))
        return None
    if not tally.claim(session.session_id, path):
        return None
    return session, existing


async def _scored(evaluator: SessionEvaluator, session: ChatSession, path: Path,
                  tally: BatchTally) -> ScoredSession | None:
    """``session`` scored; None when it could not be judged (its text, its images: its failure alone,
    counted in ``tally``). The batch's judge or store failing stops the batch."""
    try:
        return await evaluator.score(session)
    except (ConfigError, StoreError):
        raise
    except Exception as exc:
        tally.input_error(path.name, f"{path}: session {session.session_id!r} could not be judged: "
                                     f"{failure_of(exc)}")
        return None


async def _run(evaluator: SessionEvaluator, files: list[Path], folder: ResultFolder, parallel: int, force: bool,
               retry_failed: bool, on_progress: ProgressFn | None, budget: CostBudget) -> BatchReport:
    out = folder.path
    tally = BatchTally(evaluator.rubric_set, on_progress)
    todo: Iterator[Path] = iter(files)
    saving: set[asyncio.Task[None]] = set()

    async def one(path: Path) -> None:
        opened = await _claimed(evaluator, path, out, force, tally)
        if opened is None:
            return
        session, existing = opened
        if existing is not None and not needs_scoring(existing, retry_failed):
            tally.add_existing(session.session_id, existing)
            return
        if budget.exceeded:
            tally.not_scored(session.session_id)
            return
        scored = await _scored(evaluator, session, path, tally)
        if scored is None:
            return
        if refused_call(scored.result):  # the budget ran out while it was scored: left for a rerun
            tally.not_scored(session.session_id)
            return
        save = asyncio.ensure_future(folder.write(scored))  # finishes even if the batch is interrupted now
        saving.add(save)
        save.add_done_callback(saving.discard)
        await asyncio.shield(save)
        tally.add_scored(session.session_id, scored.result, retried=existing is not None)

    async def worker() -> None:
        for path in todo:  # workers share one iterator: files are opened as they are taken
            await one(path)

    workers = [asyncio.ensure_future(worker()) for _ in range(min(parallel, len(files)))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for w in workers:
            w.cancel()
        # Rows being committed: their result files go in place before the batch stops.
        await asyncio.gather(*saving, return_exceptions=True)
        raise
    return await tally.finish(out, budget)


async def _dry_run(evaluator: SessionEvaluator, files: list[Path], out: Path, parallel: int, force: bool,
                   retry_failed: bool, on_progress: ProgressFn | None) -> BatchReport:
    """The sessions a batch would score, judged with every call counted into the active dry run
    and none made; nothing written. The report's ``scored`` counts the sessions it would score."""
    tally = BatchTally(evaluator.rubric_set, on_progress)
    todo: Iterator[Path] = iter(files)

    async def one(path: Path) -> None:
        opened = await _claimed(evaluator, path, out, force, tally)
        if opened is None:
            return
        session, existing = opened
        if existing is not None and not needs_scoring(existing, retry_failed):
            tally.skipped += 1
            tally._progress(session.session_id, "skipped")
            return
        if await _scored(evaluator, session, path, tally) is None:  # every call counted, none made: not kept
            return
        tally.scored += 1
        tally._progress(session.session_id, "counted")

    async def worker() -> None:
        for path in todo:
            await one(path)

    await asyncio.gather(*(worker() for _ in range(min(parallel, len(files)))))
    return BatchReport({}, out / "summary.json", tally.scored, tally.skipped, tally.summary.input_errors, 0)
