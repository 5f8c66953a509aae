"""Test helpers: a scripted OpenAI/Anthropic-compatible HTTP server on 127.0.0.1.

The names are imported lazily, so ``python -m jurist.testing.provider_server``
runs the module once, without a warning from ``runpy``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jurist.lazy import lazy_names

if TYPE_CHECKING:
    from jurist.testing.provider_server import ProviderServer, Reply, Responder, schema_dialect
    from jurist.testing.replies import tool_call, tool_reply

__all__ = ["ProviderServer", "Reply", "Responder", "schema_dialect", "tool_call", "tool_reply"]


__getattr__, __dir__ = lazy_names(__name__, {**dict.fromkeys(("ProviderServer", "Reply", "Responder", "schema_dialect"),
                                                             "jurist.testing.provider_server"),
                                             **dict.fromkeys(("tool_call", "tool_reply"), "jurist.testing.replies")})
