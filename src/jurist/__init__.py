"""jurist: judge LLM output with LLMs.

Async first::

    import jurist
    result = await jurist.evaluate("rubrics.json", "session.jsonl", judge="openai/gpt-4o-mini")

and from sync code (also inside a running event loop)::

    result = jurist.evaluate_sync("rubrics.json", "session.jsonl")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jurist.errors import (
    AuthFailed,
    ConfigError,
    InputError,
    JudgeParseError,
    JuristError,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    RateLimited,
    RequestRejected,
    StoreError,
    UsageError,
)
from jurist.lazy import lazy_names

if TYPE_CHECKING:
    from jurist.config import Settings
    from jurist.rubrics import (evaluate, evaluate_batch, evaluate_batch_sync, evaluate_sync, load_rubrics,
                                load_session)
    from jurist.store import Store

__getattr__, __dir__ = lazy_names(__name__, {
    "Settings": "jurist.config",
    "Runtime": "jurist.runtime",
    "open": "jurist.runtime",
    "Gate": "jurist.gate",
    "Panel": "jurist.judges.panel",
    "ResearchEvaluation": "jurist.research",
    "ChecklistSession": "jurist.checklist",
    "Store": "jurist.store",
    **{name: "jurist.rubrics" for name in ("evaluate", "evaluate_batch", "evaluate_batch_sync", "evaluate_sync",
                                           "load_rubrics", "load_session")},
})

__version__ = "0.1.0"

__all__ = [
    "AuthFailed",
    "ConfigError",
    "InputError",
    "JudgeParseError",
    "JuristError",
    "ModelError",
    "ModelTimeout",
    "ModelUnavailable",
    "RateLimited",
    "RequestRejected",
    "ChecklistSession",
    "Gate",
    "Panel",
    "ResearchEvaluation",
    "Runtime",
    "Settings",
    "Store",
    "StoreError",
    "UsageError",
    "evaluate",
    "evaluate_batch",
    "evaluate_batch_sync",
    "evaluate_sync",
    "load_rubrics",
    "load_session",
    "open",
]
