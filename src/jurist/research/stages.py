"""The three research stages, their dimensions, weights and thresholds.

The tables of the design note ("Evaluation Dimensions") as data; the roles
that score the dimensions are in :mod:`jurist.research.vocabulary`.
:mod:`jurist.research.config` takes its defaults from here; everything else
reads the validated configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, runtime_checkable

from jurist.research.vocabulary import DIMENSION_DESCRIPTIONS

if TYPE_CHECKING:  # pragma: no cover
    from jurist.judges.panel import PanelResult

PLAN = "plan"
RETRIEVAL = "retrieval"
ANSWER = "answer"
STAGE_NAMES: tuple[str, ...] = (PLAN, RETRIEVAL, ANSWER)

# How a plan dimension below its threshold affects the attempt (plan stage only).
RULE_ALWAYS = "always"  # always iterate
RULE_ITERATE = "iterate"  # iterate
RULE_IF_BORDERLINE = "if_borderline"  # iterate only when the overall score is borderline
RULE_NONE = "none"  # never forces an iteration by itself

# Iteration modes (the critic's recommendation, and what the planner is asked for).
TARGETED_FIX: Final = "targeted_fix"
FULL_REGENERATION: Final = "full_regeneration"
ALTERNATIVE_APPROACH: Final = "alternative_approach"
MODES: tuple[str, ...] = (TARGETED_FIX, FULL_REGENERATION, ALTERNATIVE_APPROACH)


@dataclass(frozen=True)
class Dimension:
    """One evaluation dimension of a stage, with the note's defaults."""

    key: str
    label: str
    weight: float
    description: str
    threshold: float | None = None
    rule: str = RULE_NONE


def _dim(key: str, label: str, weight: float, threshold: float | None = None, rule: str = RULE_NONE) -> Dimension:
    return Dimension(key, label, weight, DIMENSION_DESCRIPTIONS[key], threshold, rule)


# The note's tables; descriptions are the panel's, so roles and stages speak alike.
DIMENSIONS: dict[str, tuple[Dimension, ...]] = {
    PLAN: (
        _dim("intent_alignment", "Intent Alignment", 0.50, 0.7, RULE_ALWAYS),
        _dim("query_coverage", "Query Coverage", 0.35, 0.6, RULE_ITERATE),
        _dim("scope_appropriateness", "Scope Appropriateness", 0.15, 0.5, RULE_IF_BORDERLINE),
    ),
    RETRIEVAL: (
        _dim("context_recall", "Context Recall", 0.40),
        _dim("context_precision", "Context Precision", 0.35),
        _dim("source_quality", "Source Quality", 0.25),
    ),
    ANSWER: (
        _dim("faithfulness", "Faithfulness", 0.30),
        _dim("relevance", "Relevance", 0.25),
        _dim("factual_accuracy", "Factual Accuracy", 0.20),
        _dim("completeness", "Completeness", 0.15),
        _dim("coherence", "Coherence", 0.10),
    ),
}

# A research pipeline's own prompts, named by what uses them (``ResearchPipeline(prompts=...)``): the
# planner (Stage 1), the search (Stage 2) and the synthesiser (Stage 3). The prompt lab lists them
# as ``<prefix>.<name>`` (``research.planner``) and routes their calls like jurist's own.
PLANNER_PROMPT: Final = "planner"
RETRIEVAL_PROMPT: Final = "retrieval"
SYNTHESIS_PROMPT: Final = "synthesis"
PIPELINE_PROMPTS: tuple[str, ...] = (PLANNER_PROMPT, RETRIEVAL_PROMPT, SYNTHESIS_PROMPT)

PASS_THRESHOLD = 0.7  # plan: "0.7 overall (configurable)"; used for every stage by default
SEVERE_THRESHOLD = 0.5  # retrieval: flag severe failures below 0.5
REGENERATE_BELOW = 0.5  # answer: regenerate the synthesis below 0.5


# What the panel is asked to do at each stage (the ``task`` of Panel.evaluate).
TASKS: dict[str, str] = {
    PLAN: ("Evaluate a research plan before it is executed: does it interpret the user's query correctly, "
           "do its search queries cover every aspect of the question, and is its scope right?"),
    RETRIEVAL: ("Evaluate the sources retrieved for a research query: are all the documents needed to answer "
                "it there, are they relevant, and are they authoritative, recent and credible?"),
    ANSWER: ("Evaluate the final answer of a research pipeline against the user's query and the retrieved "
             "sources: grounding, relevance, factual accuracy, completeness and coherence."),
}


def descriptions(stage: str) -> dict[str, str]:
    """Dimension key -> the note's description, for the panel's prompts."""
    return {d.key: d.description for d in DIMENSIONS[stage]}


# --- the evaluator every stage takes -----------------------------------------------


@runtime_checkable
class StageEvaluator(Protocol):
    """What scores a stage: a :class:`~jurist.judges.panel.Panel`, the local
    judge (:class:`~jurist.research.local.LocalResearchEvaluator`) or a test fake."""

    async def evaluate(self, subject: dict[str, str], *, task: str, trace_id: str | None = None) -> "PanelResult":
        ...
