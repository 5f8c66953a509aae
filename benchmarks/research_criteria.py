"""The research design note's three success criteria, measured.

The note (research pipeline evaluation: plan, retrieval and answer stages, a critic loop on
the plan) ends with numeric targets. This script prints each figure, its target and the
judge that produced it:

1. Intent misalignment caught (target > 80%). Every plan of
   ``benchmarks/data/research_plans.jsonl`` (queries, each with an aligned plan and plans
   misaligned in the note's ways: wrong time focus, missing aspect, wrong entity, too broad,
   too narrow; see ``benchmarks/data/README.md``) goes through jurist's default plan
   evaluation as the first plan of a query. Printed: the share of misaligned plans that
   fail the plan stage, per kind, and the share of aligned plans that pass. Judged by
   (a) the offline judge ``local/minilm`` and (b) the LLM judge given with ``--judge`` (or
   the configured ``judge`` of ``jurist.yaml`` / ``JURIST_JUDGE``), on panels of that model
   with the same model as plan critic; without one it says so and measures nothing.
2. Average iteration count for passing queries (target < 2). The same runs go on through
   the plan loop with the demo's planner (``jurist.demo.research.KeywordPipeline``), which
   adds the queries the critic asks for (``targeted_fix``) or plans one query per question
   sentence (``full_regeneration``): the mean number of plan attempts of the runs whose plan
   passed.
3. Time added (target: < 30 s on average). A full three-stage evaluation
   (``ResearchEvaluation.run``: plan loop, retrieval, answer) on panels, critic and escalation
   served by jurist's scripted OpenAI-compatible server (``ProviderServer``) answering each
   call after ``--role-latency`` seconds, with a scripted pipeline whose planner and
   synthesiser take ``--generation-latency`` seconds each (``asyncio.sleep``: the pipeline's
   generation is its own code) and whose search takes ``--search-latency``. The added time
   is the wall time of the evaluated run minus that of the bare pipeline (plan, search,
   answer once). The scripted server decides which path each run takes (it stands in for
   the judges' latency, not for their judgement): the plan passing at attempt 1, 2 or 3,
   and the worst path (every attempt fails, the meta-review, an escalation on every panel,
   the answer regenerated and judged again). The average weights the 1-, 2- and 3-attempt
   paths by how often figure 2's offline runs took that many attempts.

    python benchmarks/research_criteria.py                      # 80 plans, 1.5 s per role call, 3 s per generation
    python benchmarks/research_criteria.py --judge openai/gpt-4o-mini
    python benchmarks/research_criteria.py --quick              # 5 queries' plans, each path timed once
    python benchmarks/research_criteria.py --quick --role-latency 0.05 --generation-latency 0.1 --search-latency 0.02
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from jurist.config import Settings
from jurist.demo.research import DemoPlan, KeywordPipeline, judged_by
from jurist.errors import InputError
from jurist.jsonfiles import jsonl_objects, line_problem
from jurist.models.registry import LOCAL_JUDGE
from jurist.research.config import ResearchConfig
from jurist.research.evaluation import ResearchEvaluation
from jurist.research.records import IterationDecision, PlanEvaluation
from jurist.runtime import Runtime
from jurist.testing.provider_server import ProviderServer, Reply

DATA = Path(__file__).resolve().parent / "data" / "research_plans.jsonl"
KINDS = ("wrong_time_focus", "missing_aspect", "wrong_entity", "too_broad", "too_narrow")
Kind = Literal["aligned", "wrong_time_focus", "missing_aspect", "wrong_entity", "too_broad", "too_narrow"]

CAUGHT_TARGET = 0.80  # "Plan evaluation catches > 80% of intent misalignment issues"
ITERATIONS_TARGET = 2.0  # "Average iteration count < 2 for passing queries"
ADDED_TARGET_S = 30.0  # "Evaluation adds < 30 seconds to average query time"
REALISTIC = (1.5, 3.0)  # seconds per role call, per generation: the latencies the 30 s is judged at
QUICK_QUERIES = 5


# --- the labelled plans ----------------------------------------------------------------

class PlanItem(BaseModel):
    """One line of the data file: a query, a plan for it, and whether the plan is aligned."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    query: str
    plan: DemoPlan  # the shape the plan stage reads: objective and search_queries
    label: Literal["aligned", "misaligned"]
    kind: Kind

    @model_validator(mode="after")
    def _kind_matches_label(self) -> "PlanItem":
        if (self.label == "aligned") != (self.kind == "aligned"):
            raise ValueError(f"label {self.label!r} does not go with kind {self.kind!r} "
                             "(an aligned plan has kind 'aligned', a misaligned one one of " + ", ".join(KINDS) + ")")
        return self


