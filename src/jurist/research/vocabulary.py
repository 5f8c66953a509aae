"""The research vocabulary: the eleven evaluation dimensions, the five panel
roles that score them and their instructions (the design note's "LLM Panel
Architecture").

:class:`~jurist.judges.panel.Panel` knows none of these names: it judges any
roles on any dimensions. Research builds its panels from :data:`DEFAULT_ROLES`
(restricted to a stage's dimensions with
:func:`~jurist.judges.panel.roles_for`) and passes
:data:`DIMENSION_DESCRIPTIONS` as the panel's ``dimension_descriptions``.
"""

from __future__ import annotations

from jurist.judges.panel import Role

DIMENSION_DESCRIPTIONS: dict[str, str] = {
    "intent_alignment": "Does the plan correctly interpret what the user wants?",
    "query_coverage": "Do the search queries cover all aspects of the question?",
    "scope_appropriateness": "Is the plan neither too narrow nor too broad for the question?",
    "context_recall": "Were all the documents needed to answer fully retrieved?",
    "context_precision": "Are the retrieved documents actually relevant?",
    "source_quality": "Authority, recency and credibility of the sources.",
    "faithfulness": "Is the answer grounded in the sources (no hallucination)?",
    "relevance": "Does the answer address what the user asked?",
    "factual_accuracy": "Is the information actually correct?",
    "completeness": "Does it cover all aspects with sufficient depth?",
    "coherence": "Logical flow, organisation, readability.",
}

ROLE_INSTRUCTIONS: dict[str, str] = {
    "intent_analyst": "You check whether the work understood what the user actually wants (the goal behind "
    "the question, its constraints and implied needs) and addresses that rather than a nearby question.",
    "coverage_checker": "You work systematically: list the aspects of the user's question and what a full "
    "answer needs, then check each against the material. A missing aspect lowers the score however good "
    "the rest is.",
    "faithfulness_judge": "You compare claims with the sources given: a claim the sources do not state is "
    "unsupported, however plausible. For retrieved documents, judge whether each is relevant to the question.",
    "quality_assessor": "You judge craft and credibility: logical flow, organisation and readability; the "
    "authority, recency and credibility of sources; and whether the scope suits the question.",
    "fact_checker": "You are a sceptic with broad knowledge: check whether the statements are true, "
    "independently of the sources given, and lower your confidence for claims you cannot verify.",
}

_ROLE_DIMENSIONS: dict[str, list[str]] = {
    "intent_analyst": ["intent_alignment", "relevance"],
    "coverage_checker": ["query_coverage", "completeness", "context_recall"],
    "faithfulness_judge": ["faithfulness", "context_precision"],
    "quality_assessor": ["coherence", "source_quality", "scope_appropriateness"],
    "fact_checker": ["factual_accuracy"],
}

# The note's five roles, with their instructions; no model (the panel's default model).
DEFAULT_ROLES: list[Role] = [
    Role(name, dims, instructions=ROLE_INSTRUCTIONS[name]) for name, dims in _ROLE_DIMENSIONS.items()
]

# The note's model of each role ("available Ollama models"), used when the
# configuration names neither the role's model nor ``research.model``.
DEFAULT_ROLE_MODELS: dict[str, str] = {
    "intent_analyst": "ollama/llama3.1:8b",
    "coverage_checker": "ollama/qwen3:14b",
    "faithfulness_judge": "ollama/llama3.1:8b",
    "quality_assessor": "ollama/qwen3:14b",
    "fact_checker": "ollama/qwen3:14b",
}
DEFAULT_ESCALATION_MODEL = "ollama/qwen3:30b"
DEFAULT_VISUAL_EVALUATOR = "ollama/qwen3-vl:8b"

__all__ = [
    "DEFAULT_ESCALATION_MODEL",
    "DEFAULT_ROLES",
    "DEFAULT_ROLE_MODELS",
    "DEFAULT_VISUAL_EVALUATOR",
    "DIMENSION_DESCRIPTIONS",
    "ROLE_INSTRUCTIONS",
]
