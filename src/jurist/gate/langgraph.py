"""The gate as LangGraph nodes (optional extra ``jurist[langgraph]``), as note 001 draws it::

    generate_response -> evaluate -> [should_regenerate]
                                      |- "regenerate" -> generate_response
                                      '- "accept"     -> END

:func:`add_gate` adds the ``evaluate`` node after the user's generate node and
the conditional edge, and wraps the generate node so that the gate's budget
(``budget_s``, note 001's ``WORKFLOW_TIMEOUT``) counts from the first
generation. The state must hold the keys of :class:`GateState` (subclass it)
plus the conversation (``messages``, OpenAI-style dicts) and the answer
(``response_text``). The evaluate node sets ``evaluation``, ``quality_score``,
``evaluation_feedback`` (the judge's improvement hint),
``regeneration_instruction`` (the feedback, issues and the previous answer's
first 500 characters, or note 004's encouragement) and, when it decides to
regenerate, increments ``regeneration_count``. The generate node reads them on
its second pass. The cap and the threshold come from the gate's config; with
``evaluate_feedback_enabled`` off the edge always accepts.

The path keeps the same record as :meth:`Gate.run <jurist.gate.Gate.run>`: the
attempts, their evaluations and the calls (the judge's, and one entry per
generate node run) travel in the state's ``gate_*`` keys, and when the edge
accepts, the :class:`~jurist.gate.records.GateRecord` is stored (an
``evaluations`` row of kind ``gate``) and put in the state as ``gate_record``.
The budget is enforced as ``Gate.run`` enforces it: a generation still running
when it ends is cancelled and the best answer so far is accepted (its text
replaces ``response_text``; reason ``budget``), an evaluation gets at most the
time left, and no regeneration starts that would not fit. A rejected attempt
emits note 001's thinking event, ``{"event": "thinking", "data": {...}}``,
through LangGraph's ``custom`` stream mode. LangGraph is imported here only.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, TypedDict

from jurist.errors import ConfigError, InputError
from jurist.gate import policy
from jurist.gate.evaluation import Run, evaluate_attempt
from jurist.gate.events import ThinkingEvent
from jurist.gate.gate import Gate
from jurist.gate.records import PURPOSE, Attempt, CallEntry
from jurist.gate.types import CALL_GENERATION, REVISION_MESSAGE, AcceptReason
from jurist.ids import new_id

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


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
    # The request's record, as it grows (JSON, so that a checkpointer can keep it):
    gate_trace_id: str
    gate_started: float  # time.time() when the first generation started: the budget counts from here
    gate_kind: str  # what the next generation is: generation | regeneration | comprehensive_retry
    gate_attempts: list[dict[str, Any]]  # Attempt JSON, with its evaluation
    gate_calls: list[dict[str, Any]]  # CallEntry JSON
    gate_generation_s: list[float]
    gate_evaluation_s: list[float]
    gate_out_of_budget: bool  # the last generation was cancelled when the budget ran out
    gate_regeneration_failed: bool  # ... or it raised: the best answer so far is accepted
    gate_record: dict[str, Any] | None  # the stored GateRecord's JSON, once the edge accepts


def _remaining(gate: Gate, started: float) -> float:
    return started + gate.config.budget_s - time.time() - policy.BUDGET_MARGIN_S


def _started(state: Mapping[str, object]) -> tuple[str, float]:
    trace, started = state.get("gate_trace_id"), state.get("gate_started")
    return (trace if isinstance(trace, str) and trace else new_id(),
            float(started) if isinstance(started, (int, float)) and not isinstance(started, bool) else time.time())


def _list(state: Mapping[str, object], key: str) -> list[Any]:
    value = state.get(key)
    return list(value) if isinstance(value, list) else []


def _emit(event: ThinkingEvent) -> None:
    """Note 001's thinking event to a graph streamed with ``stream_mode="custom"`` (a no-op otherwise)."""
    from langgraph.config import get_stream_writer

    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a graph run
        return
    writer({"event": event.type, "data": event.data})


