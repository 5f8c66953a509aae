"""Gate latency: time to `done` and the latency the gate adds, per strategy.

    python benchmarks/gate_latency.py [--generation 2.0] [--judge 1.0] [--runs 3]

Generation is a function streaming 80 words over ``--generation`` seconds;
the judge is the scripted model ``scripted/bench-judge`` with a ``--judge``
second delay, called through the Model wrapper (limiter, record), cache off.
"First text" is when the user sees the first answer text.
"Gate adds" is the time to `done` minus the time spent generating. The last
row is the gate with feedback off (the default): `done` first, the evaluation
after it. Printed figures are medians over ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from typing import Any, AsyncIterator

from jurist.config import Settings
from jurist.gate import Gate, GateConfig
from jurist.models import script
from jurist.models.base import ChatRequest

GOOD = json.dumps({"quality_score": 0.9, "confidence_score": 0.9, "issues": [], "improvement_hint": None})
BAD = json.dumps({"quality_score": 0.2, "confidence_score": 0.9, "issues": ["too vague"],
                  "improvement_hint": "Be specific."})


def verdict(request: ChatRequest) -> str:
    """Pass an answer made of "final" words, fail one made of "draft" words."""
    prompt = request.messages[-1].text
    return GOOD if "final" in prompt.split("<response>")[-1] else BAD


def generator(seconds: float, needs_regeneration: bool, spent: list[float]) -> Any:
    async def generate(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        first = not any("Feedback:" in str(m.get("content")) for m in messages)
        word = "draft" if (first and needs_regeneration) else "final"
        started = time.monotonic()
        for i in range(80):
            await asyncio.sleep(seconds / 80)
            yield f"{word}{i} "
        spent.append(time.monotonic() - started)
    return generate


async def once(strategy: str, needs_regeneration: bool, gen_s: float,
               settings: Settings, feedback: bool = True) -> tuple[float, float, int, float]:
    gate = Gate(GateConfig(strategy=strategy, evaluate_feedback_enabled=feedback), settings=settings,
                judge="scripted/bench-judge")
    spent: list[float] = []
    started = time.monotonic()
    result, first_text, total = None, 0.0, 0.0
    async for ev in gate.stream([{"role": "user", "content": "Explain the plan."}],
                                generator(gen_s, needs_regeneration, spent)):
        if ev.type == "delta" and not first_text:
            first_text = time.monotonic() - started
        if ev.type == "done":
            result, total = ev.result, time.monotonic() - started
            break  # feedback off: the evaluation goes on after done, aclose waits for it
    await gate.aclose()
    assert result is not None
    return total, total - sum(spent), len(result.attempts), first_text


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--generation", type=float, default=2.0)
    parser.add_argument("--judge", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        settings = Settings.load(home=home, cache=False)
        script("bench-judge", default=verdict).delay = args.judge
        print(f"generation {args.generation:g} s (80 streamed words), judge {args.judge:g} s, "
              f"median of {args.runs} runs")
        print(f"{'strategy':<10} {'path':<14} {'attempts':>8} {'time to done':>13} {'gate adds':>10} {'adds %':>7} {'first text':>11}")
        rows = [(strategy, path, regen, True) for path, regen in (("passes", False), ("regenerates", True))
                for strategy in ("blocking", "revision", "parallel")]
        for strategy, path, regen, feedback in rows + [("off", "scored after", False, False)]:
            runs = [await once(strategy if feedback else "blocking", regen, args.generation, settings, feedback)
                    for _ in range(args.runs)]
            total = statistics.median(r[0] for r in runs)
            added = statistics.median(r[1] for r in runs)
            first = statistics.median(r[3] for r in runs)
            gen_total = total - added
            print(f"{strategy:<10} {path:<14} {runs[0][2]:>8} {total:>12.3f}s {added:>9.3f}s "
                  f"{100 * added / gen_total:>6.1f}% {first:>10.3f}s")


if __name__ == "__main__":
    asyncio.run(main())
