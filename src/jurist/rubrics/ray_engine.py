"""Batch scoring on a Ray cluster: the same results as :func:`run_batch`, more processes.

The driver lists the session files (names only), cuts them into shards and
hands each shard to one of several worker actors; a worker scores its shard
with the same ``SessionEvaluator``, result files and store rows as the local
engine, ``parallel`` sessions at once. The driver feeds every outcome into
the same :class:`BatchTally`, so ``summary.json`` is built as locally.

* The endpoint's limits hold across the cluster: each worker builds its
  judge with the limiter URL ``ray://<job id>`` (or the ``redis://`` one of
  ``limiter_url``), so its ``Model`` is born with a
  :class:`~jurist.models.shared_limiter.SharedLimiter` on the job's limiter
  actor for the endpoint.
* Resumable as locally: a session with a scored result is not scored again,
  one whose result failed is (unless ``retry_failed`` is false); the driver
  holds the output folder's lock for the whole run.
* A worker that dies is restarted by Ray and its shards are retried; what
  the dead worker finished is skipped, what it had stored but not yet
  written out is scored again, and its store write is ignored: evaluations
  get ids derived from session, rubrics version and judge, and a result file
  is written only once its store row is durable.

Ray is imported only here, and only when a batch runs on it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import resource
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from jurist.config import Settings
from jurist.errors import InputError, JuristError
from jurist.gc_tuning import tune_gc
from jurist.jsonfiles import write_json
from jurist.models.limiter_pool import with_max_held
from jurist.models.shared_limiter import import_ray
from jurist.rubrics.batch import (BatchReport, BatchTally, ProgressFn, needs_scoring, open_session, result_name,
                                  session_files)
from jurist.rubrics.folder import ResultFolder
from jurist.rubrics.models import RubricSet, load_rubrics
from jurist.rubrics.results import RubricResult
from jurist.runtime import Runtime, runtime_for
from jurist.store import Store
from jurist.store.rows import EvaluationRow

# Variables a worker needs to build the same adapters as the driver (keys, base URLs).
_ENV_PASSED = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
_PREFETCH = 2  # shards queued per worker, so it never waits for the driver between shards
_FLUSH_LINGER = 0.05  # sessions finishing this close together share one store flush and file-writing trip


def evaluation_id(subject_id: str, rubrics_version: str | None, judge_model: str, generation: str = "") -> str:
    """The id of a rubric evaluation, derived from what it evaluates (and, for
    ``--force`` runs, the run's generation), so writing it twice writes it once."""
    key = "\x1f".join(("rubric", subject_id, rubrics_version or "", judge_model, generation))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


class _OnceSink:
    """The evaluator's store sink on a worker: deterministic ids, written at most once."""

    def __init__(self, store: Store, generation: str) -> None:
        self.store = store
        self.generation = generation

    def _derived(self, evaluation: EvaluationRow) -> EvaluationRow:
        key = evaluation_id(evaluation.subject_id, evaluation.rubrics_version, evaluation.judge_model or "",
                            self.generation)
        return dataclasses.replace(evaluation, id=key)

    def save_evaluation(self, evaluation: EvaluationRow, score_rows: list[dict[str, Any]]) -> None:
        self.store.save_evaluation_once(self._derived(evaluation), score_rows)

    async def asave_evaluation(self, evaluation: EvaluationRow, score_rows: list[dict[str, Any]]) -> None:
        await self.store.asave_evaluation(self._derived(evaluation), score_rows)

    def evaluation_ids(self, ids: Iterable[str]) -> set[str]:
        return self.store.evaluation_ids(ids)


class _ResultWriter:
    """Writes result files once their store rows are durable.

    Sessions that finish within ``_FLUSH_LINGER`` of each other share one
    store flush and one trip to a thread, which then writes their files.
    """

    def __init__(self, store: Any, out: Path) -> None:
        self.store = store
        self.out = out
        self._items: list[tuple[str, RubricResult]] = []
        self._done: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    async def write(self, session_id: str, result: RubricResult) -> None:
        """Return once the session's store row and then its result file are written."""
        if self._done is None:
            self._done = asyncio.get_running_loop().create_future()
        done = self._done
        self._items.append((session_id, result))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        await asyncio.shield(done)

    async def _run(self) -> None:
        while self._done is not None:
            await asyncio.sleep(_FLUSH_LINGER)  # more sessions join this group
            items, done = self._items, self._done  # rows queued before this point are in this flush
            self._items, self._done = [], None
            try:
                await asyncio.to_thread(self._flush_and_write, items)
                done.set_result(None)
            except Exception as exc:
                done.set_exception(exc)

    def _flush_and_write(self, items: list[tuple[str, RubricResult]]) -> None:
        self.store.flush()
        for session_id, result in items:
            write_json(self.out / result_name(session_id), result)


def _open_shard(files: list[str], out: Path, force: bool, allow_private_image_urls: bool) -> list[tuple[str, Any, Any]]:
    """Load a shard's sessions in one go (blocking: run in a thread): per file,
    (file, session, existing result) or (file, InputError, None)."""
    opened: list[tuple[str, Any, Any]] = []
    for name in files:
        try:
            session, existing = open_session(Path(name), out, force, allow_private_image_urls=allow_private_image_urls)
        except InputError as exc:
            opened.append((name, exc, None))
        else:
            opened.append((name, session, existing))
    return opened


def _cpu() -> float:
    """CPU seconds of this process so far (all threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class WorkerSpec:
    """Everything a worker needs; sent to it once."""

    rubric_set: RubricSet
    settings: Settings
    judge: str
    template: str | None
    cache: bool | None
    output_dir: str
    force: bool
    parallel: int
    generation: str
    retry_failed: bool = True
    limiter_url: str | None = None  # the workers' limiter: ray://<job id> or limiter_url, with max_held
    worker_concurrency: int | None = None
    max_concurrency: int | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkerInfo:
    """Where a worker runs."""

    pid: int
    node: str


@dataclass(frozen=True)
class WorkerStats:
    """What a worker did, when it closes: the sessions it scored, its CPU time and, with a shared
    limiter, that limiter's figures (None: the limiter does not count them)."""

    pid: int
    scored: int
    cpu_s: float
    peak_in_flight: int | None = None
    actor_calls: int | None = None
    local_handovers: int | None = None


@dataclass(frozen=True)
class ShardOutcome:
    """One file of a shard: an input error, a result already there, or one scored now."""

    file: str
    kind: Literal["input_error", "existing", "scored"]
    session_id: str = ""
    error: str | None = None
    result: RubricResult | None = None
    retried: bool = False


class BatchWorker:
    """One worker process (a Ray actor): a store, a judge and ``parallel`` session slots."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self._ready: asyncio.Future[WorkerInfo] | None = None
        self._queue: asyncio.Queue[tuple[str, Any, asyncio.Future[ShardOutcome], bool]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.scored = 0  # sessions this process scored
        self._cpu_at_start = _cpu()

    async def start(self) -> WorkerInfo:
        """Open the store, build the judge, join the shared limiter (once; also after a restart)."""
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            try:
                self._ready.set_result(await self._setup())
            except Exception as exc:  # a bad judge or store stays bad: every shard call reports it
                self._ready.set_exception(exc)
                raise
            except BaseException:
                self._ready.cancel()
                self._ready = None
                raise
        return await asyncio.shield(self._ready)

    async def _setup(self) -> WorkerInfo:
        from jurist.models.shared_limiter import SharedLimiter
        from jurist.rubrics.api import build_judge
        from jurist.rubrics.scoring import SessionEvaluator
        from jurist.store.store import BATCH_LOOKUP_LINGER

        spec = self.spec
        os.environ.update(spec.env)
        # The worker's edge: its own runtime, built from the settings the driver passed (the cluster's
        # limiter URL, the batch's max_concurrency), with its own store connection.
        settings = spec.settings.model_copy(update={"limiter_url": spec.limiter_url})
        self.runtime = Runtime(settings, lookup_linger=BATCH_LOOKUP_LINGER, max_in_flight=spec.max_concurrency)
        self.store = await self.runtime.astore()
        self.judge = build_judge(self.runtime, judge=spec.judge, template=spec.template, cache=spec.cache)
        for model in (self.judge.model, self.judge.visual):
            if model is not None and isinstance(model.limiter, SharedLimiter):
                await model.limiter.start()  # registered now: a restarted worker frees what its predecessor held
        self.evaluator = SessionEvaluator(spec.rubric_set, self.judge, _OnceSink(self.store, spec.generation),
                                          spec.settings.session_char_budget, spec.settings.rubric_timeout)
        self.out = Path(spec.output_dir)
        self.writer = _ResultWriter(self.store, self.out)
        self._queue = asyncio.Queue()
        self._tasks = [asyncio.create_task(self._consume()) for _ in range(spec.parallel)]
        tune_gc()
        self._cpu_at_start = _cpu()
        return await self.info()

    async def info(self) -> WorkerInfo:
        import ray

        return WorkerInfo(pid=os.getpid(), node=ray.get_runtime_context().get_node_id())

    async def score(self, files: list[str]) -> list[ShardOutcome]:
        """Score a shard; one outcome per file, in order."""
        await self.start()
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        outcomes: list[ShardOutcome | asyncio.Future[ShardOutcome]] = []
        for name, session, existing in await asyncio.to_thread(_open_shard, files, self.out, self.spec.force,
                                                                self.spec.settings.allow_private_image_urls):
            if isinstance(session, InputError):
                outcomes.append(ShardOutcome(file=name, kind="input_error", error=str(session)))
            elif not needs_scoring(existing, self.spec.retry_failed):
                outcomes.append(ShardOutcome(file=name, kind="existing", session_id=session.session_id,
                                             result=existing))
            else:
                fut: asyncio.Future[ShardOutcome] = loop.create_future()
                self._queue.put_nowait((name, session, fut, existing is not None))
                outcomes.append(fut)
        return [await o if isinstance(o, asyncio.Future) else o for o in outcomes]

    async def _consume(self) -> None:
        assert self._queue is not None
        while True:
            name, session, fut, retried = await self._queue.get()
            try:
                result = await self.evaluator.evaluate(session)
                await self.writer.write(session.session_id, result)
            except Exception as exc:
                if not fut.done():
                    fut.set_exception(exc)
            else:
                self.scored += 1
                if not fut.done():
                    fut.set_result(ShardOutcome(file=name, kind="scored", session_id=session.session_id,
                                                result=result, retried=retried))

    async def close(self) -> WorkerStats:
        """Finish: give back permits, close the judge, write the last store rows."""
        for task in self._tasks:
            task.cancel()
        stats = WorkerStats(pid=os.getpid(), scored=self.scored, cpu_s=round(_cpu() - self._cpu_at_start, 3))
        if self._ready is not None and self._ready.done() and not self._ready.exception():
            model = getattr(self.judge, "model", None)
            if model is not None:
                limiter = model.limiter.stats()
                stats = dataclasses.replace(stats, peak_in_flight=limiter.peak_in_flight,
                                            actor_calls=limiter.actor_calls, local_handovers=limiter.local_handovers)
                await model.limiter.aclose()  # permits go back; the Redis connection closes
            visual = getattr(self.judge, "visual", None)
            if visual is not None and visual.limiter is not getattr(model, "limiter", None):
                await visual.limiter.aclose()
            await self.judge.aclose()
            await self.runtime.aclose()
        return stats


@dataclass
class RayOptions:
    """How the batch runs on the cluster."""

    address: str | None = None  # None: start a local cluster, "auto": the running one, or ray://host:port
    workers: int | None = None  # worker actors (default: the cluster's CPUs / worker_cpus)
    worker_cpus: float = 1.0
    shard_size: int = 100  # sessions per shard
    worker_concurrency: int | None = None  # requests in flight per worker (default: only the cluster bound)
    max_restarts: int = 3  # a worker that dies is restarted and its shards retried this many times


def _cause(exc: BaseException) -> BaseException:
    """The jurist error inside a Ray task error, or a clear JuristError."""
    from ray import exceptions as rex

    if isinstance(exc, rex.RayTaskError):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, JuristError):
            return cause
        return JuristError(f"a batch worker failed: {cause or exc}")
    if isinstance(exc, rex.RayActorError):
        return JuristError(f"a batch worker died and could not be restarted: {exc}. "
                           "Finished sessions are kept; rerun to resume.")
    return exc


def _env_for(settings: Settings) -> dict[str, str]:
    from jurist.models.registry import PRESETS

    names = set(_ENV_PASSED)
    for ps in [*PRESETS.values(), *settings.providers.values()]:
        if ps.api_key_env:
            names.add(ps.api_key_env)
    return {n: os.environ[n] for n in sorted(names) if os.environ.get(n)}


class RayBatch:
    """One batch run on Ray; :meth:`run` returns the same report as the local engine."""

    def __init__(
        self,
        rubric_set: RubricSet,
        sessions_dir: str | Path,
        output_dir: str | Path,
        *,
        settings: Settings | None = None,
        judge: str | None = None,
        template: str | Path | None = None,
        cache: bool | None = None,
        parallel: int = 5,
        max_concurrency: int | None = None,
        force: bool = False,
        retry_failed: bool = True,
        options: RayOptions | None = None,
        on_progress: ProgressFn | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        if parallel < 1:
            raise InputError(f"--parallel must be at least 1, got {parallel}")
        self.options = options or RayOptions()
        if self.options.shard_size < 1:
            raise InputError(f"the shard size must be at least 1, got {self.options.shard_size}")
        self.rubric_set = rubric_set
        self.sessions_dir = Path(sessions_dir).resolve()
        self.output_dir = Path(output_dir).resolve()
        # The driver's runtime (its store, the judge endpoint's bounds): the one given, else one
        # built here over the settings, at most max_concurrency requests in flight.
        self._own_runtime = runtime is None
        self.runtime = runtime if runtime is not None else runtime_for(None, settings, max_in_flight=max_concurrency)
        settings = self.runtime.settings
        # Workers run elsewhere: paths must not depend on their working directory.
        self.settings = settings.model_copy(update={"home": str(Path(settings.home).resolve())})
        self.judge = judge
        self.template = str(Path(template).resolve()) if template else None
        self.cache = cache
        self.parallel = parallel
        self.max_concurrency = max_concurrency
        self.force = force
        self.retry_failed = retry_failed
        self.on_progress = on_progress
        self.workers: list[Any] = []
        self.limiter: Any = None
        self.worker_stats: list[WorkerStats] = []
        self._started_ray = False
        # The judge endpoint's bounds for the job's limiter actor: endpoint, max in flight, rpm, tpm.
        self._bounds: tuple[str, int, int | None, int | None] | None = None

    async def run(self) -> BatchReport:
        try:
            files = await asyncio.to_thread(session_files, self.sessions_dir)
            spec = await self._spec()
            # Migrate once here (the driver's store), so workers opening the same database at once
            # find it ready; take the output folder (what a killed local batch left there is checked
            # against that store).
            folder = ResultFolder(self.output_dir, await self.runtime.astore())
            await folder.take()
            try:
                return await self._run(files, spec)
            finally:
                await folder.release()
        finally:
            await (self.runtime.aclose() if self._own_runtime else self.runtime.aflush())

    async def _run(self, files: list[Path], spec: WorkerSpec) -> BatchReport:
        await asyncio.to_thread(self._launch, spec)
        try:
            ready = [w.start.remote() for w in self.workers]
            if self.limiter is not None:
                ready.append(self.limiter.config.remote())
            await asyncio.gather(*(self._await(r) for r in ready))
            tally = BatchTally(self.rubric_set, self.on_progress)
            await self._dispatch(files, tally)
            self.worker_stats = list(await asyncio.gather(*(self._await(w.close.remote()) for w in self.workers)))
            return await tally.finish(self.output_dir)
        finally:
            await asyncio.to_thread(self._teardown)

    async def _spec(self) -> WorkerSpec:
        from jurist.models.registry import judge_ref, writes_text
        from jurist.rubrics.api import build_judge

        ref = judge_ref(self.settings, self.judge)
        spec = WorkerSpec(self.rubric_set, self.settings, ref, self.template, self.cache, str(self.output_dir),
                          self.force, self.parallel, uuid.uuid4().hex if self.force else "",
                          retry_failed=self.retry_failed, worker_concurrency=self.options.worker_concurrency, max_concurrency=self.max_concurrency,
                          env=_env_for(self.settings))
        if writes_text(ref):  # an endpoint to bound across the cluster (the local judge runs in each worker)
            # Resolved here as locally (fails fast on a bad template, model or key), for the endpoint's bounds.
            rj = build_judge(self.runtime, judge=ref, template=self.template, cache=self.cache)
            model = rj.model
            lim = model.limiter.stats()
            if lim.max_in_flight is not None:  # None: a ray:// limiter, whose actor holds the bounds already
                self._bounds = (model.endpoint, lim.max_in_flight, lim.requests_per_minute, lim.tokens_per_minute)
            await model.aclose()
        return spec

    def _launch(self, spec: WorkerSpec) -> None:
        ray = import_ray()
        from jurist.models.shared_limiter import ACTOR_NAMESPACE, limiter_actor

        if not ray.is_initialized():
            ray.init(address=self.options.address, namespace=ACTOR_NAMESPACE, log_to_driver=True)
            self._started_ray = True
        url = self.settings.limiter_url
        spec.limiter_url = None if url is None or url.startswith("memory:") else url  # redis://: Redis holds the bounds
        if self._bounds is not None and not spec.limiter_url:
            endpoint, max_in_flight, rpm, tpm = self._bounds
            # Not waited for here: its process starts while the workers' processes do.
            self.limiter = limiter_actor(endpoint, max_in_flight, rpm, tpm, wait=False)
            spec.limiter_url = f"ray://{ray.get_runtime_context().get_job_id()}"
        if spec.limiter_url and self.options.worker_concurrency:
            spec.limiter_url = with_max_held(spec.limiter_url, self.options.worker_concurrency)
        n = self.options.workers
        if n is None:
            n = max(1, int(ray.cluster_resources().get("CPU", 1) // max(self.options.worker_cpus, 0.001)))
        cls = ray.remote(BatchWorker)
        restarts = self.options.max_restarts
        self._spec_ref = ray.put(spec)  # held by the driver, so a restarted worker can read it again
        self.workers = [
            cls.options(num_cpus=self.options.worker_cpus, max_restarts=restarts, max_task_retries=restarts,
                        max_concurrency=1000).remote(self._spec_ref)
            for _ in range(n)
        ]

    async def _await(self, ref: Any) -> Any:
        try:
            return await asyncio.wrap_future(ref.future())
        except Exception as exc:
            raise _cause(exc) from None

    async def _dispatch(self, files: list[Path], tally: BatchTally) -> None:
        """Keep every worker ``_PREFETCH`` shards ahead; tally outcomes as shards finish."""
        size = self.options.shard_size
        shards = ([str(p) for p in files[i:i + size]] for i in range(0, len(files), size))
        load = [0] * len(self.workers)
        pending: dict[asyncio.Future[Any], int] = {}

        def fill() -> None:
            for i, worker in enumerate(self.workers):
                while load[i] < _PREFETCH:
                    shard = next(shards, None)
                    if shard is None:
                        return
                    pending[asyncio.ensure_future(self._await(worker.score.remote(shard)))] = i
                    load[i] += 1

        fill()
        try:
            while pending:
                done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    load[pending.pop(fut)] -= 1
                    for outcome in fut.result():
                        self._tally(outcome, tally)
                fill()
        finally:
            for fut in pending:
                fut.cancel()

    @staticmethod
    def _tally(outcome: ShardOutcome, tally: BatchTally) -> None:
        if outcome.kind == "input_error":
            tally.input_error(Path(outcome.file).name, outcome.error or "")
        elif tally.claim(outcome.session_id, outcome.file):
            assert outcome.result is not None  # an existing or a scored session has its result
            if outcome.kind == "existing":
                tally.add_existing(outcome.session_id, outcome.result)
            else:
                tally.add_scored(outcome.session_id, outcome.result, retried=outcome.retried)

    def _teardown(self) -> None:
        ray = import_ray()
        for worker in self.workers:
            try:
                ray.kill(worker, no_restart=True)
            except Exception:  # already gone
                pass
        if self.limiter is not None and self.workers:
            # A worker stopped before it gave its permits back (an interrupted run) must not keep them.
            ray.get([self.limiter.forget.remote(w._actor_id.hex()) for w in self.workers])
        if self._started_ray:
            ray.shutdown()


async def evaluate_batch_on_ray(
    rubrics: str | Path | RubricSet,
    sessions_dir: str | Path,
    output_dir: str | Path,
    *,
    settings: Settings | None = None,
    options: RayOptions | None = None,
    runtime: Runtime | None = None,
    **kwargs: Any,
) -> BatchReport:
    """:func:`jurist.rubrics.evaluate_batch` on a Ray cluster (same arguments, plus ``options``).
    The driver runs in ``runtime`` (else one built by :func:`~jurist.runtime.runtime_for` over
    ``settings``, else the loaded ones, with ``max_concurrency``); the workers build their own
    from its settings and open their own stores on its database."""
    own = runtime is None
    runtime = await asyncio.to_thread(runtime_for, runtime, settings, max_in_flight=kwargs.get("max_concurrency"))
    try:
        rubric_set = rubrics if isinstance(rubrics, RubricSet) else await asyncio.to_thread(
            load_rubrics, rubrics, runtime.settings.score_scale)
        if any(rubric_set.requirement_for(r) for r in rubric_set.rubrics):  # before any worker or judge call
            await _require_calibrations(rubric_set, runtime, judge=kwargs.get("judge"),
                                        template=kwargs.get("template"))
        return await RayBatch(rubric_set, sessions_dir, output_dir, runtime=runtime, options=options,
                              **kwargs).run()
    finally:
        if own:
            await runtime.aclose()


async def _require_calibrations(rubric_set: RubricSet, runtime: Runtime, *, judge: str | None,
                                template: str | Path | None) -> None:
    """``require_calibration``'s look-up for a Ray batch, on the driver, before any worker starts."""
    from jurist.rubrics.api import build_judge, load_template
    from jurist.rubrics.calibration import require_rubric_calibrations

    store = await runtime.astore()
    loaded = await asyncio.to_thread(load_template, template, store)
    rj = build_judge(runtime, judge=judge, template=loaded)
    try:
        await require_rubric_calibrations(runtime, rubric_set, rj, loaded)
    finally:
        await rj.model.aclose()
