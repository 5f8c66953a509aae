"""Running an experiment: a target answers every item of a dataset version, a rubric set judges it.

For each item the target generates an answer (:mod:`jurist.experiments.targets`); the answer
is kept in the store at once (status ``answered``), then judged as the last turn of a chat
session (the item's input, then the target's turns, the item's ``expected`` answers with
it) by the :class:`~jurist.rubrics.scoring.SessionEvaluator`; the evaluation row is
committed, then the item's :class:`ExperimentItem` row, then its result file
``<item id>_result.json`` in the output folder. ``summary.json`` is written at the end,
from the store.

* **Resumable.** A rerun with the same name skips the items that were scored, retries the
  failed ones (``retry_failed``), and judges the kept answer of an item that was answered
  but not judged when the run stopped (Ctrl-C, a crash, ``kill -9``): no item is generated
  or judged twice. A rerun must run what the experiment ran (dataset version, target,
  rubrics, judge): anything else is refused.
* **One run at a time.** The run holds the experiment's lock
  (:class:`~jurist.store.experiments.ExperimentLock`); a second run of the same name is
  refused at once. The lock dies with its process, so a killed run's lock is taken over.
* **Failures are items' failures.** A target that errs or times out fails its item (status
  ``failed``, its error kept) and the experiment goes on; so does an item a rubric could not
  score (its scores kept, the error naming the rubric).
* **Cost.** Each item's cost is the known cost of its recorded calls (generation and
  judging); ``max_cost`` stops the run once the total reaches it: the items in flight
  finish, the status is ``stopped``, and a rerun with a larger budget goes on.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator, Callable

from pydantic import JsonValue

from jurist.config import Settings
from jurist.errors import InputError, NotFound
from jurist.experiments.datasets import check_name
from jurist.experiments.items import ItemRunner, ProgressFn, now
from jurist.experiments.records import DatasetItem, ExperimentItem, ExperimentRecord, ExperimentStatus, RubricRef
from jurist.experiments.summary import build_summary
from jurist.experiments.targets import Target, load_target
from jurist.gc_tuning import fewer_collections
from jurist.jsonfiles import write_json
from jurist.models.cost import CostBudget, charged_to, format_usd
from jurist.rubrics.api import build_judge, load_template
from jurist.rubrics.batch import EXIT_BUDGET
from jurist.rubrics.calibration import require_rubric_calibrations, rubric_identities
from jurist.rubrics.models import RubricSet, load_rubrics
from jurist.rubrics.naming import result_name
from jurist.rubrics.scoring import SessionEvaluator
from jurist.runtime import Runtime, runtime_for
from jurist.store import Store
from jurist.store import experiments as q
from jurist.store.store import BATCH_LOOKUP_LINGER
from jurist.version import __version__


@dataclass
class ExperimentSpec:
    """What to run: ``target`` over dataset ``dataset`` (``version``: a hash or number; None:
    the latest), judged with ``rubrics`` by ``judge``; ``parallel`` items at once."""

    name: str
    dataset: str
    target: str
    rubrics: str | Path | RubricSet
    version: str | None = None
    judge: str | None = None
    template: str | Path | None = None
    parallel: int = 8
    output_dir: str | Path | None = None  # default: experiments/<name>
    retry_failed: bool = True
    max_cost: float | None = None


@dataclass
class ExperimentReport:
    record: ExperimentRecord
    summary: dict[str, JsonValue]
    summary_path: Path
    done_now: int = 0  # items finished in this run (scored or failed)
    skipped: int = 0  # items done before this run
    resumed: int = 0  # items whose kept answer was judged now (not generated again)
    failed_now: int = 0
    notes: list[str] = field(default_factory=list)  # what the run wants said (a budget reached, a resume)
    budget_stopped: bool = False  # the cost budget was spent: items are left for a rerun

    @property
    def exit_code(self) -> int:
        """0: every item scored; 3: the cost budget stopped the run (as evaluate-batch); 1: an item
        failed, or the run stopped before every item was done."""
        r = self.record
        if self.budget_stopped:
            return EXIT_BUDGET
        return 0 if r.items_failed == 0 and r.items_scored == r.items_total else 1


def git_commit(folder: str | Path | None = None) -> str | None:
    """The git commit checked out in ``folder`` (default: the current one), with ``-dirty`` when
    it has changes; None when it is not a git checkout (or git is missing)."""
    cwd = str(folder or os.getcwd())
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return f"{commit}-dirty" if status.returncode == 0 and status.stdout.strip() else commit


def rubric_refs(rubric_set: RubricSet, evaluator: SessionEvaluator) -> list[RubricRef]:
    ids = rubric_identities(rubric_set, evaluator.judge)
    return [RubricRef(id=r.id, name=r.name, weight=r.weight, template_hash=ids[r.id].template_hash)
            for r in rubric_set.rubrics]


def _same_run(old: ExperimentRecord, new: ExperimentRecord) -> str | None:
    """Why ``new`` cannot resume ``old`` (None: it can)."""
    for label, a, b in (("dataset version", old.dataset_version, new.dataset_version),
                        ("target", old.target, new.target),
                        ("judge", old.judge_models, new.judge_models),
                        ("rubrics", [r.model_dump() for r in old.rubrics], [r.model_dump() for r in new.rubrics])):
        if a != b:
            shown = (a, b) if label != "rubrics" else ([r.id for r in old.rubrics], [r.id for r in new.rubrics])
            what = "rubrics or their templates" if label == "rubrics" else label
            resume = f" (--version {old.dataset_version} resumes it)" if label == "dataset version" else ""
            return (f"the experiment {old.name!r} ran with another {what} ({shown[0]}; now {shown[1]}): "
                    f"a rerun resumes the same run{resume}; give another --name for a new experiment")
    return None


async def _evaluator(runtime: Runtime, store: Store, spec: ExperimentSpec, rubric_set: RubricSet) -> SessionEvaluator:
    loaded = await asyncio.to_thread(load_template, spec.template, store)
    judge = build_judge(runtime, judge=spec.judge, template=loaded)
    try:
        await require_rubric_calibrations(runtime, rubric_set, judge, loaded)  # before any judge call
    except BaseException:
        await judge.aclose()
        raise
    s = runtime.settings
    return SessionEvaluator(rubric_set, judge, store, s.session_char_budget, s.rubric_timeout,
                            s.allow_private_image_urls)


@dataclass
class Prepared:
    """What a run needs, set up before any call: the store, the dataset version and its items,
    the target (imported or resolved) and the evaluator (the judge, its calibration checked)."""

    store: Store
    dataset_version: str
    items: list[DatasetItem]
    target: Target
    evaluator: SessionEvaluator


@asynccontextmanager
async def prepared(spec: ExperimentSpec, settings: Settings | None = None,
                   runtime: Runtime | None = None) -> AsyncIterator[Prepared]:
    """Check ``spec`` and set up its run (see :class:`Prepared`); an InputError, NotFound or
    ConfigError (the names, the dataset, the rubrics, the target, the judge) comes before any call.
    Closes what it opened."""
    check_name(spec.name, "experiment")
    check_name(spec.dataset, "dataset")
    if spec.parallel < 1:
        raise InputError(f"--parallel must be at least 1, got {spec.parallel}")
    own = runtime is None
    runtime = await asyncio.to_thread(runtime_for, runtime, settings, None, lookup_linger=BATCH_LOOKUP_LINGER)
    try:
        store = await runtime.astore()
        version = await asyncio.to_thread(store.dataset_version, spec.dataset, spec.version)
        if version is None:
            which = f" version {spec.version}" if spec.version else ""
            raise NotFound(f"no dataset {spec.dataset!r}{which} in the store; add it with "
                           f"jurist datasets add {spec.dataset} FILE (jurist datasets list shows what there is)")
        items = await asyncio.to_thread(store.dataset_items, spec.dataset, version.dataset_version)
        rubric_set = (spec.rubrics if isinstance(spec.rubrics, RubricSet) else
                      await asyncio.to_thread(load_rubrics, spec.rubrics, runtime.settings.score_scale))
        target = await asyncio.to_thread(load_target, spec.target, runtime)  # an import: before any call
        try:
            evaluator = await _evaluator(runtime, store, spec, rubric_set)
            try:
                yield Prepared(store, version.dataset_version, items, target, evaluator)
            finally:
                await evaluator.judge.aclose()
        finally:
            await target.aclose()
    finally:
        await (runtime.aclose() if own else runtime.aflush())


async def run_experiment(spec: ExperimentSpec, *, settings: Settings | None = None, runtime: Runtime | None = None,
                         on_progress: ProgressFn | None = None,
                         on_start: Callable[[ExperimentRecord, int], None] | None = None) -> ExperimentReport:
    """Run (or resume) the experiment ``spec`` names; ``on_start(record, items to do)`` is told
    before the first call. Raises an InputError (the dataset, the target, the rubrics, a name,
    a run of the same name in progress) before any call."""
    budget = CostBudget(max_usd=spec.max_cost)
    async with prepared(spec, settings, runtime) as p:
        return await _locked(spec, p.store, p.target, p.evaluator, p.dataset_version, p.items, budget,
                             on_progress, on_start)


def todo_items(items: list[DatasetItem], states: dict[str, tuple[str, dict[str, JsonValue] | None]],
               retry_failed: bool) -> tuple[list[tuple[DatasetItem, dict[str, JsonValue] | None]], list[str]]:
    """The items a run does (each with its kept answer, if it has one) and the ids of those done before."""
    todo: list[tuple[DatasetItem, dict[str, JsonValue] | None]] = []
    done: list[str] = []
    for item in items:
        state, kept = states.get(item.id, (None, None))
        if state == "scored" or (state == "failed" and not retry_failed):
            done.append(item.id)
        else:
            todo.append((item, kept if state == "answered" else None))
    return todo, done


async def _locked(spec: ExperimentSpec, store: Store, target: Target, evaluator: SessionEvaluator,
                  dataset_version: str, items: list[DatasetItem], budget: CostBudget,
                  on_progress: ProgressFn | None,
                  on_start: Callable[[ExperimentRecord, int], None] | None) -> ExperimentReport:
    judge = evaluator.judge
    out = Path(spec.output_dir) if spec.output_dir is not None else Path("experiments") / spec.name
    rubrics_file = None if isinstance(spec.rubrics, RubricSet) else str(spec.rubrics)
    commit = await asyncio.to_thread(git_commit)
    fresh = ExperimentRecord(
        name=spec.name, dataset=spec.dataset, dataset_version=dataset_version, target=spec.target,
        rubrics_file=rubrics_file, rubrics_version=evaluator.rubric_set.version,
        rubrics=rubric_refs(evaluator.rubric_set, evaluator),
        judge_models=[judge.name] + ([judge.visual.name] if judge.visual is not None else []),
        jurist_version=__version__, git_commit=commit, created_at=now(), items_total=len(items),
        output_dir=str(out))
    lock = store.experiment_lock(spec.name)
    await asyncio.to_thread(lock.acquire)
    try:
        notes: list[str] = []
        old = await asyncio.to_thread(store.experiment, spec.name)
        record = fresh
        if old is not None:
            why = _same_run(old, fresh)
            if why is not None:
                raise InputError(why)
            record = old.model_copy(update={"status": "running", "finished_at": None, "output_dir": str(out)})
            began = (old.git_commit or "").split(" (resumed at ")[0] or None
            if began != commit:
                notes.append(f"resumed at git commit {commit}; the experiment began at {began}")
                record = record.model_copy(update={"git_commit": f"{began} (resumed at {commit})"})
        await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
        await store.awrite(q.save_experiment, record)
        states = await store.aread(q.item_states, spec.name)
        todo, done_before = todo_items(items, states, spec.retry_failed)
        skipped = len(done_before)
        for item_id in done_before:
            if on_progress is not None:
                on_progress(item_id, "skipped")
        if on_start is not None:
            on_start(record, len(todo))
        run = ItemRunner(spec.parallel, record, store, target, evaluator, out, budget, on_progress)
        status: ExperimentStatus = "interrupted"
        try:
            with charged_to(budget), fewer_collections():  # every call of the run is charged to the budget
                await run.run(todo)
            status = "stopped" if run.stopped else "finished"
        finally:
            done = await store.aread(q.get_experiment_items, spec.name)
            record = _closed(record, done, status)
            await store.awrite(q.save_experiment, record)
            summary = build_summary(record, done)
            summary_path = out / "summary.json"
            await asyncio.to_thread(_write_files, out, done, summary)
        if run.stopped:
            notes.append(f"stopped: the cost budget of {format_usd(spec.max_cost)} was reached "
                         f"({format_usd(budget.spent_usd)} this run); rerun with a larger --max-cost to go on")
        if spec.max_cost is not None and budget.unknown:
            why = max(budget.unknown_notes, key=budget.unknown_notes.__getitem__)
            notes.append(f"{budget.unknown} calls of unknown cost do not count toward --max-cost ({why})")
        if run.resumed:
            notes.append(f"{run.resumed} items answered before the run stopped were judged now, not generated again")
        return ExperimentReport(record, summary, summary_path, done_now=run.done_now, skipped=skipped,
                                resumed=run.resumed, failed_now=run.failed_now, notes=notes,
                                budget_stopped=run.stopped)
    finally:
        await asyncio.to_thread(lock.release)


def _write_files(out: Path, done: list[ExperimentItem], summary: dict[str, JsonValue]) -> None:
    """summary.json, and the result file of each done item that has none (a run killed between an
    item's row and its file; another output folder): every stored item has its file."""
    for item in done:
        path = out / result_name(item.item_id)
        if not path.exists():
            write_json(path, item.model_dump(mode="json"))
    write_json(out / "summary.json", summary)


def _closed(record: ExperimentRecord, done: list[ExperimentItem], status: ExperimentStatus) -> ExperimentRecord:
    scored = sum(1 for i in done if i.status == "scored")
    costs = [i.cost_usd for i in done if i.cost_usd is not None]
    unknown = sum(1 for i in done if i.cost_note)
    if status == "finished" and len(done) < record.items_total:
        status = "stopped"
    return record.model_copy(update={
        "status": status, "finished_at": now() if status == "finished" else None,
        "items_scored": scored, "items_failed": len(done) - scored,
        "cost_usd": round(sum(costs), 9) if costs else None,
        "cost_note": f"{unknown} items had a call of unknown cost; the total counts the known costs" if unknown
        else None})
