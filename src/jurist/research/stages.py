"""The three research stages, their dimensions, weights, thresholds and roles.

The tables of the design note ("Evaluation Dimensions", "LLM Panel
Architecture") as data. :mod:`jurist.research.config` takes its defaults from
here; everything else reads the validated configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

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
RULES: tuple[str, ...] = (RULE_ALWAYS, RULE_ITERATE, RULE_IF_BORDERLINE, RULE_NONE)

# Iteration modes (the critic's recommendation, and what the planner is asked for).
TARGETED_FIX = "targeted_fix"
FULL_REGENERATION = "full_regeneration"
ALTERNATIVE_APPROACH = "alternative_approach"
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


DIMENSIONS: dict[str, tuple[Dimension, ...]] = {
    PLAN: (
        Dimension("intent_alignment", "Intent Alignment", 0.50,
                  "Does the plan correctly interpret what the user wants?", 0.7, RULE_ALWAYS),
        Dimension("query_coverage", "Query Coverage", 0.35,
                  "Do search queries cover all aspects of the question?", 0.6, RULE_ITERATE),
        Dimension("scope_appropriateness", "Scope Appropriateness", 0.15,
                  "Is the plan too narrow or too broad?", 0.5, RULE_IF_BORDERLINE),
    ),
    RETRIEVAL: (
        Dimension("context_recall", "Context Recall", 0.40,
                  "Did we retrieve all documents needed to answer fully?"),
        Dimension("context_precision", "Context Precision", 0.35,
                  "Are retrieved documents actually relevant?"),
        Dimension("source_quality", "Source Quality", 0.25,
                  "Authority, recency, credibility of sources"),
    ),
    ANSWER: (
        Dimension("faithfulness", "Faithfulness", 0.30,
                  "Is the answer grounded in sources? (no hallucination)"),
        Dimension("relevance", "Relevance", 0.25, "Does the answer address what the user asked?"),
        Dimension("factual_accuracy", "Factual Accuracy", 0.20, "Is the information actually correct?"),
        Dimension("completeness", "Completeness", 0.15,
                  "Does it cover all aspects with sufficient depth?"),
        Dimension("coherence", "Coherence", 0.10, "Logical flow, organization, readability"),
    ),
}

PASS_THRESHOLD = 0.7  # plan: "0.7 overall (configurable)"; used for every stage by default
SEVERE_THRESHOLD = 0.5  # retrieval: flag severe failures below 0.5
REGENERATE_BELOW = 0.5  # answer: regenerate the synthesis below 0.5

# The role table of the note: which role scores which dimensions.
ROLE_DIMENSIONS: dict[str, tuple[str, ...]] = {
    "intent_analyst": ("intent_alignment", "relevance"),
    "coverage_checker": ("query_coverage", "completeness", "context_recall"),
    "faithfulness_judge": ("faithfulness", "context_precision"),
    "quality_assessor": ("coherence", "source_quality", "scope_appropriateness"),
    "fact_checker": ("factual_accuracy",),
}

# Default model assignments of the note ("available Ollama models").
DEFAULT_ROLE_MODELS: dict[str, str] = {
    "intent_analyst": "ollama/llama3.1:8b",
    "coverage_checker": "ollama/qwen3:14b",
    "faithfulness_judge": "ollama/llama3.1:8b",
    "quality_assessor": "ollama/qwen3:14b",
    "fact_checker": "ollama/qwen3:14b",
}
DEFAULT_ESCALATION_MODEL = "ollama/qwen3:30b"
DEFAULT_VISUAL_EVALUATOR = "ollama/qwen3-vl:8b"

# What the panel is asked to do at each stage (the ``task`` of Panel.evaluate).
TASKS: dict[str, str] = {
    PLAN: ("Evaluate a research plan before it is executed: does it interpret the user's query correctly, "
           "do its search queries cover every aspect of the question, and is its scope right?"),
    RETRIEVAL: ("Evaluate the sources retrieved for a research query: are all the documents needed to answer "
                "it there, are they relevant, and are they authoritative, recent and credible?"),
    ANSWER: ("Evaluate the final answer of a research pipeline against the user's query and the retrieved "
             "sources: grounding, relevance, factual accuracy, completeness and coherence."),
}


def dimension(stage: str, key: str) -> Dimension:
    """The default :class:`Dimension` ``key`` of ``stage`` (KeyError if unknown)."""
    for d in DIMENSIONS[stage]:
        if d.key == key:
            return d
    raise KeyError(f"{stage} has no dimension {key!r}")


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
