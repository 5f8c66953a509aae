"""The items of an experiment's run: each one answered, judged and saved, ``parallel`` at once.

Per item (:meth:`ItemRunner.one`), its calls charged to its own
:class:`~jurist.experiments.costs.ItemCost`: the target's answer (or the one kept from a run
that stopped), its row kept as ``answered`` while the answer is judged, the verdicts
(:class:`~jurist.rubrics.scoring.SessionEvaluator`), then in the background, while the worker
takes its next item, the evaluation row and the item's row (one transaction, with the calls
queued before them), then its result file. The rows go through the store's writer
(:meth:`~jurist.store.Store.aqueue_write`): the rows of the items that finish together share one
transaction, and each item's file follows its committed row. A target that fails, turns that are not a session, an
answer that cannot be judged: that item's failure, recorded. A verdict refused by the spent
cost budget leaves the item answered, for the rerun.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Callable

from pydantic import JsonValue

from jurist.errors import ConfigError, InputError, ModelError, StoreError
from jurist.experiments.costs import ItemCost
from jurist.experiments.datasets import session_of
from jurist.experiments.records import DatasetItem, ExperimentItem, ExperimentRecord, ItemScore
from jurist.experiments.targets import Generation, Target
from jurist.ids import new_id
from jurist.jsonfiles import write_json
from jurist.judges.outcome import OK
from jurist.models.cost import BudgetExceeded, CostBudget, charged_to
from jurist.rubrics.models import RubricSet
from jurist.rubrics.naming import result_name
from jurist.rubrics.results import RubricResult
from jurist.rubrics.scoring import PASS_PERCENTAGE, ScoredSession, SessionEvaluator, facets
from jurist.rubrics.sessions import ChatSession
from jurist.store import Store
from jurist.store import experiments as q

ProgressFn = Callable[[str, str], None]  # (item id, status)
SOURCE = "experiment:{name}"  # the evaluations' source: which experiment judged them


def now() -> str:
    """The time, as the records write it (ISO 8601, UTC, seconds)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


async def _session(item: DatasetItem, turns: list[dict[str, JsonValue]], source: str) -> ChatSession:
    """The item and the target's turns as a session; read off the event loop when a turn has content
    parts (an image URL is resolved, which blocks)."""
    messages = [*(item.input if isinstance(item.input, list) else []), *turns]
    if any(not isinstance(m.get("content"), (str, type(None))) for m in messages):
        return await asyncio.to_thread(session_of, item, turns, source=source)
    return session_of(item, turns, source=source)


async def _done(write: asyncio.Future[None] | None) -> None:
    """Wait for a row being written (None: none)."""
    if write is not None:
        await write


def _refused(result: RubricResult) -> bool:
    """Whether a rubric of ``result`` was not judged because the cost budget was spent."""
    refused = f"{BudgetExceeded.__name__}:"
    return any(rs.status != OK and (rs.reasoning or "").startswith(refused) for rs in result.rubric_scores)


def item_scores(result: RubricResult, rubric_set: RubricSet) -> dict[str, ItemScore]:
    scales = {r.id: rubric_set.scale_of(r) for r in rubric_set.rubrics}
    out: dict[str, ItemScore] = {}
    for rs in result.rubric_scores:
        score = rs.final_score if rs.status == OK else None
        hi = scales.get(rs.rubric_id, (0.0, rs.max_score))[1]
        passed = None if score is None or not hi else score / hi * 100.0 >= PASS_PERCENTAGE
        out[rs.rubric_id] = ItemScore(score=score, max_score=rs.max_score, passed=passed, status=rs.file_status,
                                      reason=rs.reasoning)
    return out


