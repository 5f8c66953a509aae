"""Calibrating a judge panel's role judges, and a research stage's panel, on labelled items.

Each role of a :class:`~jurist.judges.panel.Panel` is one judge (its model and the
``panel_role`` template) scoring its dimensions from 0 to 1. People label items
pass or fail per dimension (``rubric``: the dimension key); every role that scores
a labelled dimension is compared with them on its own score, before aggregation
and escalation: a dimension passes at its pass mark (a research dimension's
``threshold``, else the stage's ``pass_threshold``; a panel's ``pass_threshold``),
and the threshold that best matches the people is fitted. One calibration per role
and dimension is stored: that is what the panel's ``require_calibration`` looks up.

A research stage's items are a JSONL file, one item per line::

    {"item": "q1", "query": "...", "plan": "... or {...}", "sources": [...], "answer": "..."}

with the fields the stage judges: plan: ``query``, ``plan``; retrieval: ``query``,
``plan``, ``sources``; answer: ``query``, ``sources``, ``answer``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES
from jurist.analysis.calibrate import CalibrationReport, JudgeScore, rubric_calibration, store_calibrations
from jurist.analysis.labels import Label, LabelSet
from jurist.errors import ConfigError, InputError
from jurist.ids import new_id
from jurist.jsonfiles import jsonl_objects, line_problem
from jurist.judges.calibration import StoreSource, calibrated_identity
from jurist.judges.outcome import OK
from jurist.judges.panel import Panel, RoleResult
from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.research.evaluation import ResearchEvaluation
from jurist.research.plan import plan_text
from jurist.research.retrieval import sources_text
from jurist.runtime import Runtime
from jurist.sync import gather_bounded

UNIT = (0.0, 1.0)  # the scale of a panel's scores
MAX_ITEMS_BYTES = 50_000_000
MAX_ITEM_LINE = 2_000_000
STAGE_FIELDS: dict[str, tuple[str, ...]] = {st.PLAN: ("query", "plan"), st.RETRIEVAL: ("query", "plan", "sources"),
                                            st.ANSWER: ("query", "sources", "answer")}


class ResearchItem(BaseModel):
    """One labelled research item: what a stage's panel judges."""

    model_config = ConfigDict(extra="forbid")

    item: str = Field(pattern=r"^[A-Za-z0-9_.:@/-]{1,300}$")
    query: str | None = None
    plan: Any = None
    sources: list[Any] | None = None
    answer: str | None = None


def stage_subject(stage: str, item: ResearchItem) -> dict[str, str]:
    """The texts a stage's panel is shown, as the stage builds them."""
    values = {"query": item.query, "plan": None if item.plan is None else plan_text(item.plan),
              "sources": None if item.sources is None else sources_text(item.sources), "answer": item.answer}
    return {k: str(values[k]) for k in STAGE_FIELDS[stage]}


def load_research_items(path: str | Path, stage: str) -> dict[str, dict[str, str]]:
    """Item id -> the stage's subject, from a JSONL file; a bad line, a missing field or an id
    given twice is an InputError with the line."""
    if stage not in STAGE_FIELDS:
        raise ConfigError(f"unknown research stage {stage!r}; use {', '.join(STAGE_FIELDS)}")
    p = Path(path)
    try:
        if p.stat().st_size > MAX_ITEMS_BYTES:
            raise InputError(f"the file is larger than {MAX_ITEMS_BYTES:,} bytes", file=str(p))
        with p.open(encoding="utf-8") as fh:
            lines = fh.readlines()
    except OSError as exc:
        raise InputError(f"cannot read items: {exc.strerror}", file=str(p)) from None
    except UnicodeDecodeError:
        raise InputError("the file is not UTF-8 text", file=str(p)) from None
    out: dict[str, dict[str, str]] = {}
    for n, obj in jsonl_objects(lines, str(p), comments=True, max_line=MAX_ITEM_LINE):
        try:
            item = ResearchItem.model_validate(obj)
        except ValidationError as exc:
            raise InputError(line_problem(exc, ResearchItem, "item"), file=str(p), line=n) from None
        missing = [f for f in STAGE_FIELDS[stage] if getattr(item, f) is None]
        if missing:
            raise InputError(f"the {stage} stage judges {', '.join(STAGE_FIELDS[stage])}; this item has no "
                             f"{', '.join(missing)}", file=str(p), line=n)
        if item.item in out:
            raise InputError(f"item {item.item!r} is given twice", file=str(p), line=n)
        try:
            out[item.item] = stage_subject(stage, item)
        except InputError as exc:  # a source or plan the stage cannot show
            raise InputError(exc.reason, file=str(p), line=n) from None
    if not out:
        raise InputError("the file holds no items", file=str(p))
    return out


