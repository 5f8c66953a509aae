"""The gate as LangGraph nodes (optional extra ``jurist[langgraph]``), as note 001 draws it::

    generate_response -> evaluate -> [should_regenerate]
                                      |- "regenerate" -> generate_response
                                      '- "accept"     -> END

:func:`add_gate` adds the ``evaluate`` node after the user's generate node and
the conditional edge. The state must hold the keys of :class:`GateState`
(subclass it) plus the conversation (``messages``, OpenAI-style dicts) and the
answer (``response_text``). The evaluate node sets ``evaluation``,
``quality_score``, ``evaluation_feedback`` (the judge's improvement hint),
``regeneration_instruction`` (the feedback, issues and the previous answer's
first 500 characters, or note 004's encouragement) and, when it decides to
regenerate, increments ``regeneration_count``. The generate node reads them on
its second pass. The cap and the threshold come from the gate's config; with
``evaluate_feedback_enabled`` off the edge always accepts. LangGraph is imported
here only.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Mapping, TypedDict

from jurist.errors import InputError
from jurist.gate import policy
from jurist.gate.gate import Gate


class GateState(TypedDict, total=False):
    """The keys the gate's nodes read and write (subclass it for your graph's state)."""

    messages: list[dict[str, Any]]
    response_text: str
    regeneration_count: int
    evaluation_feedback: str | None
    regeneration_instruction: str | None
    evaluation: dict[str, Any] | None
    quality_score: float | None
    gate_decision: str


def evaluate_node(gate: Gate, *, messages_key: str = "messages", response_key: str = "response_text") -> Any:
    """The ``evaluate`` node: judge the answer, decide regenerate / accept, record it in the state."""

    async def evaluate(state: Mapping[str, object]) -> dict[str, object]:
        messages = state.get(messages_key) or []
        answer = state.get(response_key) or ""
        count = state.get("regeneration_count") or 0
        if not isinstance(messages, Iterable) or not isinstance(answer, str) or not isinstance(count, int):
            raise InputError(f"the gate's state needs {messages_key!r} (a list of messages), {response_key!r} "
                             "(text) and regeneration_count (a whole number)")
        typed, _ = policy.read_messages(messages, messages_key)
        ev = await gate.evaluate(typed, answer, attempt=count + 1)
        cfg = gate.config
        regenerate = bool(cfg.evaluate_feedback_enabled and ev.passed is False and count < cfg.regenerations())
        update: dict[str, object] = {
            "evaluation": ev.model_dump(),
            "quality_score": ev.quality_score,
            "evaluation_feedback": ev.improvement_hint or ev.reason,
            "gate_decision": "regenerate" if regenerate else "accept",
        }
        if regenerate:
            request, _ = policy.regeneration_request(typed, answer, ev, cfg.previous_chars)
            update["regeneration_count"] = count + 1
            update["regeneration_instruction"] = request[-1].text
        return update

    return evaluate


def should_regenerate(state: Mapping[str, object]) -> Literal["regenerate", "accept"]:
    """The conditional edge: the evaluate node's decision."""
    return "regenerate" if state.get("gate_decision") == "regenerate" else "accept"


def add_gate(builder: Any, gate: Gate, *, generate_node: str = "generate_response", evaluate_name: str = "evaluate",
             accept_to: Any = None, messages_key: str = "messages", response_key: str = "response_text") -> Any:
    """Add the evaluate node after ``generate_node`` and the edge ``regenerate`` / ``accept``
    to a ``StateGraph`` builder (``accept`` goes to ``accept_to``, default ``END``); returns the builder."""
    from langgraph.graph import END

    builder.add_node(evaluate_name, evaluate_node(gate, messages_key=messages_key, response_key=response_key))
    builder.add_edge(generate_node, evaluate_name)
    builder.add_conditional_edges(evaluate_name, should_regenerate,
                                  {"regenerate": generate_node, "accept": END if accept_to is None else accept_to})
    return builder
