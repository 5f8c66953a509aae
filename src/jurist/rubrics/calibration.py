"""Calibrated rubric scoring: the judge identity of each rubric, and the look-up that
``require_calibration`` makes before a run's first judge call (see docs/calibration.md)."""

from __future__ import annotations

import shlex

from jurist.judges.calibration import (LABELS_PLACEHOLDER, LOCAL_JUDGE, CalibrationRequirement, JudgeIdentity,
                                       JudgeSource, JudgeUse, calibrated_identity, fitted_local_judges, identity_of,
                                       require_calibrated, routed_identities, text_hash)
from jurist.judges.templates import PromptTemplate
from jurist.rubrics.judging import RubricJudge
from jurist.rubrics.models import Rubric, RubricSet

SHIPPED_TEMPLATE = "rubric_judge"


def rubric_hash(rubric: Rubric, scale: tuple[float, float]) -> str:
    """The hash of what the judge's prompt shows of a rubric: name, description, criteria,
    items and scale (not its weight, which only the totals use)."""
    return text_hash(rubric.name, rubric.description, rubric.criteria_text(), rubric.items_text(),
                     [float(scale[0]), float(scale[1])])


def rubric_identities(rubric_set: RubricSet, judge: RubricJudge) -> dict[str, JudgeIdentity]:
    """Rubric id -> the judge identity its scores come from (the template the judge holds)."""
    return {r.id: identity_of(judge.judge_for(r), r.id, rubric_hash(r, rubric_set.scale_of(r)))
            for r in rubric_set.rubrics}


async def calibrated_identities(rubric_set: RubricSet, judge: RubricJudge) -> dict[str, JudgeIdentity]:
    """Rubric id -> the judge identity a calibration made now holds for (the text the prompt lab
    routes the judge to; a ConfigError during an A/B test of it)."""
    return {r.id: await calibrated_identity(judge.judge_for(r), r.id, rubric_hash(r, rubric_set.scale_of(r)))
            for r in rubric_set.rubrics}


def template_option(template: PromptTemplate) -> str | None:
    """The ``--template`` value that loads ``template`` again (None: the shipped default)."""
    if template.source == "builtin":
        return None if template.name == SHIPPED_TEMPLATE else template.name
    if template.source.startswith("prompt "):
        return template.source.removeprefix("prompt ")
    return template.source


def calibrate_command(rubric_set: RubricSet, judge: RubricJudge, template: PromptTemplate) -> str:
    """The ``jurist calibrate`` command that calibrates ``judge`` on these rubrics."""
    args = ["jurist", "calibrate", "--rubrics", rubric_set.source or "RUBRICS.json", "--judge", judge.model.name]
    option = template_option(template)
    if option is not None:
        args += ["--template", option]
    args += ["--labels", LABELS_PLACEHOLDER, "--sessions", "SESSIONS/"]
    return shlex.join(args)


def rubric_uses(rubric_set: RubricSet, judge: RubricJudge, template: PromptTemplate) -> list[JudgeUse]:
    """The judges of the rubrics that require a calibration, with their bars."""
    identities = rubric_identities(rubric_set, judge)
    command = calibrate_command(rubric_set, judge, template)
    return [JudgeUse(identities[r.id], req, command, routed=judge.judge_for(r)) for r in rubric_set.rubrics
            if (req := rubric_set.requirement_for(r)) is not None]


async def require_rubric_calibrations(source: JudgeSource, rubric_set: RubricSet, judge: RubricJudge,
                                      template: PromptTemplate) -> None:
    """Before a run's first judge call: raise :class:`~jurist.errors.CalibrationRequired` when a rubric
    that requires a calibration has none of this judge good enough (nothing is looked up when none
    requires one), then give the offline judge of each rubric the thresholds a calibration fitted
    for it (:func:`use_fitted_thresholds`)."""
    await require_calibrated(source, rubric_uses(rubric_set, judge, template))
    await use_fitted_thresholds(source, rubric_set, judge)


async def use_fitted_thresholds(source: JudgeSource, rubric_set: RubricSet, judge: RubricJudge) -> None:
    """Judge each item-based rubric whose offline judge (``local/minilm``) has thresholds fitted on
    labels (``jurist calibrate --fit-local``) with those (the newest stored fit of the judge's
    model, template text and rubric); the other rubrics keep the judge they have."""
    if judge.model.name != LOCAL_JUDGE:
        return
    identities: dict[str, JudgeIdentity] = {}
    for r in rubric_set.rubrics:
        if r.item_based:
            found = await routed_identities(judge.judge_for(r), r.id, rubric_hash(r, rubric_set.scale_of(r)))
            if len(found) == 1:  # an A/B test of the template mixes two texts: no fit holds for both
                identities[r.id] = found[0]
    for rubric_id, (model, fitted) in (await fitted_local_judges(source, identities)).items():
        judge.use_fitted(rubric_id, model, fitted)


def with_bar(rubric_set: RubricSet, min_kappa: float | None) -> RubricSet:
    """``rubric_set`` with every rubric requiring a calibration of at least ``min_kappa``
    (the command line's ``--require-calibration``; None: as the file says)."""
    if min_kappa is None:
        return rubric_set
    bar = CalibrationRequirement(min_kappa=min_kappa)
    rubrics = [r.model_copy(update={"require_calibration": bar}) for r in rubric_set.rubrics]
    return rubric_set.model_copy(update={"rubrics": rubrics, "require_calibration": bar})
