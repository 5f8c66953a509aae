"""The gate's policy helpers: which messages the generator sees, what a
regeneration asks for, which attempt is best, and whether the budget fits."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from pydantic import JsonValue

from jurist.errors import InputError
from jurist.gate.records import Attempt, Evaluation
from jurist.gate.types import CALL_COMPREHENSIVE_RETRY, CALL_REGENERATION, ENCOURAGEMENT, AttemptKind
from jurist.models.messages import (AssistantMessage, BaseMessage, Message, ToolMessage, UserMessage,
                                    message_from_openai)

#: Seconds kept free at the end of the budget for releasing the answer and the record.
BUDGET_MARGIN_S = 0.05


def read_messages(items: Iterable[Message | Mapping[str, Any]] | Iterable[object],
                  where: str = "messages") -> tuple[list[Message], list[dict[str, JsonValue]]]:
    """A request's messages, typed (checked strictly: an InputError names a bad one), and as
    JSON as they were given (what a record keeps to resume from). A tool turn without
    ``tool_call_id`` (a transcript's tool output) is a tool result that answers no call."""
    typed: list[Message] = []
    raw: list[dict[str, JsonValue]] = []
    for i, m in enumerate(items):
        if isinstance(m, BaseMessage):
            typed.append(message_from_openai(m))
            raw.append(m.openai())
            continue
        if not isinstance(m, Mapping):
            raise InputError(f"{where}[{i}]: expected a message (an object with a role), got {type(m).__name__}")
        if m.get("role") == "tool" and "tool_call_id" not in m:
            tool = message_from_openai({**m, "tool_call_id": ""}, f"{where}[{i}]")
            tool.__pydantic_fields_set__.discard("tool_call_id")  # written back as it came, without one
            typed.append(tool)
        else:
            typed.append(message_from_openai(m, f"{where}[{i}]"))
        raw.append(dict(m))
    return typed, raw


def for_model(messages: Sequence[Message]) -> list[Message]:
    """The messages as a model is asked them: a tool result that answers no call is user text
    (``[tool result] ...``), as in a transcript."""
    return [UserMessage(content=f"[tool result] {m.text}") if isinstance(m, ToolMessage) and not m.tool_call_id
            else m for m in messages]


def current_cycle(messages: Sequence[Message], is_continuation: bool) -> list[Message]:
    """The messages the generator sees (note 004's filtering).

    A first request drops the tool turns of earlier cycles (tool results and
    assistant turns that only call tools, before the last user turn); a
    continuation keeps everything, so the tool results of the failed cycle survive.
    """
    msgs = list(messages)
    if is_continuation:
        return msgs
    last_user = last_user_index(msgs)
    out = []
    for i, m in enumerate(msgs):
        old = i < last_user
        tool_only = isinstance(m, AssistantMessage) and m.tool_calls and not m.content
        if old and (m.role == "tool" or tool_only):
            continue
        out.append(m)
    return out


def last_user_index(messages: Sequence[Message]) -> int:
    """The index of the last user turn (-1: none)."""
    return max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)


def is_comprehensiveness(ev: Evaluation) -> bool:
    """A comprehensiveness verdict (note 004) rather than a quality score (note 001)."""
    return ev.comprehensive is not None and ev.quality_score is None


#: What a regeneration asks after an answer cut off at the token limit (asking for "more" would cut it again).
CUT_OFF_RETRY = ("Your previous response was cut off at the token limit before it was finished. "
                 "Please give a complete answer that fits: shorter and to the point.")


def regeneration_request(
    messages: Sequence[Message], previous: str, ev: Evaluation, previous_chars: int = 500, *, cut: bool = False
) -> tuple[list[Message], AttemptKind]:
    """The messages of the next attempt and its call type.

    Comprehensiveness: the previous answer and note 004's encouragement.
    Quality: note 001's feedback, the issues and the previous answer's first
    ``previous_chars`` characters, marked "do not repeat this". ``cut``: the previous
    answer was cut off at the token limit; the request asks for a complete answer that
    fits (:data:`CUT_OFF_RETRY`) instead of a longer one.
    """
    if is_comprehensiveness(ev):
        return [*messages, AssistantMessage(content=previous),
                UserMessage(content=CUT_OFF_RETRY if cut else ENCOURAGEMENT)], CALL_COMPREHENSIVE_RETRY
    feedback = ev.improvement_hint or ev.reason or "; ".join(ev.issues) or "the answer did not meet the quality bar"
    issues = "".join(f"- {i}\n" for i in ev.issues)
    text = (
        "IMPORTANT: Your previous response was rated low quality. "
        f"Feedback: {feedback}\n"
        + (f"Issues:\n{issues}" if issues else "")
        + f"Previous response (DO NOT repeat this): {previous[:previous_chars]}\n"
        + (f"{CUT_OFF_RETRY}\n" if cut else "")
        + "Please generate an improved response addressing the feedback."
    )
    return [*messages, UserMessage(content=text)], CALL_REGENERATION


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
