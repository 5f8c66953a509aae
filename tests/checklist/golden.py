"""The checklist's golden file: a tutor session over the socket, and what it stored.

Three learner messages through ``/tutor/ws`` (scripted judge and tutor, progress
shown): one recalls a point, one gets a judge reply that never parses (the
turn's status is ``evaluation_failed``), one recalls the rest. The file holds
the socket's frames, each turn's stored payload as ``read_payload`` gives it,
its ``checklist_evaluations`` row, the API's trace of the turn
(``/api/evaluation/sessions/{id}``), and a batch evaluation skipped for want of
points. Ids are renamed ``<id-N>`` in order of appearance; see ``tests/golden.py``
for the other volatile fields. Regenerate with the code as it was before a
change: ``PYTHONPATH=OLD/src python -m tests.checklist.golden --write`` (OLD: a
checkout of the earlier code).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

from tests.golden import dumps, isolated_env

GOLDEN = Path(__file__).parent / "data" / "golden_checklist.json"
POINTS = {"title": "Caffeine", "points": [{"id": "adenosine", "text": "Caffeine blocks adenosine receptors."},
                                          {"id": "half_life", "text": "Its half-life is about five hours."},
                                          {"id": "tolerance", "text": "Regular use builds tolerance."}]}
_ID = re.compile(r"^[0-9a-f]{32}$")


def _reply(*recalled: tuple[str, float], feedback: str) -> str:
    return json.dumps({"recalledPoints": [{"id": i, "confidence": c, "observation": f"said {i}"}
                                          for i, c in recalled], "feedback": feedback})


def _rename_ids(data: Any, seen: dict[str, str]) -> Any:
    if isinstance(data, dict):
        return {k: _rename_ids(v, seen) for k, v in data.items()}
    if isinstance(data, list):
        return [_rename_ids(v, seen) for v in data]
    if isinstance(data, str) and _ID.match(data):
        return seen.setdefault(data, f"<id-{len(seen) + 1}>")
    return data


def _dump(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return obj.model_dump(mode="json")


def produce() -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from jurist.checklist import ChecklistEvaluator
    from jurist.config import Settings
    from jurist.models import script
    from jurist.payloads import read_payload
    from jurist.server.app import create_app
    from jurist.store import Store

    with isolated_env() as tmp:
        folder = tmp / "checklists"
        folder.mkdir()
        (folder / "caffeine.json").write_text(json.dumps(POINTS))
        store = Store(f"sqlite:///{tmp}/golden.db")
        try:
            script("judge", _reply(("adenosine", 0.9), feedback="Recalled adenosine."),
                   "not json at all", "still not json",
                   _reply(("half_life", 0.7), ("tolerance", 0.55), ("made_up", 0.9), feedback="The rest."))
            script("tutor", "Right. How long does it last?", "Go on.", "That is all of it.")
            app = create_app(Settings(tutor_progress=True), store, tutor_model="scripted/tutor",
                             judge_model="scripted/judge", checklist_dirs=[folder])
            frames: list[Any] = []
            with TestClient(app, base_url="http://localhost") as client:
                with client.websocket_connect("ws://localhost/tutor/ws?points=caffeine&learner=ada") as ws:
                    frames += [ws.receive_json() for _ in range(3)]
                    for text in ("It blocks adenosine.", "Hmm.", "Five hours; tolerance builds."):
                        ws.send_json({"type": "message", "content": text})
                        frames += [ws.receive_json(), ws.receive_json()]
                session_id = frames[0]["session_id"]
                rows = asyncio.run(store.checklist_evaluations(session_id))
                turns = []
                for stored in rows:
                    row = stored if isinstance(stored, dict) else stored.model_dump(mode="json")
                    trace = client.get(f"/api/evaluation/sessions/{row['id']}").json()
                    with sqlite3.connect(tmp / "golden.db") as db:
                        [(raw,)] = db.execute("SELECT payload FROM evaluations WHERE id = ?", (row["id"],)).fetchall()
                    turns.append({"row": json.loads(json.dumps(row, default=str)),
                                  "payload": read_payload("checklist", trace["evaluation"]["payload"]).to_json(),
                                  "trace": trace["evaluation"], "stored": json.loads(raw),
                                  "stored_as_json_dumps": raw == json.dumps(json.loads(raw))})
            skipped = asyncio.run(ChecklistEvaluator("scripted/judge", settings=Settings()).evaluate_batch([], []))
        finally:
            store.close()
    files = {"frames": frames, "turns": turns, "skipped": _dump(skipped)}
    produced: dict[str, Any] = json.loads(dumps(_rename_ids(files, {})))
    return produced


if __name__ == "__main__":
    if "--write" in sys.argv:
        GOLDEN.write_text(json.dumps(produce(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    else:
        print(json.dumps(produce(), indent=2, ensure_ascii=False))