def budgeted(gate: Gate, node: Any, name: str, *, messages_key: str = "messages") -> Any:
    """The generate node ``node`` (a compiled node's runnable) run within the gate's budget: the
    first run starts the budget and the trace; a run still going when the budget ends is cancelled
    (the evaluate node then accepts the best answer so far). Each run is one call entry."""

    async def generate_within_budget(state: Mapping[str, object], config: RunnableConfig) -> Any:
        trace, started = _started(state)
        count = state.get("regeneration_count") or 0
        number = (count if isinstance(count, int) else 0) + 1
        kind = state.get("gate_kind") if number > 1 and isinstance(state.get("gate_kind"), str) else CALL_GENERATION
        assert isinstance(kind, str)
        remaining = _remaining(gate, started)
        began = time.monotonic()
        token = PURPOSE.set(kind)
        update: Any = None
        failure: BaseException | None = None
        out_of_budget = remaining <= 0
        try:
            if not out_of_budget:
                update = await asyncio.wait_for(node.ainvoke(state, config), remaining)
        except asyncio.TimeoutError:
            out_of_budget = True
        except BaseException as exc:
            failure = exc
        finally:
            PURPOSE.reset(token)
        elapsed = time.monotonic() - began
        entry = CallEntry(type=kind, iteration=number, model=f"node:{name}", latency_ms=round(elapsed * 1000.0, 3),
                          status="error" if failure is not None or out_of_budget else "ok", call_id=None,
                          error=(f"{type(failure).__name__}: {failure}" if failure is not None else
                                 f"the {gate.config.budget_s:g} s budget ran out while generating"
                                 if out_of_budget else None))
        ours: dict[str, object] = {
            "gate_trace_id": trace, "gate_started": started,
            "gate_calls": _list(state, "gate_calls") + [entry.model_dump(mode="json")],
            "gate_generation_s": _list(state, "gate_generation_s") + [elapsed],
            "gate_out_of_budget": out_of_budget,
        }
        if failure is not None:
            if number == 1 or not isinstance(failure, Exception):
                # no answer at all: recorded as Gate.run records it, then the graph fails as it would
                if isinstance(failure, Exception):
                    await _failed(gate, state.get(messages_key), trace, started, failure, [entry])
                raise failure
            ours["gate_out_of_budget"] = True  # a failed regeneration: the evaluate node accepts the best so far
            ours["gate_regeneration_failed"] = True
        if update is None or out_of_budget or failure is not None:
            return ours
        if not isinstance(update, Mapping):
            raise ConfigError(f"the gate wraps the node {name!r}, which must return a dict of state updates "
                              f"(it returned {type(update).__name__})")
        return {**update, **ours}

    return generate_within_budget


def evaluate_node(gate: Gate, *, messages_key: str = "messages", response_key: str = "response_text") -> Any:
    """The ``evaluate`` node: judge the answer, decide regenerate / accept, record it in the state
    (and, on accept, in the store)."""

    async def evaluate(state: Mapping[str, object]) -> dict[str, object]:
        messages = state.get(messages_key) or []
        answer = state.get(response_key) or ""
        count = state.get("regeneration_count") or 0
        if not isinstance(messages, Iterable) or not isinstance(answer, str) or not isinstance(count, int):
            raise InputError(f"the gate's state needs {messages_key!r} (a list of messages), {response_key!r} "
                             "(text) and regeneration_count (a whole number)")
        typed, raw = policy.read_messages(messages, messages_key)
        await gate.astart()
        cfg = gate.config
        trace, started = _started(state)
        attempts = [Attempt.model_validate(a) for a in _list(state, "gate_attempts")]
        gen_s, eval_s = _list(state, "gate_generation_s"), _list(state, "gate_evaluation_s")
        calls = [CallEntry.model_validate(c) for c in _list(state, "gate_calls")]
        run = Run(trace, typed, typed, raw, time.monotonic() + _remaining(gate, started) + policy.BUDGET_MARGIN_S,
                  gate.collector.open(trace), attempts=attempts, gen_s=list(gen_s), eval_s=list(eval_s))
        run.calls[:0] = calls
        update: dict[str, object] = {"gate_trace_id": trace, "gate_started": started, "gate_out_of_budget": False,
                                     "gate_regeneration_failed": False}
        try:
            reason: AcceptReason
            if state.get("gate_out_of_budget"):  # the generation did not finish: its text is not an answer
                reason = "regeneration_failed" if state.get("gate_regeneration_failed") else "budget"
                ev = None
            else:
                number = count + 1
                kind = state.get("gate_kind") if number > 1 and isinstance(state.get("gate_kind"), str) \
                    else CALL_GENERATION
                run.attempts.append(Attempt(number=number, kind=str(kind), text=answer,
                                            latency_ms=round(1000.0 * (gen_s[-1] if gen_s else 0.0), 3)))
                ev = await evaluate_attempt(gate.evaluator, cfg, run, answer, number)
                run.evaluated(number, ev)
                update.update(evaluation=ev.model_dump(), quality_score=ev.quality_score,
                              evaluation_feedback=ev.improvement_hint or ev.reason)
                if not cfg.evaluate_feedback_enabled:
                    reason = "feedback_disabled"
                elif ev.passed is None:
                    reason = "evaluation_skipped"
                elif ev.passed:
                    reason = "passed"
                elif count >= cfg.regenerations():
                    reason = "max_regenerations"
                elif not policy.fits(run.remaining(), run.gen_s, run.eval_s):
                    reason = "budget"
                else:
                    request, next_kind = policy.regeneration_request(typed, answer, ev, cfg.previous_chars)
                    _emit(ThinkingEvent(message=REVISION_MESSAGE, retry_count=number, ts=time.time(),
                                        feedback=ev.improvement_hint or ev.reason))
                    update.update(gate_decision="regenerate", regeneration_count=count + 1,
                                  regeneration_instruction=request[-1].text, gate_kind=next_kind,
                                  **_carried(run))
                    return update
            if not run.attempts:  # the first generation ran out of budget: no answer to accept
                record = await gate.failed(run, TimeoutError(f"the {cfg.budget_s:g} s budget ran out while "
                                                             "generating"))
                update.update(gate_decision="accept", gate_record=record.to_json(), **_carried(run))
                return update
            accepted = run.attempts[-1] if reason in ("passed", "evaluation_skipped", "feedback_disabled") \
                else policy.best_attempt(run.attempts)
            result = gate.record_of(run, accepted, reason)
            await gate.save(result, committed=True)
            update.update(gate_decision="accept", gate_record=result.to_json(), **_carried(run))
            if accepted.text != answer:
                update[response_key] = accepted.text
            return update
        finally:
            gate.collector.close(trace)

    return evaluate


