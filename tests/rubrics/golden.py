"""The rubric files as written (result.json, summary.json, the stored payload and the API's
answer): produced on the scripted provider, compared with ``data/golden/rubrics.json``
(see :mod:`tests.golden`). ``python -m tests.rubrics.golden --write`` writes that file."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from tests.golden import dumps, isolated_env, read_tree, text

GOLDEN = Path(__file__).parent / "data" / "golden" / "rubrics.json"
RUBRICS = {
    "version": "golden-1",
    "scale": [1, 5],
    "rubrics": [
        {"id": "a", "name": "Accuracy", "scoring_criteria": "5: correct; 1: wrong", "weight": 1},
        {"id": "b", "name": "Brevity", "scoring_criteria": "5: short; 1: rambling", "weight": 3},
        {"id": "c", "name": "Checklist", "description": "the answer's parts",
         "items": [{"id": "greets", "text": "The assistant greets the user", "points": 1},
                   {"id": "answers", "text": "The assistant answers the question", "points": 2}]},
    ],
}


def _reply(request: Any) -> str:
    prompt = text(request.messages)
    n = int(prompt.split("question ")[1][0])
    if "greets" in prompt:  # the item rubric
        return json.dumps({"items": [{"id": "greets", "met": n != 1, "reasoning": "says hello"},
                                     {"id": "answers", "met": True, "reasoning": "answers it"}]})
    if "Brevity" in prompt:
        return "SCORE: 9\nREASONING: off the scale" if n == 2 else f"SCORE: {2 + n}\nREASONING: brief {n}"
    return json.dumps({"score": 3 + n % 2, "reasoning": f"accurate {n}"})


async def _produce(tmp: Path) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from jurist.config import Settings
    from jurist.models import script
    from jurist.rubrics import evaluate_batch
    from jurist.server import create_app
    from jurist.store import Store

    sessions = tmp / "sessions"
    sessions.mkdir()
    for n in range(3):
        (sessions / f"s{n}.jsonl").write_text(
            json.dumps({"role": "user", "content": f"question {n}: what is {n} + {n}?"}) + "\n"
            + json.dumps({"role": "assistant", "content": f"Hello. {n} + {n} = {2 * n}."}) + "\n")
    (tmp / "rubrics.json").write_text(json.dumps(RUBRICS))
    script("golden", default=_reply)
    settings = Settings.load(max_retries=0)
    store = Store(f"sqlite:///{tmp}/golden.db")
    try:
        await evaluate_batch(tmp / "rubrics.json", sessions, tmp / "out", parallel=1, judge="scripted/golden",
                             settings=settings, store=store)
        files = {f"out/{name}": data for name, data in read_tree(tmp / "out").items()}
        trace_id = files["out/s2_result.json"]["trace_id"]
        files["stored/s2.payload"] = store.evaluation(trace_id, kind="rubric").payload
        found = TestClient(create_app(settings, store=store), base_url="http://localhost").get(
            f"/api/evaluation/sessions/{trace_id}").json()
        files["api/s2.payload"] = found["evaluation"]["payload"]
        files["api/s2.scores"] = found["scores"]
    finally:
        store.close()
    return files


def produce() -> dict[str, Any]:
    """Every file of the golden rubric batch, parsed (not normalised)."""
    with isolated_env() as tmp:
        return asyncio.run(_produce(tmp))


if __name__ == "__main__":
    out = dumps(produce())
    if "--write" in sys.argv:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(out, encoding="utf-8")
    else:
        sys.stdout.write(out)
