"""The gate's policy helpers: which messages the generator sees, what a
regeneration asks for, which attempt is best, and whether the budget fits."""

from __future__ import annotations

from typing import Any

from jurist.gate.records import Attempt, Evaluation
from jurist.gate.types import CALL_COMPREHENSIVE_RETRY, CALL_REGENERATION, ENCOURAGEMENT, AttemptKind

#: Seconds kept free at the end of the budget for releasing the answer and the record.
BUDGET_MARGIN_S = 0.05


def current_cycle(messages: list[dict[str, Any]], is_continuation: bool) -> list[dict[str, Any]]:
    """The messages the generator sees (note 004's filtering).

    A first request drops the tool turns of earlier cycles (tool results and
    assistant turns that only call tools, before the last user turn); a
    continuation keeps everything, so the tool results of the failed cycle survive.
    """
    msgs = [dict(m) for m in messages]
    if is_continuation:
        return msgs
    last_user = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=-1)
    out = []
    for i, m in enumerate(msgs):
        old = i < last_user
        tool_only = m.get("role") == "assistant" and m.get("tool_calls") and not m.get("content")
        if old and (m.get("role") == "tool" or tool_only):
            continue
        out.append(m)
    return out


def last_user_message(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The last user turn (part of an error's continue context)."""
    return next((dict(m) for m in reversed(messages) if m.get("role") == "user"), None)


def is_comprehensiveness(ev: Evaluation) -> bool:
    """A comprehensiveness verdict (note 004) rather than a quality score (note 001)."""
    return ev.comprehensive is not None and ev.quality_score is None


def regeneration_request(
    messages: list[dict[str, Any]], previous: str, ev: Evaluation, previous_chars: int = 500
) -> tuple[list[dict[str, Any]], AttemptKind]:
    """The messages of the next attempt and its call type.

    Comprehensiveness: the previous answer and note 004's encouragement.
    Quality: note 001's feedback, the issues and the previous answer's first
    ``previous_chars`` characters, marked "do not repeat this".
    """
    if is_comprehensiveness(ev):
        return messages + [{"role": "assistant", "content": previous},
                           {"role": "user", "content": ENCOURAGEMENT}], CALL_COMPREHENSIVE_RETRY
    feedback = ev.improvement_hint or ev.reason or "; ".join(ev.issues) or "the answer did not meet the quality bar"
    issues = "".join(f"- {i}\n" for i in ev.issues)
    text = (
        "IMPORTANT: Your previous response was rated low quality. "
        f"Feedback: {feedback}\n"
        + (f"Issues:\n{issues}" if issues else "")
        + f"Previous response (DO NOT repeat this): {previous[:previous_chars]}\n"
        "Please generate an improved response addressing the feedback."
    )
    return messages + [{"role": "user", "content": text}], CALL_REGENERATION


def _rank(a: Attempt) -> tuple[int, float, int]:
    ev = a.evaluation
    if ev is None or ev.passed is None:
        return (0, -1.0, a.number)
    score = ev.quality_score if ev.quality_score is not None else float(bool(ev.comprehensive))
    return (1 if ev.passed else 0, score, a.number)


def best_attempt(attempts: list[Attempt]) -> Attempt:
    """The best answer so far: passed first, then the higher score, then the later attempt."""
    return max(attempts, key=_rank)


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def fits(remaining_s: float, generation_s: list[float], evaluation_s: list[float]) -> bool:
    """Whether another regenerate + evaluate is expected to fit in what is left of the budget."""
    need = mean(generation_s) + mean(evaluation_s) + BUDGET_MARGIN_S
    return remaining_s > need
