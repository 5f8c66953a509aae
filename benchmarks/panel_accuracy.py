"""Accuracy of a judge panel against a single judge, in a simulation without network.

Items have a known true quality per dimension (the answer-evaluation dimensions
and weights of the design note) and so a known true overall score and pass/fail
at the pass threshold. Simulated judges answer as in-process scripted models
(``jurist.models.scripted``), so the real ``Panel`` code runs: prompts, parsing,
confidence-weighted aggregation, the escalation triggers and the escalation call.

Each simulated judge call adds to the true scores an error shared by all the
dimensions of that call (a judge misreading the item), a smaller error per
dimension, and the judge's bias. In a share of calls the judge is "confused":
its error is 2.5 times larger. Each call reports a confidence that falls with
the error's spread on that call (about 1 - 2.5 x std), so a confused call says
so. The escalation judge is less noisy and never confused. With
``--correlation r`` the small judges' call errors on an item are correlated
(a share r of their variance is common to all of them: the item misleads every
small model alike); by default they are independent, which favours the panel.

Compared, on the same items:
  single judge              one call scoring all five dimensions (a small model)
  panel, no escalation      the five default roles, one dimension each here
  panel + escalation        the same, escalating to the stronger judge on a trigger
  strong judge alone        the escalation judge on every item (a reference for cost)

    python benchmarks/panel_accuracy.py                 # 400 items, seed 7
    python benchmarks/panel_accuracy.py --items 1000 --seed 1
    python benchmarks/panel_accuracy.py --correlation 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import re
import statistics
from dataclasses import dataclass

from jurist.config import Settings
from jurist.judges.panel import Panel, Role, roles_for
from jurist.research.vocabulary import DEFAULT_ROLES
from jurist.models import script
from jurist.models.base import ChatRequest

WEIGHTS = {"faithfulness": 0.30, "relevance": 0.25, "factual_accuracy": 0.20, "completeness": 0.15, "coherence": 0.10}
THRESHOLD = 0.7
CONFUSED_SHARE = 0.15  # share of a small judge's calls in which its error is 2.5 x larger
PER_DIMENSION_STD = 0.04  # error of each dimension on top of the error shared by the call


@dataclass(frozen=True)
class SimJudge:
    """A simulated judge: error std shared by a call, bias, whether it can be confused."""

    name: str
    std: float
    bias: float
    confusable: bool = True


ROLES = {  # the five default roles, each with its own noise and bias
    "intent_analyst": SimJudge("intent_analyst", 0.12, +0.03),
    "coverage_checker": SimJudge("coverage_checker", 0.10, -0.02),
    "faithfulness_judge": SimJudge("faithfulness_judge", 0.12, +0.04),
    "quality_assessor": SimJudge("quality_assessor", 0.10, +0.05),
    "fact_checker": SimJudge("fact_checker", 0.15, -0.03),
}
SINGLE = SimJudge("single", 0.12, +0.03)  # a typical small model, like the roles on average
STRONG = SimJudge("strong", 0.05, 0.0, confusable=False)

_ITEM = re.compile(r'<text id="answer">\nitem (\d+)\n')


def clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def make_items(n: int, seed: int) -> list[dict[str, float]]:
    rng = random.Random(seed)
    items = []
    for _ in range(n):
        base = rng.uniform(0.35, 1.0)
        items.append({d: clip(base + rng.gauss(0, 0.08)) for d in WEIGHTS})
    return items


def true_overall(item: dict[str, float]) -> float:
    return sum(WEIGHTS[d] * s for d, s in item.items()) / sum(WEIGHTS.values())


def judge_call(
    judge: SimJudge, item: dict[str, float], dims: list[str], seed: str, common: float, correlation: float
) -> tuple[dict[str, float], float]:
    """Scores and confidence of one call; the same call always gives the same answer.
    ``common`` is the item's standard-normal error shared by the small judges."""
    rng = random.Random(seed)
    confused = judge.confusable and rng.random() < CONFUSED_SHARE
    std = judge.std * (2.5 if confused else 1.0)
    r = correlation if judge.confusable else 0.0
    shared = std * (math.sqrt(r) * common + math.sqrt(1 - r) * rng.gauss(0, 1))
    scores = {d: round(clip(item[d] + judge.bias + shared + rng.gauss(0, PER_DIMENSION_STD)), 4) for d in dims}
    confidence = round(clip(1.0 - 2.5 * std + rng.gauss(0, 0.05)), 3)
    return scores, max(confidence, 0.05)