async def _failed(gate: Gate, messages: object, trace: str, started: float, exc: Exception,
                  calls: list[CallEntry]) -> None:
    """Store the record of a graph whose first generation raised (no answer)."""
    typed, raw = policy.read_messages(messages if isinstance(messages, Iterable) else [], "messages")
    await gate.astart()
    run = Run(trace, typed, typed, raw, time.monotonic() + _remaining(gate, started), calls)
    await gate.failed(run, exc)


def _carried(run: Run) -> dict[str, object]:
    """The run's record as state keys (JSON)."""
    return {"gate_attempts": [a.model_dump(mode="json") for a in run.attempts],
            "gate_calls": [c.model_dump(mode="json") for c in run.calls],
            "gate_generation_s": list(run.gen_s), "gate_evaluation_s": list(run.eval_s)}


def should_regenerate(state: Mapping[str, object]) -> Literal["regenerate", "accept"]:
    """The conditional edge: the evaluate node's decision."""
    return "regenerate" if state.get("gate_decision") == "regenerate" else "accept"


def add_gate(builder: Any, gate: Gate, *, generate_node: str = "generate_response", evaluate_name: str = "evaluate",
             accept_to: Any = None, messages_key: str = "messages", response_key: str = "response_text") -> Any:
    """Add the evaluate node after ``generate_node`` and the edge ``regenerate`` / ``accept``
    to a ``StateGraph`` builder (``accept`` goes to ``accept_to``, default ``END``), and run
    ``generate_node`` within the gate's budget; returns the builder."""
    from langgraph.graph import END

    spec = builder.nodes.get(generate_node)
    if spec is None:
        raise ConfigError(f"the graph has no node {generate_node!r} to gate: add the generate node first "
                          f"(nodes: {', '.join(sorted(builder.nodes)) or 'none'})")
    del builder.nodes[generate_node]
    builder.add_node(generate_node, budgeted(gate, spec.runnable, generate_node, messages_key=messages_key),
                     metadata=spec.metadata, input_schema=spec.input_schema, retry_policy=spec.retry_policy,
                     cache_policy=spec.cache_policy, defer=spec.defer)
    builder.add_node(evaluate_name, evaluate_node(gate, messages_key=messages_key, response_key=response_key))
    builder.add_edge(generate_node, evaluate_name)
    builder.add_conditional_edges(evaluate_name, should_regenerate,
                                  {"regenerate": generate_node, "accept": END if accept_to is None else accept_to})
    return builder


__all__ = ["GateState", "add_gate", "budgeted", "evaluate_node", "should_regenerate"]
