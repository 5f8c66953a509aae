"""Types shared by the gate, its proxy and its LangGraph helper (the contract).

A *generator* produces the answer: either a model reference (``"openai/gpt-4o-mini"``)
or a user's async function ``generate(messages) -> str | AsyncIterator[str]``
(text, or a stream of text deltas). Messages are OpenAI-style dicts
(``role``: system | user | assistant | tool, ``content``; tool turns may carry
``tool_call_id`` / ``name``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Literal, Union

Strategy = Literal["blocking", "revision", "parallel"]
EventType = Literal["thinking", "delta", "revision", "evaluation", "done", "error"]

GenerateFn = Callable[[list[dict[str, Any]]], Awaitable[Union[str, AsyncIterator[str]]]]
Generator = Union[str, GenerateFn]

# Call type tags, as note 004's llmApiCalls
CALL_GENERATION = "generation"
CALL_SELF_EVALUATION = "self_evaluation"  # comprehensiveness
CALL_QUALITY_EVALUATION = "quality_evaluation"
CALL_REGENERATION = "regeneration"
CALL_COMPREHENSIVE_RETRY = "comprehensive_retry"
#: How much of the user's question a record keeps (it titles the record on the dashboard).
QUESTION_CHARS = 2000

REVISION_MESSAGE = (
    "I've reviewed my initial response and I can do better. Generating an improved answer..."
)
ENCOURAGEMENT = (
    "Please provide a more comprehensive and complete answer to address all aspects of my question. "
    "Take your time and be thorough."
)


@dataclass
class GateEvent:
    """One event of a gated answer, in order; ``data`` is JSON-able (SSE ``event:`` = type)."""

    type: EventType
    data: dict[str, Any] = field(default_factory=dict)
    result: "GateResult | None" = None  # on ``done`` and ``error``: the whole record (not part of the SSE data)


@dataclass
class Evaluation:
    """One evaluation of one attempt (note 004's evaluations list entry)."""

    attempt: int
    passed: bool | None  # None: evaluation skipped (fail-safe)
    quality_score: float | None = None
    confidence_score: float | None = None
    issues: list[str] = field(default_factory=list)
    improvement_hint: str | None = None
    comprehensive: bool | None = None
    reason: str | None = None
    latency_ms: float = 0.0
    skipped_reason: str | None = None  # set when evaluation_skipped
    coverage: float | None = None  # parallel strategy: share of the final answer the judge saw (None: all)


@dataclass
class Attempt:
    number: int  # 1 = first answer
    kind: str  # generation | regeneration | comprehensive_retry
    text: str
    latency_ms: float
    evaluation: Evaluation | None = None


@dataclass
class GateResult:
    answer: str
    accepted_attempt: int
    # passed | max_regenerations | budget | regeneration_failed | evaluation_skipped | feedback_disabled | error
    accept_reason: str
    attempts: list[Attempt]
    evaluations: list[Evaluation]
    # every call of the request, one entry per call record (failed ones too):
    # {type, iteration, model, input_tokens, output_tokens, tokens, latency_ms, status, call_id, error};
    # the tokens are None for a stream whose endpoint reported no usage
    llm_calls: list[dict[str, Any]]
    trace_id: str
    evaluation_skipped: bool = False
    skip_reason: str | None = None
    error: str | None = None
    continue_context: list[dict[str, Any]] | None = None
    strategy: str | None = None  # the gate's configured strategy and evaluator
    evaluator: str | None = None
    # feedback off, at ``done``: the answer's evaluation is still running (the stored record has it)
    evaluation_pending: bool = False
    question: str | None = None  # the last user message's text (its first QUESTION_CHARS), what was asked
