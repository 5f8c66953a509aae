"""jurist: judge LLM output with LLMs.

Async first::

    import jurist
    result = await jurist.evaluate("rubrics.json", "session.jsonl", judge="openai/gpt-4o-mini")

and from sync code (also inside a running event loop)::

    result = jurist.evaluate_sync("rubrics.json", "session.jsonl")

The main entry point of each capability is here, imported on first use:
``evaluate``/``evaluate_batch`` (rubric scoring), ``Gate``, ``Panel``,
``ResearchEvaluation``, ``ChecklistSession``/``ChecklistEvaluator``, and
``Runtime``/``open`` (settings, store and models built once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jurist.errors import (
    AuthFailed,
    CalibrationRequired,
    ConfigError,
    EndpointDown,
    InputError,
    JudgeParseError,
    JuristError,
    MissingExtra,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    RateLimited,
    RequestRejected,
    StoreError,
    UsageError,
)
from jurist.lazy import lazy_names
from jurist.version import __version__

if TYPE_CHECKING:
    from jurist.checklist import ChecklistEvaluator, ChecklistSession
    from jurist.config import Settings
    from jurist.gate import Gate
    from jurist.judges.panel import Panel
    from jurist.pytest_plugin import assert_judged
    from jurist.research import ResearchEvaluation
    from jurist.rubrics import (evaluate, evaluate_batch, evaluate_batch_sync, evaluate_sync, load_rubrics,
                                load_session)
    from jurist.runtime import Runtime, open
    from jurist.store import Store

__getattr__, __dir__ = lazy_names(__name__, {
    "Settings": "jurist.config",
    "Runtime": "jurist.runtime",
    "open": "jurist.runtime",
    "Gate": "jurist.gate",
    "Panel": "jurist.judges.panel",
    "ResearchEvaluation": "jurist.research",
    "ChecklistEvaluator": "jurist.checklist",
    "ChecklistSession": "jurist.checklist",
    "Store": "jurist.store",
    "assert_judged": "jurist.pytest_plugin",
    **{name: "jurist.rubrics" for name in ("evaluate", "evaluate_batch", "evaluate_batch_sync", "evaluate_sync",
                                           "load_rubrics", "load_session")},
})


__all__ = [
    "AuthFailed",
    "CalibrationRequired",
    "ConfigError",
    "InputError",
    "JudgeParseError",
    "JuristError",
    "MissingExtra",
    "ModelError",
    "ModelTimeout",
    "ModelUnavailable",
    "EndpointDown",
    "RateLimited",
    "RequestRejected",
    "ChecklistEvaluator",
    "ChecklistSession",
    "Gate",
    "Panel",
    "ResearchEvaluation",
    "Runtime",
    "Settings",
    "Store",
    "StoreError",
    "UsageError",
    "assert_judged",
    "evaluate",
    "evaluate_batch",
    "evaluate_batch_sync",
    "evaluate_sync",
    "load_rubrics",
    "load_session",
    "open",
]
