"""Test helpers: a scripted OpenAI/Anthropic-compatible HTTP server on 127.0.0.1.

The names are imported lazily, so ``python -m jurist.testing.provider_server``
runs the module once, without a warning from ``runpy``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jurist.testing.provider_server import ProviderServer, Reply, Responder

__all__ = ["ProviderServer", "Reply", "Responder"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from jurist.testing import provider_server

        return getattr(provider_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
