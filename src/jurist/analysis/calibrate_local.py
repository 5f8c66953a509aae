"""Fitting the offline judge's decision threshold to a team's own labels (``jurist calibrate --fit-local``).

The offline judge (``local/minilm``) decides that a text expresses a rubric item when
the probability its model gives (calibrated on public data, see docs/local-judge.md)
reaches a threshold, the ``expresses`` threshold of ``judge.json``. What a team means
by an item can sit on either side of that threshold. With ``--fit-local``, after the
calibration's usual figures, every labelled session is judged once more with no band
of uncertainty (:func:`item_probabilities`), which gives the probability of every item
of every labelled rubric; :func:`fit_rubric` then tries every threshold that changes a
decision on these items (to the ``DIGITS`` decimals it is stored with), scores each
labelled session as the rubric would at it (points earned over points possible, a pass
at ``PASS_PERCENTAGE`` % of the scale's top), and
keeps the threshold whose scores best match the people's labels by macro-F1 (over the
people's categories: pass and fail, or the scale's points), a tie going to the higher
agreement, then to fewer sessions the band would leave undecided, then to the threshold
nearest the shipped one. The band's half-width is
kept (``--local-band`` sets another).

A fit needs labels to fit on: at least :data:`MIN_ITEMS` labelled sessions of the
rubric, and people's labels in at least two categories (:func:`check_fit_labels`);
with fewer, ``jurist calibrate`` refuses (exit 2) rather than fit noise. A fit whose
threshold puts every session in one category is degenerate and not stored.

The fitted thresholds are kept in the stored calibration's figures (under
:data:`~jurist.judges.calibration.LOCAL_THRESHOLDS`); the rubric judge uses them
for that judge and rubric from then on (:func:`jurist.judges.calibration.fitted_local_thresholds`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from jurist.analysis.labels import Label
from jurist.errors import Unsupported, UsageError
from jurist.ids import new_id
from jurist.judges.calibration import FittedLocalThresholds
from jurist.rubrics.judging import items_question, item_score
from jurist.rubrics.models import Rubric
from jurist.rubrics.scoring import PASS_PERCENTAGE
from jurist.rubrics.sessions import ChatSession
from jurist.sync import gather_bounded

if TYPE_CHECKING:  # pragma: no cover
    from jurist.runtime import Runtime

MIN_ITEMS = 20  # labelled sessions of a rubric a fit needs
METRIC = "macro_f1"
KIND = "expresses"  # the decision a rubric's items are judged by
PURPOSE = "calibrate_local"  # the purpose of the calls that give the probabilities
DIGITS = 6  # decimals the thresholds and the band are stored with: a fitted threshold is one of these

#: session id -> item id -> the judge's probability that the session expresses the item (None: not judged)
Probabilities = dict[str, "dict[str, float] | None"]


def shipped_thresholds() -> tuple[dict[str, float], dict[str, float]]:
    """The offline judge's thresholds and band as it ships them (judge.json)."""
    from jurist.models.local import LocalThresholds

    shipped = LocalThresholds()
    return ({"expresses": float(shipped.expresses), "answers": float(shipped.answers)},
            {k: float(v) for k, v in dict(shipped.band).items()})


async def item_probabilities(rubrics: Sequence[Rubric], chats: Mapping[str, ChatSession], runtime: "Runtime", *,
                             parallel: int = 4) -> dict[str, Probabilities]:
    """Rubric id -> the offline judge's probability of each of its items in each session: the
    items asked as the rubric judge asks them, of a judge with no band (so it decides every
    item; the probability of "expressed" is its confidence when it says so, else one minus
    it). Each session's questions are one recorded call per rubric; a rubric the judge cannot
    ask of a session (an expected answer it cannot compare) is None there."""
    from jurist.models.local import LocalJudge, LocalThresholds

    thresholds, band = shipped_thresholds()
    undecided = LocalThresholds(expresses=thresholds["expresses"], answers=thresholds["answers"],
                                band={k: 0.0 for k in band})
    model = runtime.wrap(LocalJudge(thresholds=undecided))

    async def one(chat: ChatSession) -> dict[str, dict[str, float] | None]:
        calls = model.meaning(PURPOSE, new_id())
        out: dict[str, dict[str, float] | None] = {}
        for rubric in rubrics:
            try:
                replies: Any = await items_question(rubric, chat).ask(calls)
            except Unsupported:
                out[rubric.id] = None
                continue
            probs = {}
            for item, reply in zip(rubric.items or [], replies):
                if reply.confidence is None:
                    break
                probs[item.id] = reply.confidence if reply.met else 1.0 - reply.confidence
            out[rubric.id] = probs if len(probs) == len(rubric.items or []) else None
        return out

    sessions = list(chats.values())
    try:
        results = await gather_bounded(one, sessions, parallel)
    finally:
        await model.aclose()
    return {r.id: {chat.session_id: res[r.id] for chat, res in zip(sessions, results)} for r in rubrics}


