"""Vocabularies and constants shared by the gate, its proxy and its LangGraph helper.

The gate's record and its parts are in :mod:`jurist.gate.records`
(:class:`~jurist.gate.records.GateRecord`, ``Attempt``, ``Evaluation``), its
events in :mod:`jurist.gate.events`.

A *generator* produces the answer: either a model reference (``"openai/gpt-4o-mini"``)
or a user's async function ``generate(messages) -> str | AsyncIterator[str]``
(text, or a stream of text deltas). Messages are OpenAI-style dicts
(``role``: system | user | assistant | tool, ``content``; tool turns may carry
``tool_call_id`` / ``name``).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Callable, Final, Literal, Union

Strategy = Literal["blocking", "revision", "parallel"]
EventType = Literal["thinking", "delta", "revision", "evaluation", "done", "error"]
#: Why the gate released the answer it did (a record's ``accept_reason``): it ``passed``; the
#: regeneration cap was hit (``max_regenerations``, the best answer); another attempt would not fit
#: the ``budget``; a regeneration failed (``regeneration_failed``, the best earlier answer); the
#: evaluator gave no verdict (``evaluation_skipped``, fail-safe: accepted unjudged); feedback is off
#: (``feedback_disabled``: released, then scored); the first generation failed (``error``: no
#: answer); the proxy relayed an answer that calls tools, which is not judged (``tool_calls``).
AcceptReason = Literal["passed", "max_regenerations", "budget", "regeneration_failed", "evaluation_skipped",
                       "feedback_disabled", "error", "tool_calls"]
#: What an ``error`` event's ``code`` says failed: the generation, the caller's tool loop, the budget.
ErrorCode = Literal["GENERATION_FAILED", "MAX_ITERATIONS", "BUDGET"]
#: What each attempt is (the call type of its generation).
AttemptKind = Literal["generation", "regeneration", "comprehensive_retry"]

GenerateFn = Callable[[list[dict[str, Any]]], Awaitable[Union[str, AsyncIterator[str]]]]
Generator = Union[str, GenerateFn]

# Call type tags, as note 004's llmApiCalls
CALL_GENERATION: Final = "generation"
CALL_SELF_EVALUATION: Final = "self_evaluation"  # comprehensiveness
CALL_QUALITY_EVALUATION: Final = "quality_evaluation"
CALL_REGENERATION: Final = "regeneration"
CALL_COMPREHENSIVE_RETRY: Final = "comprehensive_retry"
#: How much of the user's question a record keeps (it titles the record on the dashboard).
QUESTION_CHARS = 2000

REVISION_MESSAGE = (
    "I've reviewed my initial response and I can do better. Generating an improved answer..."
)
ENCOURAGEMENT = (
    "Please provide a more comprehensive and complete answer to address all aspects of my question. "
    "Take your time and be thorough."
)
