"""Offline analysis: failure patterns in the stored evaluations, and the prompt lab
(prompt versions, diffs, A/B comparisons of two versions).

The names load on first use (:mod:`jurist.lazy`): the prompt lab and the stored
patterns need only the base install, while running an analysis, an A/B
comparison or a calibration needs the ``analysis`` extra (scipy; see
:mod:`jurist.extras`).
"""

from typing import TYPE_CHECKING

from jurist.lazy import lazy_names

if TYPE_CHECKING:
    from jurist.analysis.ab import compare_versions
    from jurist.analysis.comparison import ABComparison
    from jurist.analysis.patterns import latest_patterns, run_analysis
    from jurist.analysis.prompt_tests import (PromptTest, ab_report, activate_version, active_routes, list_tests,
                                              start_test, stop_test)
    from jurist.analysis.prompts import (create_prompt_version, diff_lines, list_prompts, prompt_version,
                                         prompt_versions)

__getattr__, __dir__ = lazy_names(__name__, {
    "ABComparison": "jurist.analysis.comparison",
    "compare_versions": "jurist.analysis.ab",
    "latest_patterns": "jurist.analysis.patterns",
    "run_analysis": "jurist.analysis.patterns",
    **{name: "jurist.analysis.prompt_tests" for name in ("PromptTest", "ab_report", "activate_version",
                                                         "active_routes", "list_tests", "start_test",
                                                         "stop_test")},
    **{name: "jurist.analysis.prompts" for name in ("create_prompt_version", "diff_lines", "list_prompts",
                                                    "prompt_version", "prompt_versions")},
})

__all__ = [
    "ABComparison",
    "PromptTest",
    "ab_report",
    "activate_version",
    "active_routes",
    "list_tests",
    "start_test",
    "stop_test",
    "compare_versions",
    "create_prompt_version",
    "diff_lines",
    "latest_patterns",
    "list_prompts",
    "prompt_version",
    "prompt_versions",
    "run_analysis",
]
