"""Cost of the checklist's batch evaluator against one judge call per point.

A session of 30 user messages over a checklist of 20 points; the learner
recalls one new point every second message (15 of the 20 by the end). Both
strategies run the real :class:`jurist.checklist.ChecklistEvaluator` against
an in-process scripted judge (``jurist.models.scripted``), with the same
template and the same 10-message excerpt:

  batch       one call per user message with every still-unchecked point
  per point   one call per user message for each still-unchecked point
              (the same template with a single point)

Calls are counted from the requests the scripted judge received; prompt
tokens are estimated from those requests as characters / 4 (the scripted
adapter's own estimate; real tokenisers differ, the ratio hardly does).

    python benchmarks/checklist_cost.py
    python benchmarks/checklist_cost.py --points 20 --messages 30
"""

from __future__ import annotations

import argparse
import asyncio
import json

from jurist.checklist import ChecklistEvaluator, ChecklistMessage, ChecklistPoint
from jurist.config import Settings
from jurist.models.base import ChatRequest
from jurist.models.scripted import script

TOPICS = ["receptor binding", "half-life", "tolerance", "withdrawal", "absorption", "metabolism in the liver",
          "effect on heart rate", "effect on sleep", "diuretic effect", "genetic variation", "pregnancy limits",
          "interaction with alcohol", "effect on athletic performance", "dose in coffee", "dose in tea",
          "energy drinks", "toxicity threshold", "effect on anxiety", "effect on memory", "children and caffeine"]


def make_points(n: int) -> list[ChecklistPoint]:
    return [ChecklistPoint(id=f"p{i + 1:02d}", text=f"The learner explains {TOPICS[i % len(TOPICS)]}: the key fact, "
                                                      "the mechanism behind it and one practical consequence.")
            for i in range(n)]


def prompt_tokens(requests: list[ChatRequest]) -> int:
    return sum(sum(len(m.text) for m in r.messages) // 4 for r in requests)


def judge_reply(schedule: dict[int, str], turn: list[int]):
    """Recall the point scheduled for the current message, if it was asked about."""

    def reply(request: ChatRequest) -> str:
        pid = schedule.get(turn[0])
        asked = pid is not None and f'id="{pid}"' in "\n".join(m.text for m in request.messages)
        points = [{"id": pid, "confidence": 0.9, "observation": "explained it"}] if asked else []
        return json.dumps({"recalledPoints": points, "feedback": f"Point {pid} was recalled." if asked else ""})

    return reply


async def run(strategy: str, n_points: int, n_messages: int) -> tuple[int, int]:
    points = make_points(n_points)
    schedule = {m: points[m // 2 - 1].id for m in range(2, n_messages + 1, 2) if m // 2 - 1 < n_points}
    turn = [0]
    adapter = script(f"cost-{strategy}", default=judge_reply(schedule, turn))
    evaluator = ChecklistEvaluator(f"scripted/cost-{strategy}", settings=Settings.load(cache=False))
    messages: list[ChecklistMessage] = []
    recalled: set[str] = set()
    for m in range(1, n_messages + 1):
        turn[0] = m
        messages.append(ChecklistMessage(role="user", content=f"Message {m}: here is what I remember. " * 5))
        unchecked = [p for p in points if p.id not in recalled]
        if strategy == "batch":
            results = [await evaluator.evaluate_batch(unchecked, messages, "recall")]
        else:
            results = [await evaluator.evaluate_batch([p], messages, "recall") for p in unchecked]
        for r in results:
            recalled.update(r.recalled_point_ids)
        messages.append(ChecklistMessage(role="assistant", content="Good. What else do you remember about it? " * 3))
    assert recalled == set(schedule.values()), "both strategies must find the same points"
    return len(adapter.requests), prompt_tokens(adapter.requests)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20)
    ap.add_argument("--messages", type=int, default=30)
    args = ap.parse_args()
    b_calls, b_tokens = await run("batch", args.points, args.messages)
    p_calls, p_tokens = await run("per-point", args.points, args.messages)
    print(f"session: {args.points} points, {args.messages} user messages, one new point recalled every 2nd message")
    print(f"{'':<12}{'judge calls':>12}{'prompt tokens':>15}")
    print(f"{'batch':<12}{b_calls:>12}{b_tokens:>15}")
    print(f"{'per point':<12}{p_calls:>12}{p_tokens:>15}")
    print(f"calls ratio:  {b_calls / p_calls:.3f} (target <= 0.100)")
    print(f"tokens ratio: {b_tokens / p_tokens:.3f} (target <= 0.333)")


if __name__ == "__main__":
    asyncio.run(main())