def responder(judge: SimJudge, items: list[dict[str, float]], seed: int, correlation: float, escalation: bool = False):
    """A scripted reply (a callable taking the ChatRequest) for this simulated judge."""

    def reply(request: ChatRequest) -> str:
        index = int(_ITEM.search("\n".join(m.text for m in request.messages)).group(1))
        props = request.response_schema["properties"]
        dims = props["scores"]["required"]
        common = random.Random(f"{seed}:common:{index}").gauss(0, 1)
        scores, confidence = judge_call(
            judge, items[index], dims, f"{seed}:{judge.name}:{index}", common, correlation
        )
        if escalation:
            trust = {r: 0.5 for r in props["trust"]["required"]}
            return json.dumps({"panel_review": "simulated", "trust": trust, "scores": scores, "verdict": "simulated"})
        return json.dumps({"scores": scores, "confidence": confidence, "critique": "simulated"})

    return reply


async def run(n: int, seed: int, correlation: float) -> None:
    items = make_items(n, seed)
    for sim in ROLES.values():
        script(sim.name, default=responder(sim, items, seed, correlation))
    script("single", default=responder(SINGLE, items, seed, correlation))
    script("strong", default=responder(STRONG, items, seed, correlation))  # as a role
    script("escalation", default=responder(STRONG, items, seed, correlation, escalation=True))

    settings = Settings.load(max_retries=0, cache=False)
    dims = list(WEIGHTS)
    roles = roles_for(dims, DEFAULT_ROLES, models={name: f"scripted/{name}" for name in ROLES})
    panels = {
        "single judge": Panel([Role("single", dims, model="scripted/single")], WEIGHTS, settings=settings),
        "panel, no escalation": Panel(roles, WEIGHTS, settings=settings),
        "panel + escalation": Panel(roles, WEIGHTS, settings=settings, escalation_model="scripted/escalation"),
        "strong judge alone": Panel([Role("strong", dims, model="scripted/strong")], WEIGHTS, settings=settings),
    }
    truth = [true_overall(item) for item in items]
    results = {name: [] for name in panels}
    for i in range(n):
        subject = {"user_query": f"question {i}", "answer": f"item {i}"}
        for name, panel in panels.items():
            results[name].append(await panel.evaluate(subject, task="Judge the answer to the user's query."))

    passes = sum(t >= THRESHOLD for t in truth)
    print(f"items:            {n} (seed {seed}), pass threshold {THRESHOLD:g}, truly passing {passes / n:.1%}, "
          f"small judges' error correlation {correlation:g}")
    print(f"{'':26}{'pass/fail agree':>16}{'MAE overall':>13}{'calls/item':>12}")
    summary = {}
    for name, rs in results.items():
        assert all(r.status == "ok" for r in rs)
        agree = sum((r.passed) == (t >= THRESHOLD) for r, t in zip(rs, truth)) / n
        mae = statistics.fmean(abs(r.overall - t) for r, t in zip(rs, truth))
        calls = statistics.fmean(len(r.role_results) + (1 if r.escalation else 0) for r in rs)
        summary[name] = (agree, mae)
        print(f"{name:26}{agree:>16.1%}{mae:>13.3f}{calls:>12.2f}")
    escalated = [r for r in results["panel + escalation"] if r.escalation is not None]
    counts = {t: sum(t in r.escalation.triggers for r in escalated) for t in ("low_confidence", "disagreement", "borderline")}
    print(f"escalated:        {len(escalated) / n:.1%} of items "
          f"(low_confidence {counts['low_confidence'] / n:.1%}, disagreement {counts['disagreement'] / n:.1%}, "
          f"borderline {counts['borderline'] / n:.1%}; triggers may overlap)")
    (a1, m1), (a2, m2), (a3, m3) = summary["single judge"], summary["panel, no escalation"], summary["panel + escalation"]
    print(f"panel vs single:                 agreement {100 * (a2 - a1):+.1f} points, MAE {m2 - m1:+.3f}")
    print(f"panel + escalation vs single:    agreement {100 * (a3 - a1):+.1f} points, MAE {m3 - m1:+.3f}")
    for panel in panels.values():
        await panel.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--correlation", type=float, default=0.0, help="0..1, see above")
    args = parser.parse_args()
    if not 0.0 <= args.correlation <= 1.0:
        parser.error("--correlation must be between 0 and 1")
    asyncio.run(run(args.items, args.seed, args.correlation))


if __name__ == "__main__":
    main()
