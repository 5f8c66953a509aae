"""Stage 3: answer evaluation. Regenerates the synthesis once on a major failure.

:func:`evaluate_answer` asks the user's synthesiser for the answer (unless one
is given), evaluates it, and when its overall is below ``regenerate_below``
(0.5) and ``regenerationEnabled`` asks the synthesiser once more with the
evaluation as feedback. The regenerated answer is evaluated too, and the
better of the two (the regenerated one when equal) is the final answer. A
failing regeneration (the synthesiser raises) keeps the first answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Awaitable, Callable

from jurist.research import stages as st
from jurist.research.config import ResearchConfig
from jurist.judges.outcome import describe
from jurist.research.events import AttemptStarted, Emit, Iterating, Skipped, StageDone, ignore, scored
from jurist.research.failsafe import StageOptions, evaluate_subject, guarded, logger
from jurist.research.records import AnswerAttempt, AnswerEvaluation, fill_stage, unscored_note
from jurist.research.retrieval import sources_text

Synthesiser = Callable[[str, list[Any], "str | None"], Awaitable[str]]


@dataclass
class AnswerOutcome:
    """The answer the research returns, and its evaluation."""

    answer: str
    evaluation: AnswerEvaluation


def answer_feedback(attempt: AnswerAttempt, config: ResearchConfig) -> str:
    """What the synthesiser is told when its answer failed badly."""
    stage = config.stages.answer
    weak = [f"{k} {v:.2f}" for k, v in attempt.aggregated_scores.items() if v < stage.pass_threshold]
    lines = [f"The answer scored {attempt.overall or 0.0:.2f} overall, below {stage.regenerate_below:g}: "
             "rewrite it, grounded only in the sources, answering every part of the question."]
    if weak:
        lines.append("Weak dimensions: " + ", ".join(weak) + ".")
    lines += [f"{r.role}: {r.critique}" for r in attempt.evaluator_results if r.critique]
    return "\n".join(lines)


async def _evaluate(attempt: AnswerAttempt, query: str, sources: list[Any], *, evaluator: st.StageEvaluator,
                    options: StageOptions, config: ResearchConfig, trace_id: str | None, emit: Emit) -> str | None:
    """Evaluate one answer into ``attempt``; returns a warning, if any."""
    subject = {"query": query, "sources": sources_text(sources), "answer": attempt.answer}
    if options.enabled:
        await emit(AttemptStarted(stage="answer", attempt=attempt.attempt_number))
    outcome = await guarded(options, lambda: evaluate_subject(evaluator, st.ANSWER, subject, trace_id=trace_id))
    if not outcome.ok or outcome.value is None:
        attempt.evaluation_skipped, attempt.skip_reason = True, outcome.reason
        await emit(Skipped(stage="answer", attempt=attempt.attempt_number, reason=outcome.reason or "skipped"))
        return outcome.warning
    fill_stage(attempt, outcome.value, list(config.stages.answer.dimensions))
    attempt.passed = (outcome.value.overall or 0.0) >= config.stages.answer.pass_threshold
    await emit(scored("answer", attempt, attempt.attempt_number, config))
    return None


async def evaluate_answer(query: str, sources: list[Any], synthesiser: Synthesiser, *,
                          evaluator: st.StageEvaluator, config: ResearchConfig, answer: str | None = None,
                          trace_id: str | None = None, emit: Emit = ignore) -> AnswerOutcome:
    """Synthesise (unless ``answer`` is given), evaluate, regenerate once below the bar;
    ``emit`` gets the stage's events."""
    out = await _evaluate_answer(query, sources, synthesiser, evaluator=evaluator, config=config, answer=answer,
                                 trace_id=trace_id, emit=emit)
    section = out.evaluation
    await emit(StageDone(stage="answer", overall=section.overall, passed=section.passed,
                         attempts=len(section.attempts), chosen_attempt=section.final_attempt,
                         skipped=section.evaluation_skipped, skip_reason=section.skip_reason,
                         warnings=list(section.warnings)))
    return out


async def _evaluate_answer(query: str, sources: list[Any], synthesiser: Synthesiser, *,
                           evaluator: st.StageEvaluator, config: ResearchConfig, answer: str | None,
                           trace_id: str | None, emit: Emit) -> AnswerOutcome:
    options = StageOptions.of(st.ANSWER, config)
    stage = config.stages.answer
    text = answer if answer is not None else await synthesiser(query, sources, None)
    section = AnswerEvaluation()
    first = AnswerAttempt(attempt_number=1, answer=text)
    section.attempts.append(first)
    evaluate = partial(_evaluate, query=query, sources=sources, evaluator=evaluator, options=options, config=config,
                       trace_id=trace_id, emit=emit)
    warning = await evaluate(first)
    section.warnings += [warning] if warning else []
    if first.evaluation_skipped:
        section.evaluation_skipped, section.skip_reason = True, first.skip_reason
        return AnswerOutcome(text, section)
    final = first
    if (first.overall or 0.0) < stage.regenerate_below and config.evaluation.answer_evaluation.regeneration_enabled:
        feedback = answer_feedback(first, config)
        await emit(Iterating(stage="answer", attempt=2, critique=" ".join(
            r.critique for r in first.evaluator_results if r.critique), feedback=feedback))
        try:
            again = await synthesiser(query, sources, feedback)
        except Exception as exc:  # regeneration is the evaluation's addition: it never stops research
            section.warnings.append(f"answer regeneration failed ({describe(exc)}); keeping the first answer")
            logger.warning(section.warnings[-1])
        else:
            second = AnswerAttempt(attempt_number=2, answer=again, feedback=feedback)
            section.attempts.append(second)
            section.regenerated = True
            warning = await evaluate(second)
            section.warnings += [warning] if warning else []
            if second.evaluation_skipped or (second.overall or 0.0) >= (first.overall or 0.0):
                final = second
    scored = final if not final.evaluation_skipped else first
    section.final_attempt = final.attempt_number
    section.final_scores = dict(scored.aggregated_scores)
    section.overall, section.passed = scored.overall, scored.passed
    section.unscored_dimensions = list(scored.unscored_dimensions)
    notes = [unscored_note(section.unscored_dimensions)]
    if scored is not final:
        notes.insert(0, f"the regenerated answer could not be evaluated ({final.skip_reason}); "
                        "the scores are the first answer's")
    section.scoring_note = "; ".join(n for n in notes if n) or None
    return AnswerOutcome(final.answer, section)
