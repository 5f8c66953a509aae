"""The dashboard's calibration page with the shipped labels: how long it takes to render.

    python benchmarks/calibration_page.py [--repeat 15]

In a temporary folder (removed at the end): the twelve labelled sessions
(``examples/sessions`` s1-s5, ``examples/labels/sessions`` s6-s12) are scored
against ``examples/rubrics.json`` by the offline judge ``local/minilm`` into a
fresh SQLite store, and the 72 labels of ``examples/labels/labels.jsonl`` are
posted to ``/api/evaluation/labels`` as a person on the trace pages would. Then
``GET /evaluation/calibration`` is timed in this process (the app under
Starlette's test client): the first request, which computes the calibration,
and ``--repeat`` more, with the labels unchanged; then once more after a label
changes. Median and slowest are printed. Target: under 200 ms.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from jurist.config import Settings
from jurist.rubrics.api import evaluate_batch_sync
from jurist.server import create_app

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def timed(client: TestClient, path: str) -> float:
    start = time.perf_counter()
    r = client.get(path)
    elapsed = (time.perf_counter() - start) * 1000.0
    assert r.status_code == 200 and "calibration" in r.text, r.status_code
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description="Render time of the calibration page with the shipped labels.")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sessions = folder / "sessions"
        sessions.mkdir()
        for source in [*sorted((EXAMPLES / "sessions").glob("*.jsonl")),
                       *sorted((EXAMPLES / "labels" / "sessions").glob("*.jsonl"))]:
            shutil.copy(source, sessions / source.name)
        settings = Settings(database_url=f"sqlite:///{folder / 'jurist.db'}", home=str(folder / "home"))
        evaluate_batch_sync(EXAMPLES / "rubrics.json", sessions, folder / "out", judge="local/minilm",
                            settings=settings)
        labels = [json.loads(line) for line in (EXAMPLES / "labels" / "labels.jsonl").read_text().splitlines()
                  if line.strip()]
        with TestClient(create_app(settings), base_url="http://localhost") as client:
            for label in labels:
                r = client.post("/api/evaluation/labels", json={
                    "item": label["item"], "rubric": label["rubric"], "score": label["label"],
                    "annotator": label["annotator"]})
                assert r.status_code == 201, r.text
            first = timed(client, "/evaluation/calibration")
            again = [timed(client, "/evaluation/calibration") for _ in range(args.repeat)]
            last = labels[-1]
            client.post("/api/evaluation/labels", json={
                "item": last["item"], "rubric": last["rubric"], "score": 6 - last["label"],
                "annotator": last["annotator"]})
            changed = timed(client, "/evaluation/calibration")
    print(f"calibration page, {len(labels)} labels, {len(sessions_of(labels))} sessions "
          f"x {len(rubrics_of(labels))} rubrics (target: under 200 ms)")
    print(f"  first request          {first:8.1f} ms")
    print(f"  again (x{args.repeat:<3})          median {statistics.median(again):8.1f} ms, "
          f"slowest {max(again):8.1f} ms")
    print(f"  after a label changed  {changed:8.1f} ms")
    return 0


def sessions_of(labels: list[dict[str, object]]) -> set[object]:
    return {label["item"] for label in labels}


def rubrics_of(labels: list[dict[str, object]]) -> set[object]:
    return {label["rubric"] for label in labels}


if __name__ == "__main__":
    raise SystemExit(main())
