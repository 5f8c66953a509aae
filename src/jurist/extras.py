"""The optional parts of jurist and the extras that install them.

``pip install jurist`` is the engine, the command line and the server; an
extra (``[project.optional-dependencies]`` in pyproject.toml) adds a part:

* ``local``: the offline judge ``local/minilm`` (numpy, tokenizers, safetensors,
  threadpoolctl; no torch);
* ``analysis``: statistics and charts: ``jurist calibrate``, the failure-pattern
  analysis, the prompt A/B statistics, the dashboard's charts (scipy,
  krippendorff, plotly).

Code that needs an extra asks here before importing any of its packages: only
``importlib.util.find_spec`` looks for them, nothing is imported.
"""

from __future__ import annotations

import importlib.util

from jurist.errors import MissingExtra

# What each extra installs that jurist imports (pyproject.toml; tests/test_package.py checks).
EXTRAS: dict[str, tuple[str, ...]] = {
    "local": ("numpy", "tokenizers", "safetensors", "threadpoolctl"),
    "analysis": ("scipy", "krippendorff", "plotly"),
}


def missing_packages(extra: str) -> list[str]:
    """The packages of ``extra`` that cannot be imported (none: the extra is installed)."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def missing_extra(extra: str, what: str) -> str | None:
    """None when ``extra`` is installed, else the one-line message saying that
    ``what`` needs it, with the pip command that installs it."""
    missing = missing_packages(extra)
    if not missing:
        return None
    return (f'{what} needs the {extra} extra ({", ".join(EXTRAS[extra])}; missing: {", ".join(missing)}): '
            f'pip install "jurist[{extra}]"')


def require_extra(extra: str, what: str) -> None:
    """Raise :class:`~jurist.errors.MissingExtra` naming ``extra`` when one of its
    packages is missing."""
    message = missing_extra(extra, what)
    if message is not None:
        raise MissingExtra(message, extra=extra)
