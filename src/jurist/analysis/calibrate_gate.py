"""Calibrating the response gate's judge: its verdicts on answers people labelled pass or fail.

An item is a chat session whose last assistant turn is the answer to judge; the
turns before it are the conversation the gate's evaluator sees. Labels name the
session (``item``), the gate's evaluator (``rubric``: ``quality``,
``comprehensiveness``) and ``true``/``false``. The evaluator judges each answer as
the gate would (the quality evaluator's ``quality_score``, passing at the gate's
threshold; the comprehensiveness evaluator's verdict as 1 or 0), and the report
compares its pass with the people's, fits the threshold on the quality score
(:mod:`jurist.analysis.threshold`) and, by default, stores the calibration.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from jurist.analysis.agreement import BOOTSTRAP_RESAMPLES
from jurist.analysis.calibrate import (CalibrationReport, JudgeScore, find_sessions, rubric_calibration,
                                       store_calibrations)
from jurist.analysis.labels import Label, LabelSet
from jurist.errors import ConfigError, EvaluationFailed, InputError
from jurist.gate.gate import Gate
from jurist.ids import new_id
from jurist.judges.calibration import calibrated_identity
from jurist.gate.policy import read_messages
from jurist.judges.judge import Judge
from jurist.models.messages import Message
from jurist.rubrics.sessions import ChatSession
from jurist.sync import gather_bounded

UNIT = (0.0, 1.0)  # the scale of the quality score


def gate_item(chat: ChatSession) -> tuple[list[Message], str]:
    """The conversation before the session's last assistant turn, and that turn (the answer)."""
    last = next((i for i in range(len(chat.messages) - 1, -1, -1) if chat.messages[i].role == "assistant"), None)
    if last is None:
        raise InputError(f"session {chat.session_id!r} has no assistant turn: the gate judges the last one",
                         file=chat.source)
    turns, _ = read_messages(({"role": m.role, "content": m.content} for m in chat.messages[:last]),
                             f"session {chat.session_id!r}")
    return turns, chat.messages[last].content


def gate_labels(labels: LabelSet, evaluator: str) -> list[Label]:
    """The labels, each checked to be a pass/fail label of ``evaluator`` (an InputError at the line
    of one that is not)."""
    for i, lab in enumerate(labels.labels):
        file, line = labels.where(i)
        if lab.rubric != evaluator:
            raise InputError(f"rubric {lab.rubric!r}: the gate's evaluator is {evaluator!r}; label it as "
                             f'"rubric": "{evaluator}"', file=file, line=line)
        if not lab.is_pass_fail:
            raise InputError(f"label {lab.label!r}: the gate passes or fails an answer; label it true or false",
                             file=file, line=line)
    return list(labels.labels)


async def calibrate_gate(gate: Gate, labels: LabelSet, sessions: list[Path], *,
                         resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0, fit: str = "agreement",
                         parallel: int = 4, store: bool = True,
                         on_progress: Callable[[str], None] | None = None) -> CalibrationReport:
    """Judge every labelled answer with the gate's evaluator and compare its pass with the
    labels; with ``store``, keep the calibration in the gate's store. The gate's own
    ``require_calibration`` is not checked (this is how a calibration is made)."""
    evaluator = gate.evaluator
    judge = getattr(evaluator, "judge", None)
    if not isinstance(judge, Judge):
        raise ConfigError(f"the gate's {evaluator.name} evaluator has no judge (a model and a template) to calibrate")
    mine = gate_labels(labels, evaluator.name)
    chats = await asyncio.to_thread(find_sessions, labels, sessions)
    items = {item: gate_item(chat) for item, chat in chats.items()}  # every session checked before any call
    identity = await calibrated_identity(judge, evaluator.name)
    async def one(item: str) -> JudgeScore:
        messages, answer = items[item]
        try:
            ev = await evaluator.evaluate(messages, answer, trace_id=new_id())
        except EvaluationFailed as exc:
            score = JudgeScore(None, str(exc))
        else:
            value = ev.quality_score if ev.quality_score is not None else float(bool(ev.passed))
            score = JudgeScore(value, "; ".join(ev.issues) or ev.reason or ev.improvement_hint)
        if on_progress:
            on_progress(item)
        return score

    scores = dict(zip(items, await gather_bounded(one, items, parallel)))
    await gate.runtime.aflush()
    pass_at = 1.0 if evaluator.name == "comprehensiveness" else gate.config.threshold
    cal = await asyncio.to_thread(lambda: rubric_calibration(
        evaluator.name, f"gate {evaluator.name}", UNIT, mine, scores.__getitem__, resamples=resamples, seed=seed,
        pass_at=pass_at, fit=fit))
    cal.judge = identity
    report = CalibrationReport(judge=judge.model.name, labels=labels.source,
                               annotators=sorted({lab.annotator for lab in mine}), rubrics=[cal],
                               resamples=resamples, fit=fit, target="gate")
    if store:
        await store_calibrations(report, gate.runtime)
    return report