def load_items(path: Path = DATA) -> list[PlanItem]:
    """The labelled plans; a malformed line, an unknown field or a repeated id is an InputError."""
    items: list[PlanItem] = []
    seen: dict[str, int] = {}
    text = path.read_text(encoding="utf-8")
    for n, obj in jsonl_objects(text.splitlines(), str(path)):
        try:
            item = PlanItem.model_validate(obj)
        except ValidationError as exc:
            raise InputError(line_problem(exc, PlanItem, "a labelled plan"), file=str(path), line=n) from None
        if item.id in seen:
            raise InputError(f"id {item.id!r} repeats line {seen[item.id]}", file=str(path), line=n)
        seen[item.id] = n
        items.append(item)
    return items


def first_queries(items: list[PlanItem], n: int) -> list[PlanItem]:
    """The plans of the first ``n`` queries (in file order)."""
    queries = list(dict.fromkeys(i.query for i in items))[:n]
    return [i for i in items if i.query in queries]


# --- figures 1 and 2: each plan through the plan loop ------------------------------------

@dataclass(frozen=True)
class PlanRun:
    item: PlanItem
    first_passed: bool | None  # None: the first attempt's evaluation was skipped
    passed: bool
    attempts: int
    skip_reason: str | None


def share(part: int, whole: int) -> str:
    return f"{part}/{whole} = {part / whole:.1%}" if whole else "0/0 (none)"


async def run_plans(items: list[PlanItem], make: Callable[[Runtime], ResearchEvaluation],
                    runtime: Runtime) -> list[PlanRun]:
    """Each plan as the first plan of its query, through the default plan loop with the demo's planner."""
    runs: list[PlanRun] = []
    for item in items:
        pipeline = KeywordPipeline([], item.plan)
        ev = make(runtime)
        async with ev:
            out = await ev.evaluate_plan(item.query, pipeline.planner)
        runs.append(plan_run(item, out.evaluation))
        print(".", end="", flush=True)
    print()
    return runs


def plan_run(item: PlanItem, record: PlanEvaluation) -> PlanRun:
    first = record.attempts[0] if record.attempts else None
    first_passed = None if first is None or first.evaluation_skipped else first.passed
    return PlanRun(item, first_passed, bool(record.passed), record.total_iterations,
                   record.skip_reason or (first.skip_reason if first else None))


def report_plans(runs: list[PlanRun], judge: str) -> Counter[int]:
    """Print figures 1 and 2 for one judge; return how many runs took each number of plan attempts."""
    scored = [r for r in runs if r.first_passed is not None]
    skipped = len(runs) - len(scored)
    bad = [r for r in scored if r.item.label == "misaligned"]
    good = [r for r in scored if r.item.label == "aligned"]
    caught = sum(1 for r in bad if not r.first_passed)
    print(f"\n1. Intent misalignment caught (judge: {judge})")
    if skipped:
        reasons = Counter(r.skip_reason for r in runs if r.first_passed is None)
        print(f"   skipped:          {skipped} plan(s) not evaluated: " + "; ".join(f"{k} (x{v})" for k, v in reasons.items()))
    caught_share = caught / len(bad) if bad else None
    verdict = "n/a" if caught_share is None else ("met" if caught_share > CAUGHT_TARGET else "MISSES")
    print(f"   misaligned plans failing the plan stage: {share(caught, len(bad))} (target > 80%: {verdict})")
    for kind in KINDS:
        of_kind = [r for r in bad if r.item.kind == kind]
        print(f"     {kind:<18} {share(sum(1 for r in of_kind if not r.first_passed), len(of_kind))}")
    print(f"   aligned plans passing the plan stage:    {share(sum(1 for r in good if r.first_passed), len(good))}")
    passing = [r for r in runs if r.passed]
    attempts: Counter[int] = Counter(r.attempts for r in runs if r.attempts)
    mean = statistics.mean(r.attempts for r in passing) if passing else None
    print(f"\n2. Iterations for passing queries (judge: {judge}; planner: the demo's, fixing what the critic names)")
    print(f"   runs whose plan passed: {share(len(passing), len(runs))}; "
          f"plan attempts per run: " + ", ".join(f"{k}: {v}" for k, v in sorted(attempts.items())))
    if mean is None:
        print("   average attempts of passing runs: none passed")
    else:
        print(f"   average attempts of passing runs: {mean:.2f} (target < 2: {'met' if mean < ITERATIONS_TARGET else 'MISSES'})")
        by_label = {label: [r.attempts for r in passing if r.item.label == label] for label in ("aligned", "misaligned")}
        print("   " + "; ".join(f"starting from {k} plans {statistics.mean(v):.2f} ({len(v)} runs)"
                               for k, v in by_label.items() if v))
    return attempts


