"""The library entry points of rubric scoring (async first, thin sync edges)."""

from __future__ import annotations

import asyncio
import re
from contextlib import asynccontextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any, AsyncIterator

from pydantic import JsonValue

from jurist.config import Settings
from jurist.judges import builtin, from_file
from jurist.errors import NotFound
from jurist.judges.templates import RUBRIC_PLACEHOLDERS, PromptTemplate
from jurist.rubrics.batch import BatchReport, ProgressFn, run_batch
from jurist.rubrics.calibration import require_rubric_calibrations
from jurist.rubrics.judging import RubricJudge
from jurist.rubrics.models import RubricSet, load_rubrics
from jurist.rubrics.results import RubricResult
from jurist.rubrics.scoring import SessionEvaluator
from jurist.rubrics.sessions import ChatSession, load_session
from jurist.runtime import Runtime, runtime_for
from jurist.store import Store
from jurist.store.store import BATCH_LOOKUP_LINGER, LOOKUP_LINGER
from jurist.store.analysis import get_prompt_version
from jurist.sync import run_sync


_STORED = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)@(?P<version>[0-9]{1,6})$")
_SHIPPED = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


def load_template(template: str | Path | PromptTemplate | None, store: Store | None) -> PromptTemplate:
    """The rubric judge's template: the shipped one, a shipped one by name (``judge_template``:
    note 003's ``SCORE:``/``REASONING:`` format), a file, or ``<name>@<version>``, a version
    kept in the store's prompt lab (``PUT /api/prompts/<name>``; version 1 is the shipped text).

    Blocking (file and database reads): call it off the event loop.
    """
    if template is None:
        return builtin("rubric_judge")
    if isinstance(template, PromptTemplate):
        return template
    if _SHIPPED.match(str(template)) and not Path(template).exists() and (
            files("jurist") / "templates" / f"{template}.txt").is_file():
        return builtin(str(template))  # a shipped template by name: judge_template (note 003's SCORE: format)
    match = _STORED.match(str(template))
    if match is None or Path(template).exists():
        return from_file(template)
    name, version = match["name"], int(match["version"])
    row = store.read(get_prompt_version, name, version) if store is not None else None
    if row is not None:
        return PromptTemplate(name=name, version=str(version), text=row.text, source=f"prompt {name}@{version}")
    if version == 1 and (files("jurist") / "templates" / f"{name}.txt").is_file():
        # the shipped text, as asked for: not the route's (an active version, an A/B test's arm)
        return PromptTemplate(name=name, version="1", text=builtin(name).text, source=f"prompt {name}@1")
    raise NotFound(f"no prompt {name!r} version {version} in the store; list the versions with "
                   f"GET /api/prompts/{name} (or give a template file)")


def build_judge(
    settings: Settings | Runtime,
    store: Store | None = None,
    *,
    judge: str | None = None,
    template: str | Path | PromptTemplate | None = None,
    cache: bool | None = None,
    score_mode: str | None = None,
    visual_evaluator: str | None = None,
) -> RubricJudge:
    """The rubric judge for a reference (default: settings, else the local judge), from a
    runtime (or settings and an optional store to record into). Sessions with images go to
    ``visual_evaluator`` (default: the settings'), a vision model, with their images; without
    one, the judge reads text placeholders. Close it with :meth:`RubricJudge.aclose`.

    ``template`` is a file, ``<name>@<version>`` (see :func:`load_template`) or a
    loaded template. It is checked before any call: an unknown placeholder is an
    ``InputError``. ``score_mode`` (default: the settings') is ``plain`` or
    ``logprobs`` (a weighted score beside the plain one, see :mod:`jurist.judges.weighting`).
    """
    runtime = settings if isinstance(settings, Runtime) else runtime_for(None, settings, store, open_store=False)
    free = load_template(template, store).check(RUBRIC_PLACEHOLDERS, required={"chat_session"})
    items = free if "rubric_items" in free.placeholders else builtin("rubric_items_judge")
    model = runtime.judge(judge, cache=cache)
    cfg = runtime.settings
    visual_ref = visual_evaluator or cfg.visual_evaluator
    visual = runtime.model(visual_ref, cache=cache) if visual_ref else None
    return RubricJudge(model, free, items, temperature=cfg.temperature, seed=cfg.seed, max_tokens=cfg.max_tokens,
                       score_mode=score_mode or cfg.score_mode, reask=cfg.retry_on_parse_failure, visual=visual,
                       prompts=runtime.prompts)


def _rubrics(rubrics: str | Path | RubricSet, settings: Settings) -> RubricSet:
    return rubrics if isinstance(rubrics, RubricSet) else load_rubrics(rubrics, settings.score_scale)




