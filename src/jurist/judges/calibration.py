"""Calibrated judges: ``require_calibration`` and the look-up it makes before any judge call.

A calibration (``jurist calibrate``, stored in the ``calibrations`` table) says how far
one judge agrees with people on one rubric or dimension. A judge is one model, one
prompt template (by content hash) and what it is asked to judge (a rubric id, a gate
evaluator's name or a panel dimension, with the hash of what the prompt shows of it).
With ``require_calibration: {min_kappa: 0.6}`` a capability looks up, before its first
judge call, the newest stored calibration of every judge it will use; when one has
none, or its κ is below the bar, it raises :class:`~jurist.errors.CalibrationRequired`
naming each judge and the ``jurist calibrate`` command that makes one.

The look-up reads the store only (no statistics): it goes through the runtime's
store, never one opened here.

A calibration of the offline judge (``local/minilm``) made with ``jurist calibrate
--fit-local`` also holds the decision thresholds fitted on the labels (in its figures,
under :data:`LOCAL_THRESHOLDS`); :func:`fitted_local_thresholds` finds, per judge, the
newest calibration that holds such a fit, which the judge of that rubric is built with.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.engine import make_url

from jurist.errors import CalibrationRequired, ConfigError
from jurist.jsonfiles import Number
from jurist.judges.judge import Judge
from jurist.models.base import MeaningJudge
from jurist.models.model import Model
from jurist.judges.templates import PromptTemplate
from jurist.store.calibrations import JudgeKey, StoredCalibration, calibrations_of, latest_calibrations
from jurist.store.store import Store

LABELS_PLACEHOLDER = "LABELS.jsonl"  # in the commands a refusal prints: the labels the user has to write
LOCAL_JUDGE = "local/minilm"  # jurist.models.registry.LOCAL_JUDGE: the judge whose thresholds a calibration may fit
LOCAL_THRESHOLDS = "local_thresholds"  # the key of a fit of the offline judge's thresholds in a calibration's figures


class CalibrationRequirement(BaseModel):
    """The bar a judge's stored calibration must meet: its κ (quadratic-weighted Cohen's κ
    against the people's labels; for pass/fail labels, Cohen's κ) at least ``min_kappa``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_kappa: Number = Field(ge=-1.0, le=1.0)


#: A requirement for every rubric or dimension, or one per rubric or dimension key.
Requirements = CalibrationRequirement | Mapping[str, CalibrationRequirement] | None


def requirement_for(requirements: Requirements, key: str) -> CalibrationRequirement | None:
    """The bar for one rubric or dimension (None: none)."""
    if requirements is None or isinstance(requirements, CalibrationRequirement):
        return requirements
    return requirements.get(key)


def text_hash(*parts: Any) -> str:
    """A short content hash of what a judge is shown (a rubric, a dimension and its role)."""
    data = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class JudgeIdentity:
    """One judge as calibrations know it: model, template, rubric or dimension (and the hash of
    what the prompt shows of it, where it shows more than the name)."""

    judge_model: str
    template_name: str
    template_hash: str
    rubric: str
    rubric_hash: str | None = None

    @property
    def key(self) -> JudgeKey:
        return JudgeKey(self.judge_model, self.template_hash, self.rubric, self.rubric_hash)

    def describe(self) -> str:
        return (f"judge {self.judge_model}, template {self.template_name} ({self.template_hash}), "
                f"rubric {self.rubric!r}")


def identity_of(judge: Judge, rubric: str, rubric_hash: str | None = None) -> JudgeIdentity:
    """The identity of a :class:`~jurist.judges.judge.Judge` (its model and template) on ``rubric``."""
    return JudgeIdentity(judge.model.name, judge.template.name, judge.template.hash, rubric, rubric_hash)


async def texts_of(judge: Judge) -> list[PromptTemplate]:
    """Every text of its template a judge's calls may use now: the template it holds, or what the
    prompt lab routes it to (the active version; both arms of a running A/B test)."""
    if judge.prompts is None:
        return [judge.template]
    versions = getattr(judge.prompts, "versions", None)
    if versions is not None:
        texts: list[PromptTemplate] = await versions(judge.template)
        return texts
    return [await judge.prompts.resolve(judge.template, lambda: "")]


async def routed_identities(judge: Judge, rubric: str, rubric_hash: str | None = None) -> list[JudgeIdentity]:
    """The identities of a judge's calls on ``rubric`` now: one per text its calls may use."""
    return [JudgeIdentity(judge.model.name, t.name, t.hash, rubric, rubric_hash) for t in await texts_of(judge)]