def fit_problem(rubric: Rubric, labels: Sequence[Label], scale: tuple[float, float]) -> str | None:
    """Why the labels of ``rubric`` cannot be fitted on (None: they can): a free-form rubric
    (the offline judge scores items only), fewer than MIN_ITEMS labelled sessions, or the
    people's labels all in one category."""
    if not rubric.item_based:
        return (f"rubric {rubric.id!r} is free-form: the offline judge scores only rubrics with items, so "
                "there is no threshold of it to fit")
    humans = people_categories(labels, scale)
    decided = [c for c in humans.values() if c is not None]
    if len(decided) < MIN_ITEMS:
        undecided = len(humans) - len(decided)
        tie = f" ({undecided} more whose annotators are split evenly)" if undecided else ""
        return (f"rubric {rubric.id!r} has {len(decided)} labelled sessions{tie}; fitting the offline judge's "
                f"threshold needs at least {MIN_ITEMS}, else it fits noise: label more sessions")
    if len(set(decided)) < 2:
        only = _category_name(decided[0], labels[0].is_pass_fail)
        return (f"rubric {rubric.id!r}: the people label every session {only}; fitting a threshold needs sessions "
                "they judged differently (label some that fall short, or some that do well)")
    return None


def check_fit_labels(rubrics: Mapping[str, tuple[Rubric, tuple[float, float]]],
                     labels: Sequence[Label]) -> None:
    """Raise a UsageError naming every labelled rubric whose labels cannot be fitted on."""
    problems = []
    for rid, (rubric, scale) in rubrics.items():
        problem = fit_problem(rubric, [lab for lab in labels if lab.rubric == rid], scale)
        if problem:
            problems.append(problem)
    if problems:
        raise UsageError("--fit-local: no threshold fitted, because\n" + "\n".join(f"  - {p}" for p in problems))


def _category_name(category: int, pass_fail: bool) -> str:
    return ("pass" if category else "fail") if pass_fail else str(category)


def _category(score: float, pass_fail: bool, scale: tuple[float, float]) -> int:
    if pass_fail:
        return int(score / scale[1] * 100.0 >= PASS_PERCENTAGE)
    return int(min(max(math.floor(score + 0.5), scale[0]), scale[1]))


def people_categories(labels: Sequence[Label], scale: tuple[float, float]) -> dict[str, int | None]:
    """Each labelled session's category by its people: the majority's pass/fail (None: an even
    split), or the rounded mean of their scores."""
    by_item: dict[str, list[float]] = {}
    for lab in labels:
        by_item.setdefault(lab.item, []).append(float(lab.label))
    out: dict[str, int | None] = {}
    for item, values in by_item.items():
        if labels[0].is_pass_fail:
            passes = sum(1 for v in values if v)
            out[item] = None if 2 * passes == len(values) else int(2 * passes > len(values))
        else:
            out[item] = _category(sum(values) / len(values), False, scale)
    return out


@dataclass
class AtThreshold:
    """How the judge's scores match the people's at one threshold (band 0: every item decided)."""

    threshold: float
    macro_f1: float
    agreement: float  # the share of labelled sessions whose category is the people's
    uncertain: int  # sessions with an item inside the band (the judge would not decide them)

    def to_json(self) -> dict[str, float | int]:
        return {"threshold": round(self.threshold, 4), "macro_f1": round(self.macro_f1, 4),
                "agreement": round(self.agreement, 4), "uncertain": self.uncertain}


@dataclass
class LocalFit:
    """A rubric's fitted threshold for the offline judge, with the figures before and after."""

    rubric: str
    items: int  # labelled sessions fitted on (people's category decided, the judge's probabilities known)
    classes: dict[str, int]  # the people's category -> sessions
    before: AtThreshold  # at the shipped threshold
    after: AtThreshold  # at the fitted one
    thresholds: dict[str, float]  # what the judge is built with: expresses, answers
    band: dict[str, float]  # and its band's half-widths
    unscored: list[str] = field(default_factory=list)  # sessions the judge gave no probability for
    degenerate: str | None = None  # why the fitted threshold is no threshold to use

    def to_json(self) -> dict[str, object]:
        return {"kind": KIND, "metric": METRIC, "items": self.items, "classes": self.classes,
                "before": self.before.to_json(), "after": self.after.to_json(),
                "thresholds": {k: round(v, DIGITS) for k, v in self.thresholds.items()},
                "band": {k: round(v, DIGITS) for k, v in self.band.items()},
                "unscored": self.unscored, "degenerate": self.degenerate}

    def stored(self, calibration_id: str) -> FittedLocalThresholds | None:
        """The thresholds the judge is to use (None: a degenerate fit, none to use)."""
        if self.degenerate:
            return None
        return FittedLocalThresholds.from_figure(calibration_id, self.to_json())