# --- figure 3: the time a three-stage evaluation adds ----------------------------------

_DRAFT = re.compile(r"\(draft (\d+)\)")
_ANSWER = re.compile(r"\(answer (\d+)\)")
_ROLE = re.compile(r"You are the (\w+) on a panel")


@dataclass(frozen=True)
class Scenario:
    """How the scripted judges answer one run."""

    name: str
    failing_plans: int  # plan attempts (drafts) scored below the pass mark
    escalate: bool = False  # the roles disagree: every panel escalates
    regenerate: bool = False  # the first answer scores below 0.5


PATHS = [
    Scenario("plan passes at attempt 1", 0),
    Scenario("plan passes at attempt 2", 1),
    Scenario("3 attempts, none passes (meta-review)", 3),
    Scenario("worst: 3 attempts + meta-review, every panel escalates, answer regenerated", 3, escalate=True,
             regenerate=True),
]


def _schema(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    fmt = body.get("response_format")
    schema = fmt.get("json_schema", {}) if isinstance(fmt, dict) else {}
    return str(schema.get("name", "")), dict(schema.get("schema", {}).get("properties", {}))


PLAN_DIMENSIONS = frozenset({"intent_alignment", "query_coverage", "scope_appropriateness"})
ANSWER_DIMENSIONS = frozenset({"faithfulness", "relevance", "factual_accuracy", "completeness", "coherence"})
DISSENTER = "coverage_checker"  # on every stage's panel: on an escalating path it disagrees with the others


def responder(scenario: Scenario, latency: float) -> Callable[[dict[str, Any]], Reply]:
    """The scripted judges of one path (``scenario``), every reply after ``latency`` seconds: plan drafts up to
    ``failing_plans`` and (with ``regenerate``) the first answer score 0.3, the rest 0.9."""

    def reply(body: dict[str, Any]) -> Reply:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        purpose, props = _schema(body)
        dims = list(props.get("scores", {}).get("properties", {}))
        low = False
        if PLAN_DIMENSIONS & set(dims):
            drafts = _DRAFT.findall(text)
            low = bool(drafts) and int(drafts[-1]) <= scenario.failing_plans
        elif ANSWER_DIMENSIONS & set(dims):
            answers = _ANSWER.findall(text)
            low = scenario.regenerate and bool(answers) and int(answers[-1]) == 1
        score = 0.3 if low else 0.9
        if purpose in ("plan_critic", "plan_meta_review"):
            out: dict[str, Any] = {
                "passed": not low, "scores": {d: score for d in dims}, "failure_type": "intent_misalignment",
                "critique": "The plan misses the query's time focus.", "recommendation": "targeted_fix",
                "specific_issues": [{"issue": "no recency in the queries", "fix": "add a query about 2024"}]}
        elif purpose == "panel_escalation":
            roles = list(props.get("trust", {}).get("properties", {}))
            out = {"panel_review": "The panel disagrees; the majority is right.", "trust": {r: 0.8 for r in roles},
                   "scores": {d: score for d in dims}, "verdict": "failed" if low else "passed"}
        else:  # a panel role
            role = _ROLE.search(text)
            if scenario.escalate and role and role.group(1) == DISSENTER:
                score = round(1.0 - score, 2)  # 0.4 or more from the others: the disagreement trigger (> 0.3)
            out = {"scores": {d: score for d in dims}, "confidence": 0.9, "critique": "scripted"}
        return Reply(text=json.dumps(out), delay=latency)

    return reply


class ScriptedPipeline:
    """Planner, search and synthesiser that only take time; drafts and answers numbered for the judges."""

    def __init__(self, generation: float, search_s: float) -> None:
        self.generation, self.search_s = generation, search_s
        self.drafts = self.answers = 0

    async def planner(self, query: str, feedback: IterationDecision | None, mode: str | None) -> dict[str, object]:
        await asyncio.sleep(self.generation)
        self.drafts += 1
        return {"objective": f"{query} (draft {self.drafts})", "search_queries": [query]}

    async def search(self, query: str, plan: Any) -> list[dict[str, object]]:
        await asyncio.sleep(self.search_s)
        return [{"id": "s1", "title": "A source", "content": "What the source says about the query."}]

    async def synthesiser(self, query: str, sources: list[Any], feedback: str | None) -> str:
        await asyncio.sleep(self.generation)
        self.answers += 1
        return f"The answer to the query (answer {self.answers})."


QUERY = "What are the latest breakthroughs in quantum error correction?"


async def bare_pipeline(generation: float, search_s: float) -> float:
    p = ScriptedPipeline(generation, search_s)
    started = time.perf_counter()
    plan = await p.planner(QUERY, None, None)
    sources = await p.search(QUERY, plan)
    await p.synthesiser(QUERY, sources, None)
    return time.perf_counter() - started


async def evaluated_run(scenario: Scenario, server: ProviderServer, settings: Settings, role_s: float,
                        generation: float, search_s: float) -> tuple[float, str]:
    """Wall time of one evaluated run taking ``scenario``'s path, and what the record says it did."""
    server.default = responder(scenario, role_s)
    p = ScriptedPipeline(generation, search_s)
    started = time.perf_counter()
    async with ResearchEvaluation(judged_by(ResearchConfig(), "bench/judge"), settings=settings) as ev:
        result = await ev.run(QUERY, p.planner, p.search, p.synthesiser)
    wall = time.perf_counter() - started
    rec = result.record
    plan, ans = rec.plan_evaluation, rec.answer_evaluation
    attempts = [*(plan.attempts if plan else []), *(ans.attempts if ans else [])]
    escalations = sum(1 for a in attempts if a.escalation) + bool(rec.retrieval_evaluation
                                                                 and rec.retrieval_evaluation.escalation)
    did = (f"{len(plan.attempts) if plan else 0} plan attempt(s), passed {plan.passed if plan else None}, "
           f"meta-review {'yes' if plan and plan.meta_review else 'no'}, {escalations} escalation(s), "
           f"answer regenerated {'yes' if ans and ans.regenerated else 'no'}, skipped {rec.evaluation_skipped}")
    return wall, did


async def time_paths(role_s: float, generation: float, search_s: float, reps: int) -> dict[str, float]:
    """The added seconds per path (mean over ``reps``), printed as measured."""
    added: dict[str, float] = {}
    with ProviderServer() as server, tempfile.TemporaryDirectory() as tmp:
        settings = Settings.load(database_url=f"sqlite:///{tmp}/research.db",
                                 providers={"bench": {"type": "openai", "base_url": server.base_url, "api_key": "bench"}},
                                 max_retries=0, cache=False, timeout=max(30.0, 10 * role_s))
        await evaluated_run(PATHS[0], server, settings, role_s, generation, search_s)  # warm-up: imports, store, connections
        bare = statistics.mean([await bare_pipeline(generation, search_s) for _ in range(reps)])
        print(f"   the pipeline alone (plan, search, answer):  {bare:6.2f} s")
        for path in PATHS:
            walls, did = [], ""
            for _ in range(reps):
                wall, did = await evaluated_run(path, server, settings, role_s, generation, search_s)
                walls.append(wall)
            added[path.name] = statistics.mean(walls) - bare
            print(f"   {path.name}:\n"
                  f"      evaluated run {statistics.mean(walls):6.2f} s, added {added[path.name]:6.2f} s   ({did})")
    return added


def report_time(added: dict[str, float], attempts: Counter[int], role_s: float, generation: float) -> None:
    one, two, three, worst = (added[p.name] for p in PATHS)
    runs = sum(attempts.values())
    if runs:
        weights = {1: attempts.get(1, 0) / runs, 2: attempts.get(2, 0) / runs, 3: attempts.get(3, 0) / runs}
        average = weights[1] * one + weights[2] * two + weights[3] * three
        how = ", ".join(f"{k} attempt(s) {v:.0%}" for k, v in weights.items())
    else:
        average, how = one, "no plan runs to weight by: the 1-attempt path"
    realistic = (role_s, generation) == REALISTIC
    verdict = ("met" if average < ADDED_TARGET_S else "MISSES") if realistic else \
        "not compared: the target is for 1.5 s per role call and 3 s per generation"
    print(f"   average added: {average:.2f} s (paths weighted as figure 2's offline runs: {how}) "
          f"(target < 30 s: {verdict})")
    worst_verdict = ("within 30 s" if worst < ADDED_TARGET_S else "MISSES 30 s") if realistic else "not compared"
    print(f"   worst path added: {worst:.2f} s ({worst_verdict})")


# --- the run ---------------------------------------------------------------------------

def llm_judge(explicit: str | None) -> str | None:
    """The LLM judge to measure: ``--judge``, else the configured ``judge`` (None: none, or the offline one)."""
    ref = explicit or Settings.load().judge
    return None if not ref or ref == LOCAL_JUDGE else ref


async def main_async(args: argparse.Namespace) -> None:
    items = load_items(args.data)
    if args.quick:
        items = first_queries(items, QUICK_QUERIES)
    kinds: Counter[str] = Counter(i.kind for i in items)
    print(f"labelled plans: {len(items)} ({len({i.query for i in items})} queries; "
          + ", ".join(f"{k} {kinds[k]}" for k in ("aligned", *KINDS)) + f") from {os.path.relpath(args.data)}")
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.load(database_url=f"sqlite:///{tmp}/research.db")
        async with Runtime(settings) as runtime:
            print(f"\nplan loop, offline judge {LOCAL_JUDGE} with its local critic:", end=" ")
            offline = await run_plans(items, lambda rt: ResearchEvaluation.local(ResearchConfig(), runtime=rt), runtime)
            attempts = report_plans(offline, LOCAL_JUDGE)
            ref = llm_judge(args.judge)
            if ref is None:
                print("\n1./2. LLM judge: not configured, not measured (give --judge REF, or set `judge` in "
                      "jurist.yaml or JURIST_JUDGE; the scripted server cannot stand in for a judge's judgement)")
            else:
                config = judged_by(ResearchConfig(), ref)
                print(f"\nplan loop, LLM judge {ref} (every role, the plan critic and the escalation):", end=" ")
                llm = await run_plans(items, lambda rt: ResearchEvaluation(config, runtime=rt), runtime)
                report_plans(llm, ref)
    role_s, generation, search_s = args.role_latency, args.generation_latency, args.search_latency
    print(f"\n3. Time added by a three-stage evaluation (judges: the scripted server, {role_s:g} s per call; "
          f"planner and synthesiser {generation:g} s per generation; search {search_s:g} s)")
    added = await time_paths(role_s, generation, search_s, 1 if args.quick else args.reps)
    report_time(added, attempts, role_s, generation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--judge", default=None, help="an LLM judge to measure figures 1 and 2 with "
                        "(default: the configured judge; local/minilm or none: not measured)")
    parser.add_argument("--quick", action="store_true", help=f"only the first {QUICK_QUERIES} queries' plans; "
                        "each path timed once")
    parser.add_argument("--role-latency", type=float, default=REALISTIC[0], help="seconds per judge call")
    parser.add_argument("--generation-latency", type=float, default=REALISTIC[1],
                        help="seconds per plan or answer generation")
    parser.add_argument("--search-latency", type=float, default=1.0, help="seconds per search")
    parser.add_argument("--reps", type=int, default=2, help="timed runs per path (figure 3)")
    parser.add_argument("--data", type=Path, default=DATA, help="the labelled plans (JSONL)")
    args = parser.parse_args(argv)
    try:
        asyncio.run(main_async(args))
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
