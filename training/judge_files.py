"""Writing the local judge's two files, ``judge.safetensors`` (the weights) and ``judge.json``
(the record: temperatures, thresholds, band, figures), for both training scripts.

Each file is written whole under a hidden name beside its target and then renamed into
place (``os.replace``), the weights first and the record last, so a kill while writing leaves
the files as they were. Only a kill in the instant between the two renames could pair the
new weights with the old record. Numpy and the standard library only: the training
environment does not install jurist's dependencies."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Callable

WEIGHTS = "judge.safetensors"
RECORD = "judge.json"


def _hidden(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def write_judge(folder: Path, write_weights: Callable[[Path], None], record: dict[str, Any]) -> None:
    """Write the weights (``write_weights(path)`` writes them to ``path``) and the record
    into ``folder``, each renamed into place once whole."""
    folder.mkdir(parents=True, exist_ok=True)
    weights, meta = _hidden(folder / WEIGHTS), _hidden(folder / RECORD)
    try:
        write_weights(weights)
        weights.chmod(0o644)
        meta.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(weights, folder / WEIGHTS)
        os.replace(meta, folder / RECORD)
    finally:
        weights.unlink(missing_ok=True)
        meta.unlink(missing_ok=True)