async def calibrated_identity(judge: Judge, rubric: str, rubric_hash: str | None = None) -> JudgeIdentity:
    """The identity a calibration made now with ``judge`` holds for; a ConfigError while the prompt
    lab runs an A/B test of its template (the calls would mix two texts)."""
    found = await routed_identities(judge, rubric, rubric_hash)
    if len(found) != 1:
        raise ConfigError(f"an A/B test of the prompt {judge.template.name} is running (templates "
                          f"{', '.join(i.template_hash for i in found)}): a calibration holds for one text; end "
                          "the test (or make one version active in the prompt lab), then calibrate")
    return found[0]


@dataclass(frozen=True)
class JudgeUse:
    """A judge a capability will ask, the bar its calibration must meet, and the command that makes
    one. With ``routed`` (the judge itself), its identity is the text the prompt lab routes its
    calls to when the look-up is made (both arms of an A/B test: both need a calibration)."""

    judge: JudgeIdentity
    requirement: CalibrationRequirement
    command: str
    routed: Judge | None = None


@dataclass(frozen=True)
class CalibrationFound:
    """The newest stored calibration of a judge, as the requirement reads it."""

    id: str
    n: int  # judge-person pairs compared
    kappa: float | None  # None: undefined (every rating in one category)
    created_at: datetime

    @classmethod
    def from_row(cls, row: StoredCalibration) -> CalibrationFound:
        return cls(id=row.id, n=row.n, kappa=row.kappa, created_at=row.created_at)


@runtime_checkable
class StoreSource(Protocol):
    """Where the look-up finds the store: a :class:`jurist.Runtime`."""

    @property
    def has_store(self) -> bool: ...

    async def astore(self) -> Store: ...


def with_store_options(command: str, source: Any) -> str:
    """A ``jurist calibrate`` command with the settings file and the store of ``source`` (a runtime)
    when they were chosen, so that it calibrates into the store that is looked up (a database URL
    with a password is left out: give it as the runtime got it, JURIST_DATABASE_URL say)."""
    if not command.startswith("jurist calibrate"):
        return command
    settings = getattr(source, "settings", None)
    config_file = getattr(settings, "config_file", None)
    database_url = getattr(settings, "database_url", None)
    args = shlex.split(command)
    if config_file and "--config" not in args:
        args += ["--config", str(config_file)]
    if database_url and "--db" not in args and make_url(database_url).password is None:
        args += ["--db", database_url]
    return shlex.join(args)


async def require_calibrated(source: StoreSource | None, uses: Sequence[JudgeUse]) -> dict[JudgeKey, CalibrationFound]:
    """The newest calibration of each judge in ``uses``; raise :class:`CalibrationRequired` when
    one has none or one whose κ is below its bar (every such judge named, with the commands
    that calibrate them). No use, no look-up."""
    if not uses:
        return {}
    if source is None or not source.has_store:
        raise ConfigError("require_calibration looks calibrations up in the store, and this runtime has none; "
                          "give the capability a runtime with a store (jurist.open())")
    routed: list[JudgeUse] = []
    for use in uses:
        if use.routed is None:
            routed.append(use)
        else:
            routed += [replace(use, judge=ident, routed=None)
                       for ident in await routed_identities(use.routed, use.judge.rubric, use.judge.rubric_hash)]
    uses = list({(u.judge.key, u.requirement.min_kappa): u for u in routed}.values())
    store = await source.astore()
    rows: dict[JudgeKey, StoredCalibration] = await store.aread(latest_calibrations, [u.judge.key for u in uses])
    found = {key: CalibrationFound.from_row(row) for key, row in rows.items()}
    problems: list[str] = []
    commands: list[str] = []
    low = False
    for use in uses:
        row = found.get(use.judge.key)
        bar = use.requirement.min_kappa
        if row is None:
            problems.append(f"{use.judge.describe()}: no stored calibration (min_kappa {bar:g})")
        elif row.kappa is None or row.kappa < bar:
            kappa = "undefined (every rating in one category)" if row.kappa is None else f"{row.kappa:.3f}"
            when = row.created_at.strftime("%Y-%m-%d %H:%M UTC")
            problems.append(f"{use.judge.describe()}: the newest calibration ({row.id}, {when}, {row.n} pairs) "
                            f"has κ {kappa}, below min_kappa {bar:g}")
            low = True
        else:
            continue
        command = with_store_options(use.command, source)
        if command not in commands:
            commands.append(command)
    if problems:
        where = store.engine.url.render_as_string(hide_password=True)
        raise CalibrationRequired(
            "require_calibration: no judge call was made, because these judges are not calibrated well enough "
            f"(calibrations looked up in {where}):\n"
            + "\n".join(f"  - {p}" for p in problems)
            + f"\nTo make one, label items ({LABELS_PLACEHOLDER}; see docs/calibration.md) and run:\n"
            + "\n".join(f"  {c}" for c in commands)
            + ("\nA κ below the bar calls for a better judge, prompt or rubric (then calibrate again), or for more "
               "labels, whose interval says how sure the κ is." if low else ""),
            missing=problems, commands=commands)
    return found