class ItemRunner:
    """The items of one run of an experiment: the workers, each item's answer, verdict and rows, the counts."""

    def __init__(self, parallel: int, record: ExperimentRecord, store: Store, target: Target,
                 evaluator: SessionEvaluator, out: Path, budget: CostBudget,
                 on_progress: ProgressFn | None) -> None:
        self.parallel = parallel
        self.record = record
        self.store = store
        self.target = target
        self.evaluator = evaluator
        self.out = out
        self.budget = budget
        self.on_progress = on_progress
        self.done_now = self.failed_now = self.resumed = 0
        self.stopped = False
        self.saving: set[asyncio.Task[None]] = set()  # judged items being saved

    def _progress(self, item_id: str, status: str) -> None:
        if self.on_progress is not None:
            self.on_progress(item_id, status)

    async def _finish(self, item: ExperimentItem, stored: bool = False) -> None:
        """Store the item's row (durable; ``stored``: it is), then write its result file."""
        if not stored:
            await self.store.aqueue_write(partial(q.save_item, item=item))
        await asyncio.to_thread(write_json, self.out / result_name(item.item_id), item.model_dump(mode="json"))
        self.done_now += 1
        self.failed_now += item.status == "failed"
        self._progress(item.item_id, item.status)

    def _failed(self, item: DatasetItem, error: str, cost: ItemCost,
                gen: Generation | None = None) -> ExperimentItem:
        usd, note = cost.item_cost
        return ExperimentItem(experiment=self.record.name, item_id=item.id, status="failed", error=error,
                              answer=gen.answer if gen else None,
                              generation_call_id=gen.call_id if gen else None,
                              latency_ms=gen.latency_ms if gen else None, cost_usd=usd, cost_note=note,
                              judged_at=now())

    async def one(self, item: DatasetItem, kept: dict[str, JsonValue] | None) -> None:
        """Generate (or take the kept answer), judge and store one item; its calls are charged to
        its own :class:`ItemCost` (and through it to the run's budget)."""
        cost = ItemCost(run=self.budget)
        with charged_to(cost):
            await self._one(item, kept, cost)

    async def _one(self, item: DatasetItem, kept: dict[str, JsonValue] | None, cost: ItemCost) -> None:
        trace = new_id()
        kept_row: asyncio.Future[None] | None = None  # the answer's row, written while the answer is judged
        if kept is not None:
            gen = Generation.from_json(kept)
            cost.add_kept(kept.get("cost"))
            self.resumed += 1
        else:
            try:
                gen = await self.target.generate(item, trace)
            except BudgetExceeded:
                self.stopped = True
                return
            except ModelError as exc:
                await self._finish(self._failed(item, f"the target failed: {type(exc).__name__}: {exc}", cost))
                return
            answer = {**gen.to_json(), "trace_id": trace, "cost": cost.to_json()}
            kept_row = asyncio.ensure_future(
                self.store.aqueue_write(partial(q.save_answer, name=self.record.name, item_id=item.id,
                                                answer=answer)))
            self.saving.add(kept_row)
            kept_row.add_done_callback(self._saved)
        try:
            session = await _session(item, gen.turns, SOURCE.format(name=self.record.name))
        except InputError as exc:
            await _done(kept_row)
            await self._finish(self._failed(item, f"the target's turns are not a chat session: {exc.reason}", cost,
                                            gen))
            return
        try:
            scored = await self.evaluator.score(session)
        except (ConfigError, StoreError):
            await _done(kept_row)
            raise
        except Exception as exc:  # this item could not be judged: its failure alone
            await _done(kept_row)
            await self._finish(self._failed(item, f"the answer could not be judged: {type(exc).__name__}: {exc}",
                                            cost, gen))
            return
        result = scored.result
        if _refused(result):  # the budget was spent before a verdict: the item stays answered, for a rerun
            await _done(kept_row)
            self.stopped = True
            return
        usd, note = cost.item_cost
        failed = [rs for rs in result.rubric_scores if rs.status != OK]
        error = "; ".join(f"rubric {rs.rubric_id}: {rs.reasoning or rs.file_status}" for rs in failed) or None
        s = result.summary
        done = ExperimentItem(
            experiment=self.record.name, item_id=item.id, status="failed" if failed else "scored",
            answer=gen.answer, error=error, scores=item_scores(result, self.evaluator.rubric_set),
            score=s.total_score, max_score=s.max_score, percentage=s.percentage, passed=facets(result)["passed"],
            evaluation_id=scored.row.id, generation_call_id=gen.call_id, cost_usd=usd, cost_note=note,
            latency_ms=gen.latency_ms, judged_at=now())
        save = asyncio.ensure_future(self._save(scored, done, kept_row))  # the worker takes its next item
        self.saving.add(save)
        save.add_done_callback(self._saved)

    async def _save(self, scored: ScoredSession, item: ExperimentItem, kept_row: asyncio.Future[None] | None) -> None:
        """The evaluation row and the item's row (one transaction, with the calls queued before it), then
        the item's file."""
        await _done(kept_row)
        await self.store.asave_evaluation(scored.row, scored.score_rows, then=partial(q.save_item, item=item),
                                          urgent=False)
        await self._finish(item, stored=True)

    def _saved(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            self.saving.discard(task)  # a failed save stays, for run() to raise

    async def run(self, todo: list[tuple[DatasetItem, dict[str, JsonValue] | None]]) -> None:
        queue = iter(todo)

        async def worker() -> None:
            for item, kept in queue:
                if self.stopped or self.budget.exceeded:
                    self.stopped = True
                    return
                await self.one(item, kept)

        workers = [asyncio.ensure_future(worker()) for _ in range(min(self.parallel, len(todo)))]
        try:
            await asyncio.gather(*workers)
            await asyncio.gather(*self.saving)
        except BaseException:
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            # items judged: their rows and files are written before the run stops
            await asyncio.gather(*self.saving, return_exceptions=True)
            raise
