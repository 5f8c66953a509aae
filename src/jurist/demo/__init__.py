"""`jurist demo`'s offline runs of the capabilities on the bundled examples.

One module per capability (:mod:`jurist.demo.research`,
:mod:`jurist.demo.checklist`, :mod:`jurist.demo.gate`); the rubric part is
the batch the command runs itself. The capabilities never import this package.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def examples_dir() -> Path:
    """The examples shipped with jurist (``examples/``: rubrics, sessions, research, checklists, gate)."""
    return Path(str(files("jurist") / "examples"))