def macro_f1(judge: Sequence[int], people: Sequence[int]) -> float:
    """Macro-averaged F1 over the categories either side gives."""
    scores = []
    for c in sorted(set(judge) | set(people)):
        tp = sum(1 for j, p in zip(judge, people) if j == c and p == c)
        wrong = sum(1 for j, p in zip(judge, people) if (j == c) != (p == c))
        scores.append(2 * tp / (2 * tp + wrong) if 2 * tp + wrong else 0.0)
    return sum(scores) / len(scores) if scores else float("nan")


def _at(rubric: Rubric, scale: tuple[float, float], pass_fail: bool, probs: Sequence[Mapping[str, float]],
        people: Sequence[int], threshold: float, band: float) -> AtThreshold:
    judge = [_category(item_score(rubric, {k: p >= threshold for k, p in ps.items()}, scale), pass_fail, scale)
             for ps in probs]
    agree = sum(1 for j, p in zip(judge, people) if j == p) / len(people)
    uncertain = sum(1 for ps in probs if any(abs(p - threshold) < band for p in ps.values()))
    return AtThreshold(threshold, macro_f1(judge, people), agree, uncertain)


def candidates(probs: Sequence[Mapping[str, float]]) -> list[float]:
    """Every threshold that decides these probabilities differently: the midpoints between
    neighbouring ones, and one below and one above them all, each rounded to the ``DIGITS``
    decimals it is stored with, so that the figures at a threshold are those of the judge
    that uses it and a report prints the number that is stored."""
    values = sorted({p for ps in probs for p in ps.values()})
    if not values:
        return []
    mids = [(a + b) / 2 for a, b in zip(values, values[1:])]
    return list(dict.fromkeys(round(t, DIGITS) for t in [values[0] / 2, *mids, (values[-1] + 1.0) / 2]))


def fit_rubric(rubric: Rubric, scale: tuple[float, float], labels: Sequence[Label],
               probabilities: Mapping[str, Mapping[str, float] | None], *, shipped: Mapping[str, float],
               band: Mapping[str, float]) -> LocalFit:
    """Fit the ``expresses`` threshold of ``rubric`` on its labels and the judge's probability of each
    item of each labelled session (``probabilities``: session -> item id -> p, None: unscored);
    ``shipped`` and ``band``: the judge's thresholds and band as they are (the band is kept)."""
    pass_fail = labels[0].is_pass_fail
    humans = people_categories(labels, scale)
    unscored = sorted(i for i in humans if probabilities.get(i) is None)
    used = [i for i, c in humans.items() if c is not None and probabilities.get(i) is not None]
    people = [c for i in used if (c := humans[i]) is not None]
    probs = [p for i in used if (p := probabilities[i]) is not None]
    if len(used) < MIN_ITEMS or len(set(people)) < 2:
        raise UsageError(f"--fit-local: rubric {rubric.id!r}: the offline judge gave probabilities for {len(used)} "
                         f"labelled sessions in {len(set(people))} categories (unscored: {', '.join(unscored) or 'none'}); "
                         f"a fit needs at least {MIN_ITEMS} in two categories or more")
    # as stored (DIGITS decimals): the figures are those of the judge that uses them, the numbers printed those stored
    shipped, band = ({k: round(float(v), DIGITS) for k, v in m.items()} for m in (shipped, band))
    default, width = shipped[KIND], band[KIND]
    before = _at(rubric, scale, pass_fail, probs, people, default, width)
    best = before
    for t in candidates(probs):
        at = _at(rubric, scale, pass_fail, probs, people, t, width)
        if (at.macro_f1, at.agreement, -at.uncertain, -abs(t - default)) > (
                best.macro_f1, best.agreement, -best.uncertain, -abs(best.threshold - default)):
            best = at
    classes: dict[str, int] = {}
    for c in people:
        name = _category_name(c, pass_fail)
        classes[name] = classes.get(name, 0) + 1
    judged = {_category(item_score(rubric, {k: p >= best.threshold for k, p in ps.items()}, scale), pass_fail, scale)
              for ps in probs}
    degenerate = None
    if len(judged) < 2:
        degenerate = (f"threshold {best.threshold:.4g} is degenerate: at it every labelled session scores "
                      f"{_category_name(next(iter(judged)), pass_fail)}, so the judge's probabilities do not "
                      "separate what the people tell apart")
    return LocalFit(rubric=rubric.id, items=len(used), classes=dict(sorted(classes.items())), before=before,
                    after=best, thresholds={**shipped, KIND: best.threshold}, band=band, unscored=unscored,
                    degenerate=degenerate)
