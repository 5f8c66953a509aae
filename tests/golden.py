"""Golden files: the documented JSON shapes written before a change, compared after it.

The producers in ``tests/rubrics/golden.py`` and ``tests/research/golden.py`` run
jurist on the scripted provider and return every file it wrote (result.json,
summary.json, the research export, the stored payloads and the API's answer)
as JSON data; :func:`normalise` replaces what differs from run to run, and the
tests compare the rest with the files under ``tests/*/data/golden/``, key order
included.

Normalised (the value becomes ``"<volatile>"``; a ``null`` stays ``null``, so
an optional field's presence is still compared):

- ids: ``trace_id``, ``traceId``, ``logId``, ``log_id``, ``queryId``, ``query_id``,
  ``call_id``, ``evaluation_id``, ``details`` (``jurist export <logId>``);
- timestamps: ``evaluated_at``, ``timestamp``, ``created_at``;
- latencies and durations: ``latency_ms``, ``latency``.

The export folder is named by the logId: its files are keyed by their path
under that folder. Regenerate the files with the code as it was before a
change, e.g. ``PYTHONPATH=OLD/src python -m tests.rubrics.golden --write`` (OLD: a checkout
of the earlier code)
(and ``tests.research.golden``).
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

VOLATILE = frozenset({
    "trace_id", "traceId", "logId", "log_id", "queryId", "query_id", "call_id", "evaluation_id", "details",
    "evaluated_at", "timestamp", "created_at",
    "latency_ms", "latency",
})
MARK = "<volatile>"


def normalise(data: Any) -> Any:
    """``data`` with the volatile fields' values replaced by ``"<volatile>"``."""
    if isinstance(data, dict):
        return {k: (MARK if k in VOLATILE and v is not None else normalise(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [normalise(v) for v in data]
    return data


def read_tree(folder: Path) -> dict[str, Any]:
    """Every JSON file under ``folder``, by its relative path, parsed."""
    return {p.relative_to(folder).as_posix(): json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(folder.rglob("*.json"))}


def text(messages: Any) -> str:
    """A request's message texts (dict messages or message objects)."""
    out = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else getattr(m, "content", None)
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "") if isinstance(p, dict) else getattr(p, "text", ""))
                               for p in content)
        out.append(str(content or ""))
    return "\n\n".join(out)


def dumps(files: dict[str, Any]) -> str:
    return json.dumps(normalise(files), indent=2, ensure_ascii=False) + "\n"


def compare(files: dict[str, Any], golden: Path) -> None:
    """Assert ``files`` (normalised) equal the golden file, key order included."""
    want = json.loads(golden.read_text(encoding="utf-8"))
    got = json.loads(dumps(files))
    assert list(got) == list(want), f"files differ: {sorted(set(got) ^ set(want))}"
    for name in want:
        assert json.dumps(got[name], indent=1) == json.dumps(want[name], indent=1), f"{name} differs from {golden}"


@contextmanager
def isolated_env() -> Iterator[Path]:
    """A temporary working folder and jurist home, no provider settings (as the tests' fixture)."""
    saved = dict(os.environ)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="jurist-golden-") as tmp:
        for var in ("JURIST_JUDGE", "JURIST_VISUAL_EVALUATOR", "JURIST_DATABASE_URL", "JURIST_CONFIG",
                    "JURIST_CACHE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
            os.environ.pop(var, None)
        os.environ["JURIST_HOME"] = f"{tmp}/.jurist"
        os.environ["XDG_DATA_HOME"] = f"{tmp}/xdg"
        os.chdir(tmp)
        try:
            yield Path(tmp)
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)