@asynccontextmanager
async def _evaluator(
    rubrics: str | Path | RubricSet, settings: Settings | None, store: Store | None, *, judge: str | None,
    template: str | Path | None, cache: bool | None, max_concurrency: int | None = None, batch: bool = False,
    runtime: Runtime | None = None, score_mode: str | None = None,
) -> AsyncIterator[SessionEvaluator]:
    """Rubrics, store and judge for a run, set up and closed off the event loop (the runtime:
    the one given, else one built by :func:`~jurist.runtime.runtime_for`, its endpoints at most
    ``max_concurrency`` requests in flight when that is given)."""
    own = runtime is None
    linger = BATCH_LOOKUP_LINGER if batch else LOOKUP_LINGER
    runtime = await asyncio.to_thread(runtime_for, runtime, settings, store, max_in_flight=max_concurrency,
                                      lookup_linger=linger)
    try:
        settings = runtime.settings
        rubric_set = await asyncio.to_thread(_rubrics, rubrics, settings)
        store = await runtime.astore()
        loaded = await asyncio.to_thread(load_template, template, store)
        rj = build_judge(runtime, judge=judge, template=loaded, cache=cache, score_mode=score_mode)
        try:
            await require_rubric_calibrations(runtime, rubric_set, rj, loaded)  # before any judge call
            yield SessionEvaluator(rubric_set, rj, store, settings.session_char_budget, settings.rubric_timeout,
                                   settings.allow_private_image_urls)
        finally:
            await rj.aclose()
    finally:
        await (runtime.aclose() if own else runtime.aflush())


async def evaluate(
    rubrics: str | Path | RubricSet,
    session: str | Path | ChatSession,
    *,
    judge: str | None = None,
    template: str | Path | None = None,
    settings: Settings | None = None,
    store: Store | None = None,
    cache: bool | None = None,
    runtime: Runtime | None = None,
    score_mode: str | None = None,
) -> dict[str, JsonValue]:
    """Score one session against a rubrics file; returns result.json's content
    (:func:`evaluate_result` gives it as a :class:`~jurist.rubrics.RubricResult`).
    ``score_mode``: ``plain`` or ``logprobs`` (default: the settings')."""
    return (await evaluate_result(rubrics, session, judge=judge, template=template, settings=settings, store=store,
                                  cache=cache, runtime=runtime, score_mode=score_mode)).to_json()


async def evaluate_result(
    rubrics: str | Path | RubricSet,
    session: str | Path | ChatSession,
    *,
    judge: str | None = None,
    template: str | Path | None = None,
    settings: Settings | None = None,
    store: Store | None = None,
    cache: bool | None = None,
    runtime: Runtime | None = None,
    score_mode: str | None = None,
) -> RubricResult:
    """:func:`evaluate`, the result as a :class:`~jurist.rubrics.RubricResult` (its ``to_json()``
    is result.json's content)."""
    async with _evaluator(rubrics, settings, store, judge=judge, template=template, cache=cache,
                          runtime=runtime, score_mode=score_mode) as evaluator:
        chat = session if isinstance(session, ChatSession) else await asyncio.to_thread(
            load_session, session, allow_private_image_urls=evaluator.allow_private_image_urls)
        return await evaluator.evaluate(chat)


async def evaluate_batch(
    rubrics: str | Path | RubricSet,
    sessions_dir: str | Path,
    output_dir: str | Path,
    *,
    parallel: int = 5,
    max_concurrency: int | None = None,
    force: bool = False,
    retry_failed: bool = True,
    judge: str | None = None,
    template: str | Path | None = None,
    settings: Settings | None = None,
    store: Store | None = None,
    cache: bool | None = None,
    on_progress: ProgressFn | None = None,
    runtime: Runtime | None = None,
    score_mode: str | None = None,
) -> BatchReport:
    """Score every session file in a folder; write per-session results and summary.json.

    Resumable: a rerun skips sessions with a scored result and scores again those whose
    result failed (unless ``retry_failed`` is false); ``force`` rescores every session.
    ``score_mode``: ``plain`` or ``logprobs`` (default: the settings'). ``max_concurrency``: at
    most that many requests in flight to each endpoint of the runtime built for the batch (a
    ``runtime`` given keeps the bounds it was built with: ``jurist.open(max_in_flight=...)``)."""
    async with _evaluator(rubrics, settings, store, judge=judge, template=template, cache=cache,
                          max_concurrency=max_concurrency, batch=True, runtime=runtime,
                          score_mode=score_mode) as evaluator:
        return await run_batch(evaluator, sessions_dir, output_dir, parallel=parallel, force=force,
                               retry_failed=retry_failed, on_progress=on_progress)


def evaluate_sync(*args: Any, **kwargs: Any) -> dict[str, JsonValue]:
    """:func:`evaluate` from sync code, also inside a running event loop."""
    return run_sync(evaluate(*args, **kwargs))


def evaluate_batch_sync(*args: Any, **kwargs: Any) -> BatchReport:
    """:func:`evaluate_batch` from sync code, also inside a running event loop."""
    return run_sync(evaluate_batch(*args, **kwargs))
