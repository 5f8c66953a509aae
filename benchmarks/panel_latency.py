"""Wall time of a five-role panel against a single judge call, over real HTTP.

Starts the scripted OpenAI-protocol server (``python -m jurist.testing.provider_server``)
in its own process with a fixed latency and one reply for every request: scores
of 0.8 for every dimension with confidence 0.9, so no escalation trigger fires
(an escalation model is configured all the same, and the script checks it was
never called). Then times, in one warm process, alternately:

  single judge   a one-role Panel scoring the five answer dimensions in one call
  panel          the five default roles restricted to those dimensions: five calls at once

and prints the medians, the 90th percentiles and the panel's extra wall time.
Target: panel median <= single median + 50 ms.

    python benchmarks/panel_latency.py                      # 200 ms, 20 repetitions
    python benchmarks/panel_latency.py --latency 0.5 --reps 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from jurist.testing.provider_server import spawn

DIMENSIONS = ["faithfulness", "relevance", "factual_accuracy", "completeness", "coherence"]
WEIGHTS = {"faithfulness": 0.30, "relevance": 0.25, "factual_accuracy": 0.20, "completeness": 0.15, "coherence": 0.10}
ALL_DIMENSIONS = ["intent_alignment", "query_coverage", "scope_appropriateness", "context_recall",
                  "context_precision", "source_quality", *DIMENSIONS]
REPLY = json.dumps({"scores": {d: 0.8 for d in ALL_DIMENSIONS}, "confidence": 0.9, "critique": "fine"})


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(base_url: str, latency: float, reps: int, warmup: int) -> None:
    from jurist.config import Settings
    from jurist.judges.panel import Panel, Role, roles_for
    from jurist.research.vocabulary import DEFAULT_ROLES, DIMENSION_DESCRIPTIONS

    settings = Settings.load(
        providers={"bench": {"type": "openai", "base_url": base_url, "api_key": "bench"}},
        max_retries=0, cache=False, timeout=30,
    )
    single = Panel([Role("single", DIMENSIONS)], WEIGHTS, settings=settings, model="bench/small",
                   escalation_model="bench/big", dimension_descriptions=DIMENSION_DESCRIPTIONS)
    panel = Panel(roles_for(DIMENSIONS, DEFAULT_ROLES), WEIGHTS, settings=settings, model="bench/small",
                  escalation_model="bench/big", dimension_descriptions=DIMENSION_DESCRIPTIONS)
    subject = {"user_query": "How do I reset my password?",
               "answer": "Open Settings, choose Security, then Reset password."}
    times: dict[str, list[float]] = {"single": [], "panel": []}
    try:
        for i in range(warmup + reps):
            for name, p in (("single", single), ("panel", panel)):
                started = time.perf_counter()
                result = await p.evaluate(subject, task="Judge the answer.")
                elapsed = (time.perf_counter() - started) * 1000.0
                assert result.status == "ok" and result.escalation is None and not result.triggers, result
                assert all(r.status == "ok" for r in result.role_results)
                if i >= warmup:
                    times[name].append(elapsed)
    finally:
        await single.aclose()
        await panel.aclose()
    s, p = statistics.median(times["single"]), statistics.median(times["panel"])
    print(f"server latency:   {latency * 1000:.0f} ms per call; {reps} repetitions after {warmup} warm-up, alternating")
    print(f"single judge:     median {s:.1f} ms, p90 {pct(times['single'], 0.9):.1f} ms (1 call)")
    print(f"five-role panel:  median {p:.1f} ms, p90 {pct(times['panel'], 0.9):.1f} ms (5 calls at once, no escalation)")
    verdict = "met" if p <= s + 50 else "NOT met"
    print(f"difference:       {p - s:+.1f} ms (target <= +50 ms: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per call at the server")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()
    proc, base_url = spawn(args.latency, REPLY)
    try:
        asyncio.run(run(base_url, args.latency, args.reps, args.warmup))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
