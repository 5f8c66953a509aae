"""A package's public names, imported on first use (PEP 562).

A process that needs one part of jurist (a Ray worker's limiter, the
benchmarks' judge server, ``jurist --help``) then does not pay for the
database layer, the HTTP client and the rest.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_names(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name in ``where``
    (name -> module) is imported from its module when first read, then kept.

    A name that is also a submodule's (``jurist.models.scripted``) cannot be
    lazy: importing the submodule sets the package attribute to the module.
    Import such names in the package itself."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