@dataclass(frozen=True)
class FittedLocalThresholds:
    """The offline judge's decision thresholds and band fitted on a team's labels, and the
    calibration that holds them."""

    calibration_id: str
    thresholds: Mapping[str, float]  # expresses, answers (probabilities)
    band: Mapping[str, float]  # the half-width of the band of uncertainty around each

    @classmethod
    def from_figure(cls, calibration_id: str, figure: Any) -> FittedLocalThresholds | None:
        """The thresholds of a stored fit (``figures[LOCAL_THRESHOLDS]``); None when there is none
        or it is degenerate. A stored fit that does not read as one is a ConfigError."""
        if not isinstance(figure, dict) or figure.get("degenerate"):
            return None
        try:
            thresholds = {str(k): float(v) for k, v in figure["thresholds"].items()}
            band = {str(k): float(v) for k, v in figure["band"].items()}
        except (KeyError, AttributeError, TypeError, ValueError) as exc:
            raise ConfigError(f"calibration {calibration_id}: its stored local thresholds do not read ({exc!r}); "
                              "calibrate again with --fit-local") from None
        return cls(calibration_id, thresholds, band)

    def describe(self) -> str:
        """What a result says of the thresholds its judge used."""
        parts = ", ".join(f"{k} {v:.4g} (band ±{self.band.get(k, 0.0):.3g})" for k, v in sorted(self.thresholds.items()))
        return f"thresholds fitted by calibration {self.calibration_id}: {parts}"

    def local_thresholds(self) -> Any:
        """The :class:`jurist.models.local.LocalThresholds` to build the judge with."""
        from jurist.models.local import LocalThresholds

        return LocalThresholds(expresses=self.thresholds["expresses"], answers=self.thresholds["answers"],
                               band=dict(self.band))


def _fitted(conn: Any, keys: Sequence[JudgeKey]) -> dict[JudgeKey, FittedLocalThresholds]:
    """The newest calibration holding a usable fit of each key (a calibration made since without
    --fit-local leaves the fit in use)."""
    out: dict[JudgeKey, FittedLocalThresholds] = {}
    for key in keys:
        for row in calibrations_of(conn, key):
            fit = FittedLocalThresholds.from_figure(row.id, row.figures.get(LOCAL_THRESHOLDS))
            if fit is not None:
                out[key] = fit
                break
    return out


async def fitted_local_thresholds(source: StoreSource | None,
                                  judges: Sequence[JudgeIdentity]) -> dict[JudgeKey, FittedLocalThresholds]:
    """The thresholds fitted for each of ``judges`` that is the offline judge and has a stored fit
    (none without a store: nothing is fitted then)."""
    keys = list(dict.fromkeys(j.key for j in judges if j.judge_model == LOCAL_JUDGE))
    if not keys or source is None or not source.has_store:
        return {}
    store = await source.astore()
    found: dict[JudgeKey, FittedLocalThresholds] = await store.aread(_fitted, keys)
    return found


@runtime_checkable
class JudgeSource(StoreSource, Protocol):
    """Where fitted judges come from: a :class:`jurist.Runtime` (its store, and a meaning judge
    put behind :class:`~jurist.models.model.Model` with its calls on record)."""

    def wrap(self, judge: MeaningJudge) -> Model: ...


async def fitted_local_judges(source: JudgeSource | None, judges: Mapping[str, JudgeIdentity]
                              ) -> dict[str, tuple[Model, FittedLocalThresholds]]:
    """Key (a rubric id) -> the offline judge built with the thresholds a calibration fitted for
    ``judges[key]``, and those thresholds; only the keys whose judge is the offline one and has a
    stored fit (the others keep the judge they have)."""
    from jurist.models.local import LocalJudge

    found = await fitted_local_thresholds(source, list(judges.values()))
    if not found or source is None:
        return {}
    return {key: (source.wrap(LocalJudge(thresholds=fit.local_thresholds())), fit)
            for key, ident in judges.items() if (fit := found.get(ident.key)) is not None}
