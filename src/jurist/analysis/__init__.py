"""Offline analysis: failure patterns in the stored evaluations, and the prompt lab
(prompt versions, diffs, A/B comparisons of two versions)."""

from jurist.analysis.ab import ABComparison, compare_versions
from jurist.analysis.patterns import latest_patterns, run_analysis
from jurist.analysis.prompts import (
    create_prompt_version,
    diff_lines,
    list_prompts,
    prompt_version,
    prompt_versions,
)

__all__ = [
    "ABComparison",
    "compare_versions",
    "create_prompt_version",
    "diff_lines",
    "latest_patterns",
    "list_prompts",
    "prompt_version",
    "prompt_versions",
    "run_analysis",
]