def panel_labels(labels: LabelSet, panel: Panel, items: Mapping[str, Any]) -> dict[str, list[Label]]:
    """Dimension -> its labels, each checked: a dimension the panel scores, pass/fail, an item given."""
    dims = {d for role in panel.roles for d in role.dimensions}
    out: dict[str, list[Label]] = {}
    for i, lab in enumerate(labels.labels):
        file, line = labels.where(i)
        if lab.rubric not in dims:
            raise InputError(f"dimension {lab.rubric!r} is not scored by this panel (dimensions: "
                             f"{', '.join(sorted(dims))})", file=file, line=line)
        if not lab.is_pass_fail:
            raise InputError(f"label {lab.label!r}: panel dimensions are labelled pass or fail (true or false)",
                             file=file, line=line)
        if lab.item not in items:
            raise InputError(f"no item {lab.item!r} among the items given", file=file, line=line)
        out.setdefault(lab.rubric, []).append(lab)
    return out


async def calibrate_panel(panel: Panel, items: Mapping[str, Mapping[str, str]], labels: LabelSet, *, task: str,
                          pass_marks: Mapping[str, float] | None = None, resamples: int = BOOTSTRAP_RESAMPLES,
                          seed: int = 0, fit: str = "agreement", parallel: int = 4, store: bool = True,
                          source: StoreSource | None = None,
                          on_progress: Callable[[str], None] | None = None) -> CalibrationReport:
    """Score the labelled items with every role of ``panel`` (``items``: item id -> the texts
    the panel is shown; ``task``: what is judged, as for :meth:`Panel.evaluate`) and compare
    each role's pass on each labelled dimension with the labels; ``pass_marks``: a dimension's
    pass mark (default: the panel's ``pass_threshold``). With ``store``, each role and
    dimension's calibration goes to the store of ``source`` (default: the panel's runtime).
    The panel's own ``require_calibration`` is not checked."""
    by_dim = panel_labels(labels, panel, items)
    wanted = list(dict.fromkeys(lab.item for lab in labels.labels))
    identities = [(role, await calibrated_identity(judge, d, panel.dimension_hash(role, d)))
                  for role, judge in panel.role_judges() for d in role.dimensions]  # before any call
    async def one(item: str) -> list[RoleResult]:
        results = await panel.role_results(items[item], task=task, trace_id=new_id(), check=False)
        if on_progress:
            on_progress(item)
        return results

    judged = dict(zip(wanted, await gather_bounded(one, wanted, parallel)))

    def compare() -> list[Any]:
        out = []
        for role, ident in identities:
            mine = by_dim.get(ident.rubric)
            if not mine:
                continue

            def verdict(item: str, role: str = role.name, dim: str = ident.rubric) -> JudgeScore:
                result = next(r for r in judged[item] if r.role == role)
                if result.status != OK:
                    return JudgeScore(None, result.error)
                return JudgeScore(result.scores.get(dim), result.critique)

            mark = (pass_marks or {}).get(ident.rubric, panel.pass_threshold)
            cal = rubric_calibration(ident.rubric, f"{ident.rubric} ({role.name})", UNIT, mine, verdict,
                                     resamples=resamples, seed=seed, pass_at=mark, fit=fit)
            cal.judge = ident
            out.append(cal)
        return out

    rubrics = await asyncio.to_thread(compare)
    models = sorted({ident.judge_model for _, ident in identities})
    report = CalibrationReport(judge=", ".join(models), labels=labels.source,
                               annotators=sorted({lab.annotator for lab in labels.labels}), rubrics=rubrics,
                               resamples=resamples, fit=fit, target="panel")
    if store:
        where = source if source is not None else panel.runtime
        if not isinstance(where, StoreSource):
            raise ConfigError("the panel has no runtime to store its calibration in: give source=jurist.open()")
        await store_calibrations(report, where)
    return report


async def calibrate_research(stage: str, items: str | Path, labels: LabelSet, runtime: Runtime, *,
                             config: ResearchConfig | None = None, resamples: int = BOOTSTRAP_RESAMPLES,
                             seed: int = 0, fit: str = "agreement", parallel: int = 4, store: bool = True,
                             on_progress: Callable[[str], None] | None = None) -> CalibrationReport:
    """Calibrate the panel a research stage builds from its configuration (``config``, default:
    the runtime's settings' ``research:`` section) on the items of a JSONL file."""
    subjects = await asyncio.to_thread(load_research_items, items, stage)
    evaluation = ResearchEvaluation(config, runtime=runtime)
    panel = evaluation.build_panel(stage)
    stage_cfg = evaluation.config.stages.of(stage)
    try:
        return await calibrate_panel(panel, subjects, labels, task=st.TASKS[stage],
                                     pass_marks={d: stage_cfg.pass_mark(d) for d in stage_cfg.dimensions},
                                     resamples=resamples, seed=seed, fit=fit, parallel=parallel, store=store,
                                     source=runtime, on_progress=on_progress)
    finally:
        await panel.aclose()
